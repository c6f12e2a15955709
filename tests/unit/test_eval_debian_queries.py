"""scripts/eval_debian_queries.py: `--set` parsing, per-slice figures and the targets, on hand-made run rows."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import load_script

script = load_script("eval_debian_queries")


def _row(case_id: str, tags: list[str], *, hit: float | None = None, rr: float = 0.0, refused: bool = False):
    """A stored case result as `run_case_results` returns it (has_gold, refused, metrics, buckets)."""
    has_gold = hit is not None
    metrics = {"hit@5": hit, "mrr@10": rr} if has_gold else {}
    buckets = [f"tag:{t}" for t in tags] + ["query:short"]
    return SimpleNamespace(
        case_id=case_id, has_gold=has_gold, refused=refused, metrics=metrics, buckets=buckets
    )


def test_set_values_are_read_as_toml_and_nested() -> None:
    assert script.parse_set(
        ["retrieval.rrf_k=20", 'retrieval.fusion.method="weighted"', "rerank.enabled=false", "index.x=a b"]
    ) == {
        "retrieval": {"rrf_k": 20, "fusion": {"method": "weighted"}},
        "rerank": {"enabled": False},
        "index": {"x": "a b"},
    }
    with pytest.raises(SystemExit, match="SECTION.KEY=VALUE"):
        script.parse_set(["rrf_k"])


def test_slices_split_ranking_and_refusal_by_tag() -> None:
    rows = [
        _row("a1", ["split:tune", "style:short"], hit=1.0, rr=1.0),
        _row("a2", ["split:tune", "style:colloquial"], hit=0.0, rr=0.0, refused=True),
        _row("a3", ["split:heldout", "style:short"], hit=1.0, rr=0.5),
        _row("n1", ["split:tune", "no_answer"], refused=True),
        _row("n2", ["split:heldout", "no_answer"]),
        _row("n3", ["split:tune", "no_answer"]),
    ]
    figures = script.slice_figures(rows)
    assert set(figures) == {"all", "split:tune", "split:heldout", "style:short", "style:colloquial"}
    everything = figures["all"]
    assert (everything["answerable"], everything["hit@5"], everything["mrr@10"]) == (3, 2 / 3, 0.5)
    assert (everything["no_answer"], everything["refused_no_answer"], everything["refusal_accuracy"]) == (
        3,
        1,
        1 / 3,
    )
    assert (everything["refused_answerable"], everything["wrongly_refused"]) == (1, 1 / 3)
    tune = figures["split:tune"]
    assert (tune["answerable"], tune["hit@5"], tune["mrr@10"]) == (2, 0.5, 0.5)
    assert (tune["refusal_accuracy"], tune["wrongly_refused"]) == (0.5, 0.5)
    held = figures["split:heldout"]
    assert (held["hit@5"], held["mrr@10"], held["refusal_accuracy"], held["wrongly_refused"]) == (
        1.0,
        0.5,
        0.0,
        0.0,
    )
    short = figures["style:short"]
    assert (short["answerable"], short["no_answer"], short["refusal_accuracy"]) == (2, 0, None)


def test_targets_are_judged_per_slice() -> None:
    met = script.targets_met(
        {"hit@5": 0.95, "mrr@10": 0.849, "refusal_accuracy": 2 / 3, "wrongly_refused": 0.06}
    )
    assert met == {"hit@5": True, "mrr@10": False, "refusal_accuracy": True, "wrongly_refused": False}
    assert script.targets_met(
        {"hit@5": None, "mrr@10": None, "refusal_accuracy": None, "wrongly_refused": None}
    ) == {
        "hit@5": None,
        "mrr@10": None,
        "refusal_accuracy": None,
        "wrongly_refused": None,
    }


def test_calibration_chooses_on_tune_and_applies_the_threshold_to_heldout() -> None:
    def scored(case_id: str, split: str, gold: bool, support: float | None) -> SimpleNamespace:
        snapshot = {"refusal_scores": {"lexical_support": support, "dense_cosine": 0.9}}
        return SimpleNamespace(
            case_id=case_id, has_gold=gold, snapshot=snapshot, buckets=[f"tag:split:{split}"]
        )

    rows = [
        scored("t1", "tune", True, 0.9),
        scored("t2", "tune", True, 0.6),
        scored("t3", "tune", False, 0.2),
        scored("t4", "tune", False, 0.7),
        # Held-out values far from tune's would move a threshold chosen on them; they must not.
        scored("h1", "heldout", True, 0.3),
        scored("h2", "heldout", False, 0.1),
        scored("h3", "heldout", False, None),  # n/a: never refused by lexical support
    ]
    reports = {r["score"]: r for r in script.tune_calibration(7, rows, 0.0)}
    lexical = reports["lexical_support"]
    assert lexical["proposed"]["threshold"] == 0.4  # midpoint of 0.2 and 0.6: 1/2 tune no-answer, 0 wrong
    held = lexical["heldout"]
    assert (held["refused_no_answer"], held["no_answer_cases"]) == (1, 2)
    assert (held["refused_answerable"], held["answerable_cases"]) == (1, 1)
    assert "rows" not in lexical
