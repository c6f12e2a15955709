"""`stage_diff` (pure) and the logged-vs-replayed Rich view."""

from __future__ import annotations

from rich.console import Console

from ragtriage.index.types import ScoredChunk
from ragtriage.logs.schema import RequestLog
from ragtriage.pipeline.types import RewriteResult, RouteResult, Trace
from ragtriage.render.logged_view import print_logged_replay
from ragtriage.replay.logged import LoggedReplay, RankChange, diff_request, stage_diff


def test_kept_gained_lost_and_rank_changes() -> None:
    diff = stage_diff(["a", "b", "c", "d"], ["c", "a", "e"])
    assert diff.kept == ["a", "c"]
    assert diff.gained == ["e"]
    assert diff.lost == ["b", "d"]
    assert diff.rank_changes == [
        RankChange(chunk_id="a", logged_rank=1, replayed_rank=2, delta=-1),
        RankChange(chunk_id="c", logged_rank=3, replayed_rank=1, delta=2),
    ]
    assert diff.unknown == [] and not diff.logged_missing


def test_unknown_ids_need_the_known_set() -> None:
    diff = stage_diff(["a", "old#1"], ["a"], known_ids={"a", "b"})
    assert diff.unknown == ["old#1"] and diff.lost == ["old#1"]
    assert stage_diff(["a", "old#1"], ["a"]).unknown == []


def test_stage_not_logged_and_duplicates() -> None:
    missing = stage_diff(None, ["a", "b"])
    assert missing.logged_missing and missing.gained == ["a", "b"] and missing.logged == []
    duplicated = stage_diff(["a", "a", "b"], ["b", "a"])
    assert duplicated.logged == ["a", "b"]
    assert [(c.chunk_id, c.logged_rank, c.replayed_rank) for c in duplicated.rank_changes] == [
        ("a", 1, 2),
        ("b", 2, 1),
    ]


def test_identical_lists_have_no_changes() -> None:
    diff = stage_diff(["a", "b"], ["a", "b"])
    assert diff.kept == ["a", "b"] and not (diff.gained or diff.lost or diff.rank_changes)


def _replayed(query: str) -> Trace:
    hits = [
        ScoredChunk(chunk_id="[bold]x[/bold]", rank=1, score=1.0),
        ScoredChunk(chunk_id="b", rank=2, score=0.5),
    ]
    return Trace(
        query=query,
        rewrite=RewriteResult(raw_query=query, normalized_query=query, rewritten_query=query),
        routes=[RouteResult(name="bm25_raw", kind="bm25", query=query, hits=hits)],
        fused=hits,
        reranked=hits,
        final=["[bold]x[/bold]"],
        gold=["b"],
    )


def test_diff_request_maps_every_logged_stage() -> None:
    record = RequestLog.model_validate(
        {
            "request_id": "r1",
            "raw_query": "q",
            "bm25_results": ["b", "gone#1"],
            "final_context_docs": ["b"],
        }
    )
    diffs = diff_request(record, _replayed("q"), known_ids={"b", "[bold]x[/bold]"})
    assert set(diffs) == {"bm25", "dense", "fused", "reranked", "final_context"}
    assert diffs["bm25"].unknown == ["gone#1"] and diffs["bm25"].gained == ["[bold]x[/bold]"]
    assert diffs["dense"].logged_missing and diffs["dense"].replayed == []
    assert diffs["final_context"].lost == ["b"]


def test_view_prints_data_literally_and_marks_unknown() -> None:
    record = RequestLog.model_validate(
        {"request_id": "r[red]1[/red]", "raw_query": "[link=x]q[/link]", "bm25_results": ["gone#1", "b"]}
    )
    replayed = _replayed(record.raw_query)
    from ragtriage.replay.logged import logged_trace

    comparison = LoggedReplay(
        request_id=record.request_id,
        logged=logged_trace(record),
        replayed=replayed,
        diffs=diff_request(record, replayed, known_ids={"b", "[bold]x[/bold]"}),
    )
    console = Console(record=True, width=160, markup=False, color_system=None)
    print_logged_replay(console, comparison)
    text = console.export_text()
    assert "r[red]1[/red]" in text and "[link=x]q[/link]" in text and "[bold]x[/bold]" in text
    assert "gone#1  unknown" in text and "new" in text and "★ b" in text
    assert "1 logged chunk id unknown to the KB: gone#1 (stale index or another KB)" in text
