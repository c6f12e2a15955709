"""The gold journey read back from a stored snapshot (hand-built candidates), and the report's SVG
charts: text stays literal (no mathtext, escaped markup) and the same input gives the same SVG."""

from __future__ import annotations

import re

import pytest

from ragtriage.eval.run_view import CandidateView, snapshot_journey
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.types import RewriteResult, RouteResult, Trace
from ragtriage.service import charts
from ragtriage.triage.journey import gold_journey


def _candidate(chunk_id: str, **fields: object) -> CandidateView:
    base: dict[str, object] = {"rank": None, "final_score": None, "is_relevant": False, "is_selected": False}
    return CandidateView.model_validate({"chunk_id": chunk_id, **base, **fields})


CANDIDATES = [
    # c1: found by both routes, fused 1, reranked 1, in the final context.
    _candidate(
        "c1",
        doc_id="d1",
        route_ranks={"bm25": 1, "dense": 3},
        fused_rank=1,
        rank=1,
        rerank_score=0.9,
        final_rank=1,
    ),
    # c2: dense only, fused 2, the reranker kept it at 3 but it missed the final cut.
    _candidate("c2", doc_id="d2", route_ranks={"dense": 1}, fused_rank=2, rank=3, rerank_score=0.2),
    # c3: bm25 only, fused 3, never reranked (outside the reranker's input).
    _candidate("c3", doc_id="d2", route_ranks={"bm25": 4}, fused_rank=3, rank=3),
]


@pytest.mark.parametrize(
    ("gold", "expected"),
    [
        (
            "c1",
            {"routes": {"bm25": 1, "dense": 3}, "fused": 1, "reranked": 1, "final": 1, "dropped_at": None},
        ),
        (
            "c2",
            {
                "routes": {"bm25": None, "dense": 1},
                "fused": 2,
                "reranked": 3,
                "final": None,
                "dropped_at": "final",
            },
        ),
        (
            "c3",
            {
                "routes": {"bm25": 4, "dense": None},
                "fused": 3,
                "reranked": None,
                "final": None,
                "dropped_at": "reranked",
            },
        ),
        (
            "c9",
            {
                "routes": {"bm25": None, "dense": None},
                "fused": None,
                "reranked": None,
                "final": None,
                "dropped_at": "routes",
            },
        ),
    ],
)
def test_snapshot_journey_names_the_stage_where_gold_dropped_out(
    gold: str, expected: dict[str, object]
) -> None:
    (stages,) = snapshot_journey(CANDIDATES, [gold])
    got = {key: getattr(stages, key) for key in expected}
    assert got == expected


def test_snapshot_journey_by_document_takes_the_best_placed_chunk() -> None:
    (stages,) = snapshot_journey(CANDIDATES, ["d2"], by_doc=True)
    assert (stages.routes, stages.fused, stages.reranked) == ({"bm25": 4, "dense": 1}, 2, 3)
    assert stages.dropped_at == "final"


def test_without_a_reranker_a_fused_gold_chunk_drops_at_the_final_cut() -> None:
    fused_only = [_candidate("c1", route_ranks={"bm25": 2}, fused_rank=2, rank=2)]
    (stages,) = snapshot_journey(fused_only, ["c1"])
    assert stages.reranked is None and stages.dropped_at == "final"


def _hits(*pairs: tuple[str, int]) -> list[ScoredChunk]:
    return [ScoredChunk(chunk_id=chunk_id, rank=rank, score=1.0 / rank) for chunk_id, rank in pairs]


def test_snapshot_and_trace_journeys_place_the_drop_alike() -> None:
    # CANDIDATES as the trace a replay records (no rerank input list, like a stored snapshot).
    trace = Trace(
        query="q",
        rewrite=RewriteResult(raw_query="q", normalized_query="q", rewritten_query="q"),
        routes=[
            RouteResult(name="bm25", kind="bm25", query="q", hits=_hits(("c1", 1), ("c3", 4))),
            RouteResult(name="dense", kind="dense", query="q", hits=_hits(("c2", 1), ("c1", 3))),
        ],
        fused=_hits(("c1", 1), ("c2", 2), ("c3", 3)),
        reranked=_hits(("c1", 1), ("c2", 3)),
        final=["c1"],
    )
    gold = ["c1", "c2", "c3", "c9"]
    from_trace = gold_journey(trace, gold, "replay").gold
    from_snapshot = snapshot_journey(CANDIDATES, gold)
    assert (
        [(g.last_seen, g.dropped_at) for g in from_snapshot]
        == [(g.last_seen, g.dropped_at) for g in from_trace]
        == [("final", None), ("reranked", "final"), ("fused", "reranked"), (None, "routes")]
    )


def test_chart_text_is_literal_and_escaped() -> None:
    svg = charts.bucket_chart(["tag:$5$ 以内", "tag:<b>财务</b>"], ["mrr"], {"tag:$5$ 以内": {"mrr": 0.5}})
    assert svg.startswith('<svg class="chart" role="img"')
    assert "tag:$5$ 以内" in svg  # a dollar sign is not mathtext
    assert "tag:&lt;b&gt;财务&lt;/b&gt;" in svg and "<b>" not in svg
    assert "<metadata>" not in svg and "<?xml" not in svg


def test_the_same_data_gives_the_same_svg() -> None:
    def draw() -> str:
        return charts.scatter_chart(
            [("q1", 0.5, 1.0), ("q2", 1.0, 1.0), ("q3", 1.0, 1.0)], "mrr", label_a="A", label_b="B"
        )

    first, second = draw(), draw()
    assert first == second
    assert "×2" in first  # two cases share the dot at (1, 1)


def test_rank_shift_chart_counts_dropped_gold() -> None:
    svg = charts.rank_shift_chart({"run 1": ([0, 0, 2, -1], 1), "run 2": ([0], 0)})
    assert re.search(r">dropped<", svg) and "run 2" in svg
