"""Per-stage fidelity and its documented reasons, on hand-built traces (pure; foreign ids too)."""

from __future__ import annotations

import uuid

import pytest

from ragtriage.config.settings import RetrievalSettings
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.types import Candidate, RewriteResult, RouteResult, Trace
from ragtriage.replay.fidelity import (
    RequestFidelity,
    compare_request,
    compare_stage,
    explain_request,
    stage_limits,
    summarize,
)

U = [str(uuid.UUID(int=i + 1)) for i in range(6)]


def _hits(ids: list[str], scores: list[float] | None = None) -> list[ScoredChunk]:
    return [
        ScoredChunk(chunk_id=c, rank=r, score=(scores or [0.0] * len(ids))[r - 1])
        for r, c in enumerate(ids, 1)
    ]


def _trace(
    bm25: list[str], dense: list[str], fused: list[str], final: list[str], docs: dict[str, str]
) -> Trace:
    return Trace(
        query="q",
        rewrite=RewriteResult(raw_query="q", normalized_query="q", rewritten_query="q"),
        routes=[
            RouteResult(
                name="bm25_raw", kind="bm25", query="q", hits=_hits(bm25, [9.0, 8.0, 7.0][: len(bm25)])
            ),
            RouteResult(name="dense_raw", kind="dense", query="q", hits=_hits(dense)),
        ],
        fused=_hits(fused),
        reranked=_hits(fused),
        final=final,
        candidates=[Candidate(chunk_id=c, doc_id=d) for c, d in docs.items()],
    )


def test_an_exact_stage_and_a_reordered_one() -> None:
    same = compare_stage("bm25", [U[0], "4711", U[1]], [U[0], "4711", U[1]], {U[0], U[1], "4711"})
    assert same.exact and same.rbo == 1.0 and same.cell == "bm25 3/3" and same.differs() == ""
    moved = compare_stage("fused", [U[0], U[1]], [U[1], U[0]], {U[0], U[1]})
    assert not moved.exact and moved.overlap == 2 and moved.rbo == pytest.approx(0.9)
    assert moved.cell == "fused 2/2*" and moved.differs() == "2 moved"


def test_unknown_logged_ids_are_counted() -> None:
    stage = compare_stage("dense", ["4711", U[0], U[1]], [U[0], U[1], U[2]], {U[0], U[1], U[2]})
    assert stage.unknown == ["4711"] and stage.unknown_share == pytest.approx(1 / 3)
    assert stage.lost == ["4711"] and stage.gained == [U[2]] and stage.overlap == 2


def _request(
    logged: dict[str, list[str] | None], replay: Trace, live: set[str], **kw: object
) -> RequestFidelity:
    return RequestFidelity(
        request_id="r1", pipeline_version="v1", stages=compare_request(logged, replay, live), **kw
    )  # type: ignore[arg-type]


def test_a_stale_document_explains_the_stage_and_everything_downstream() -> None:
    docs = {U[0]: "kb/a", U[1]: "kb/b", U[3]: "kb/changed"}
    replay = _trace([U[0], U[3]], [U[1]], [U[0], U[3], U[1]], [U[0], U[3]], docs)
    logged = {
        "bm25": [U[0], "old-1"],
        "dense": [U[1]],
        "fused": [U[0], "old-1", U[1]],
        "final_context": [U[0], "old-1"],
    }
    result = _request(logged, replay, {U[0], U[1], U[3]}, stale_documents={"kb/changed": ["old-1"]})
    explain_request(result, replayed_docs=docs, stale_docs_of_version={"kb/changed"})
    reasons = {s.stage: s.reason for s in result.stages if not s.exact}
    assert set(reasons) == {"bm25", "fused", "final_context"}
    assert all(
        r is not None and r.kind == "stale_index" and "kb/changed has changed since" in r.text
        for r in reasons.values()
    )
    assert result.unexplained == [] and result.line == "bm25 1/2 · dense 1/1 · fused 2/3 · final 1/2"


def test_a_miss_with_only_foreign_unknown_ids_stays_unexplained() -> None:
    replay = _trace([U[0], U[1]], [U[1]], [U[0], U[1]], [U[0]], {U[0]: "a", U[1]: "b"})
    logged = {
        "bm25": ["4711", U[1]],
        "dense": [U[1]],
        "fused": None,
        "reranked": None,
        "final_context": [U[0]],
    }
    result = _request(logged, replay, {U[0], U[1]}, unknown_ids=["4711"])
    explain_request(result, replayed_docs={U[0]: "a", U[1]: "b"}, stale_docs_of_version=set())
    assert [s.stage for s in result.stages] == ["bm25", "dense", "final_context"]
    assert result.unexplained == ["bm25"] and result.stages[0].reason is None


def test_bm25_statistics_of_a_stale_index_explain_a_reorder_of_the_same_chunks() -> None:
    replay = _trace([U[1], U[0]], [U[1]], [U[1], U[0]], [U[1]], {U[0]: "a", U[1]: "b"})
    logged = {"bm25": [U[0], U[1]], "dense": [U[1]], "final_context": [U[1]]}
    result = _request(logged, replay, {U[0], U[1]})
    logged_scores = {"bm25": {U[0]: 9.5, U[1]: 9.4}}
    replayed_scores = {"bm25": {U[1]: 9.0, U[0]: 8.0}}
    explain_request(
        result,
        replayed_docs={},
        stale_docs_of_version=set(),
        logged_scores=logged_scores,
        replayed_scores=replayed_scores,
    )
    assert result.unexplained == ["bm25"], "no stale index known: a reorder is a fidelity bug"
    explain_request(
        result,
        replayed_docs={},
        stale_docs_of_version={"kb/changed"},
        logged_scores=logged_scores,
        replayed_scores=replayed_scores,
    )
    reason = result.stages[0].reason
    assert reason is not None and reason.kind == "stale_index" and "corpus-wide" in reason.text
    assert "seen in other requests of v1" in reason.text


def test_a_different_rewrite_and_a_different_k_are_reasons_but_not_documented_ones() -> None:
    replay = _trace([U[0]], [U[1], U[2], U[3]], [U[1], U[0]], [U[1]], {})
    logged = {"bm25": [U[0]], "dense": [U[1], U[2]], "fused": [U[0], U[1]], "final_context": [U[1]]}
    result = _request(logged, replay, set(U), rewrite_differs="rewritten query 'a' logged, 'b' replayed")
    explain_request(result, replayed_docs={}, stale_docs_of_version=set())
    kinds = {s.stage: s.reason.kind for s in result.stages if s.reason is not None}
    assert kinds == {"dense": "k_differs", "fused": "rewrite"}
    assert result.unexplained == ["dense", "fused"]


def test_a_route_kind_the_profile_does_not_run_is_said_so() -> None:
    # A dense-only profile replaying a request that logged a BM25 list too.
    replay = _trace([U[0]], [U[1], U[2]], [U[1], U[2]], [U[1]], {})
    replay.routes = [r for r in replay.routes if r.kind == "dense"]
    logged = {"bm25": [U[3], U[4]], "dense": [U[1], U[2]], "final_context": [U[1]]}
    result = _request(logged, replay, set(U))
    explain_request(result, replayed_docs={}, stale_docs_of_version=set())
    bm25 = next(s for s in result.stages if s.stage == "bm25")
    assert bm25.route is None and bm25.reason is not None
    assert (bm25.reason.kind, bm25.reason.text) == (
        "k_differs",
        "the profile runs no bm25 route where production logged 2",
    )


def test_a_replayed_route_that_ran_out_of_matches_is_not_a_k_the_profile_keeps() -> None:
    # Production's BM25 matched 3 chunks for "conffile 是啥"; the local one matches only the first
    # (the other two shared nothing but 是): the profile keeps up to 3, so no k explains the miss.
    replay = _trace([U[0]], [U[1]], [U[0], U[1]], [U[0]], {})
    logged = {"bm25": [U[0], U[2], U[3]], "dense": [U[1]], "final_context": [U[0]]}
    limits = stage_limits(RetrievalSettings(route_k={"bm25_raw": 3, "dense_raw": 2}, candidate_pool=18))
    assert (limits["bm25_raw"], limits["dense_raw"], limits["dense_sub"], limits["fused"]) == (3, 2, 10, 18)
    result = _request(logged, replay, set(U))
    explain_request(result, replayed_docs={}, stale_docs_of_version=set(), replayed_limits=limits)
    assert result.stages[0].reason is None and result.unexplained == ["bm25"]
    # A profile that keeps 1 where production kept 3 is a k that differs.
    result = _request(logged, replay, set(U))
    limits = stage_limits(RetrievalSettings(route_k={"bm25_raw": 1}))
    explain_request(result, replayed_docs={}, stale_docs_of_version=set(), replayed_limits=limits)
    reason = result.stages[0].reason
    assert reason is not None and reason.text == "the profile keeps 1 where production kept 3"


def test_summary_per_stage_version_and_route() -> None:
    replay = _trace([U[0]], [U[1]], [U[0], U[1]], [U[0]], {})
    exact = _request({"bm25": [U[0]], "dense": [U[1]], "final_context": [U[0]]}, replay, set(U))
    off = RequestFidelity(
        request_id="r2",
        pipeline_version="v2",
        stages=compare_request({"bm25": [U[2]], "dense": [U[1]], "final_context": [U[0]]}, replay, set(U)),
    )
    report = summarize([exact, off], least=5)
    bm25 = next(s for s in report.by_stage if s.stage == "bm25")
    assert bm25.stages == 2 and bm25.exact_share == 0.5 and bm25.unexplained_misses == 1
    assert [(s.pipeline_version, s.stage) for s in report.by_version][:3] == [
        ("v1", "bm25"),
        ("v1", "dense"),
        ("v1", "final_context"),
    ]
    assert [s.route for s in report.by_route] == ["bm25_raw", "dense_raw"]
    assert report.faithful_requests == 1 and report.unexplained_requests == 1
    assert [r.request_id for r in report.least_faithful] == ["r2"]
    assert summarize([]).notes and "widen --since" in summarize([]).notes[0]


def test_a_fused_list_production_cut_names_the_keep_that_cuts_it() -> None:
    # Production logged its reranker's input (its fused top 2) as the fused list; the replay fused
    # every chunk any route found: the report says which knob cuts it the same way.
    replay = _trace([U[0], U[2]], [U[1]], [U[0], U[1], U[2]], [U[0]], {})
    logged = {"bm25": [U[0], U[2]], "dense": [U[1]], "fused": [U[0], U[1]], "final_context": [U[0]]}
    result = _request(logged, replay, set(U))
    explain_request(result, replayed_docs={}, stale_docs_of_version=set())
    fused = next(s for s in result.stages if s.stage == "fused")
    assert fused.reason is not None and fused.reason.text == (
        "the profile keeps 3 where production kept 2 (production cut its fused list: "
        "[retrieval.fusion] keep = 2)"
    )
    assert stage_limits(RetrievalSettings(candidate_pool=18, fusion={"keep": 10}))["fused"] == 10  # type: ignore[arg-type]
