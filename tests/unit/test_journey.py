"""Gold journey: ranks at every route and stage, and the stage where gold dropped out."""

from __future__ import annotations

import pytest
from rich.console import Console, RenderableType

from ragtriage.logs.schema import RequestLog, to_trace
from ragtriage.pipeline.types import Trace
from ragtriage.render.journey_view import journey_notes, journey_table
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


def plain(renderable: RenderableType, width: int) -> str:
    console = Console(record=True, width=width, markup=False, color_system=None)
    console.print(renderable)
    return console.export_text()


def _logged(stages: dict) -> Trace:
    record = RequestLog.model_validate(
        {"request_id": "r1", "ts": "2026-11-30T08:00:00Z", "raw_query": "q", "stages": stages}
    )
    return to_trace(record)


def test_final_context_not_logged_is_no_drop() -> None:
    # A retriever + LLM pipeline logs its retrieval only: gold retrieved is not "dropped at final".
    trace = _logged({"dense": [{"chunk_id": "a", "score": 0.9}, {"chunk_id": "g", "score": 0.8}]})
    assert trace.not_logged == ["fused", "reranked", "final"] and trace.final == []
    journey = gold_journey(trace, ["g"], "logged")
    assert journey.stages == ["routes"] and not journey.final_logged
    assert journey.not_logged == ["fused", "rerank_input", "reranked", "final"]
    gold = journey.gold[0]
    assert (gold.dropped_at, gold.last_seen, gold.final) == (None, "routes", None)
    assert journey.first_drop is None and not journey.reached_final
    # Gold absent from the logged retrieval did drop, at a stage production recorded.
    assert gold_journey(trace, ["x"], "logged").first_drop == "routes"
    # One gold chunk retrieved is enough: the other one's drop at routes does not decide.
    assert gold_journey(trace, ["x", "g"], "logged").first_drop is None


def test_final_context_logged_empty_is_a_drop() -> None:
    trace = _logged({"dense": ["a", "g"], "reranked": ["g", "a"], "final_context": []})
    assert trace.not_logged == ["fused"]
    journey = gold_journey(trace, ["g"], "logged")
    assert journey.final_logged and journey.stages[-1] == "final"
    assert journey.gold[0].dropped_at == "final" and journey.first_drop == "final"


def test_journey_table_says_not_logged_in_words() -> None:
    trace = _logged({"bm25": ["g"]})
    journey = gold_journey(trace, ["g"], "logged")
    table = plain(journey_table(journey, "gold journey (logged)"), width=200)
    assert "final not logged" in table and "reached final" not in table
    assert journey_notes(journey) == [
        "final context: not logged by production (no reranker/context span); "
        "g last seen at routes, where it went next is unknown"
    ]
    assert journey_notes(gold_journey(_logged({"bm25": ["g"], "final_context": []}), ["g"], "logged")) == []


def test_case_screen_strip_ends_with_a_not_logged_final_cell() -> None:
    from ragtriage.tui.widgets.journey_strip import NOT_LOGGED, journey_cells

    journey = gold_journey(_logged({"bm25": ["a", "g"]}), ["g"], "logged")
    assert journey_cells(journey) == [("bm25_raw", 2, False), ("final", NOT_LOGGED, False)]
    refused = gold_journey(_logged({"bm25": ["a", "g"], "final_context": []}), ["g"], "logged")
    assert journey_cells(refused) == [("bm25_raw", 2, False), ("final", None, True)]
