"""Gold journey: ranks at every route and stage, and the stage where gold dropped out."""

from __future__ import annotations

import pytest

from ragtriage.triage.journey import gold_journey, recorded_stages
from tests.unit.triage_fakes import make_trace


def test_ranks_at_every_route_and_stage() -> None:
    trace = make_trace(
        "q",
        routes={"bm25_raw": ["a", "g"], "dense_raw": ["g", "b"]},
        fused=["g", "a", "b"],
        rerank_input=["g", "a", "b"],
        reranked=["a", "g", "b"],
        final=["a", "g"],
    )
    journey = gold_journey(trace, ["g"], "replay")
    gold = journey.gold[0]
    assert gold.routes == {"bm25_raw": 2, "dense_raw": 1}
    assert (gold.fused, gold.rerank_input, gold.reranked, gold.final) == (1, 1, 2, 2)
    assert gold.dropped_at is None and gold.last_seen == "final"
    assert journey.reached_final and journey.first_drop is None


@pytest.mark.parametrize(
    ("kwargs", "dropped_at"),
    [
        ({"routes": {"bm25_raw": ["a"], "dense_raw": ["b"]}, "final": ["a"]}, "routes"),
        ({"routes": {"bm25_raw": ["a", "g"]}, "fused": ["a"], "final": ["a"]}, "fused"),
        (
            {"routes": {"bm25_raw": ["a", "g"]}, "fused": ["a", "g"], "rerank_input": ["a"], "final": ["a"]},
            "rerank_input",
        ),
        ({"routes": {"bm25_raw": ["a", "g"]}, "reranked": ["a"], "final": ["a"]}, "reranked"),
        ({"routes": {"bm25_raw": ["a", "g"]}, "reranked": ["a", "g"], "final": ["a"]}, "final"),
    ],
)
def test_first_stage_where_gold_dropped_out(kwargs: dict, dropped_at: str) -> None:
    journey = gold_journey(make_trace("q", **kwargs), ["g"], "replay")
    assert journey.gold[0].dropped_at == dropped_at
    assert journey.first_drop == dropped_at
    assert not journey.reached_final


def test_unrecorded_stage_is_skipped_for_logged_traces() -> None:
    # A logged request without a rerank input: gold in fused and reranked, cut from final.
    trace = make_trace(
        "q", routes={"bm25": ["g"]}, fused=["g"], rerank_input=[], reranked=["a", "g"], final=["a"]
    )
    assert recorded_stages(trace) == ["routes", "fused", "reranked", "final"]
    gold = gold_journey(trace, ["g"], "logged").gold[0]
    assert gold.rerank_input is None and gold.dropped_at == "final"


def test_best_travelled_gold_chunk_decides_first_drop() -> None:
    trace = make_trace(
        "q", routes={"bm25_raw": ["a", "g2"]}, fused=["a", "g2"], rerank_input=["a"], final=["a"]
    )
    journey = gold_journey(trace, ["g1", "g2"], "replay")
    assert [g.dropped_at for g in journey.gold] == ["routes", "rerank_input"]
    assert journey.first_drop == "rerank_input"


def test_refused_run_has_empty_final_and_still_counts_the_stage() -> None:
    trace = make_trace("q", routes={"bm25_raw": ["g"]}, final=[])
    assert recorded_stages(trace)[-1] == "final"
    assert gold_journey(trace, ["g"], "replay").gold[0].dropped_at == "final"
