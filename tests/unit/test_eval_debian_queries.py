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
