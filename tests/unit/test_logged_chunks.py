"""What ingest keeps of each logged document beyond its id and score (`logged_chunks`: the document
id and source from `document.metadata`, a fingerprint of `document.content`), and how fidelity uses
it: a chunk id the KB lacks is named by its logged document, a kept id with other text is a chunk
changed after the request (issue 25 item 5)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ragtriage.config.settings import OtelSettings
from ragtriage.logs.formats.assemble import Assembled
from ragtriage.logs.formats.detect import detect
from ragtriage.logs.formats.read import read_traces
from ragtriage.logs.formats.spans import text_fingerprint
from ragtriage.logs.schema import RequestLog
from ragtriage.pipeline.types import RewriteResult, Trace
from ragtriage.replay.fidelity import (
    ChunkChange,
    RequestFidelity,
    compare_request,
    explain_request,
    summarize,
)
from ragtriage.replay.fidelity_run import KBChunk, _changed_chunks
from tests.trace_producers import make_tracer, otlp_lines, phoenix_page, record_request

REQUEST: dict[str, Any] = {
    "request_id": "r-1",
    "ts": "2026-11-02T08:00:47.250Z",
    "raw_query": "补签怎么申请",
    "stages": {
        "bm25": [{"chunk_id": "a1", "score": 2.0}, {"chunk_id": "b1", "score": 1.0}],
        "dense": [{"chunk_id": "b1", "score": 0.9}],
        "fused": [{"chunk_id": "a1", "score": 0.03}, {"chunk_id": "b1", "score": 0.02}],
        "reranked": [{"chunk_id": "a1", "score": 0.9}],
        "final_context": ["a1"],
    },
}


def _read(tmp_path: Path, fmt: str, **kw: Any) -> RequestLog:
    tracer, exporter = make_tracer()
    record_request(tracer, REQUEST, **kw)
    spans = exporter.get_finished_spans()
    path = tmp_path / f"traces.{fmt}"
    if fmt == "otlp":
        path.write_text(otlp_lines(spans, per_line=3), encoding="utf-8")
    else:
        import json

        path.write_text(json.dumps(phoenix_page(spans), ensure_ascii=False), encoding="utf-8")
    items = list(read_traces([(path, *detect(path))], OtelSettings()))
    assert len(items) == 1 and isinstance(items[0], Assembled)
    assert b"content of" not in items[0].body  # the text itself is never stored
    return RequestLog.model_validate_json(items[0].body)


def test_ingest_keeps_a_fingerprint_of_each_logged_content(tmp_path: Path) -> None:
    record = _read(tmp_path, "otlp")
    chunks = (record.model_extra or {})["logged_chunks"]
    assert chunks == {
        "a1": {"content_hash": text_fingerprint("content of a1")},
        "b1": {"content_hash": text_fingerprint("content of b1")},
    }
    assert text_fingerprint(" content  of\na1 ") == text_fingerprint("content of a1")


def test_ingest_keeps_the_logged_document_source_from_metadata(tmp_path: Path) -> None:
    # LangChain documents carry no document.id; their metadata has the chunk id and the source.
    for fmt in ("otlp", "phoenix"):
        record = _read(tmp_path, fmt, langchain_documents=True)
        chunks = (record.model_extra or {})["logged_chunks"]
        assert chunks["a1"] == {"source": "kb", "content_hash": text_fingerprint("content of a1")}, fmt


def _fidelity(logged: dict[str, list[str]], replayed: Trace, live: set[str]) -> RequestFidelity:
    return RequestFidelity(
        request_id="r-1",
        ts=datetime(2026, 11, 2, tzinfo=timezone.utc),
        pipeline_version="v1",
        stages=compare_request(logged, replayed, live),
    )


def _replayed(bm25: list[str]) -> Trace:
    from ragtriage.index.types import ScoredChunk
    from ragtriage.pipeline.types import RouteResult

    hits = [ScoredChunk(chunk_id=c, rank=r, score=1.0 / r) for r, c in enumerate(bm25, 1)]
    return Trace(
        query="q",
        rewrite=RewriteResult(raw_query="q", normalized_query="q", rewritten_query="q"),
        routes=[RouteResult(name="bm25_raw", kind="bm25", query="q", hits=hits)],
        final=[],
    )


def test_a_chunk_whose_text_changed_explains_the_stage_it_moved_in() -> None:
    fidelity = _fidelity({"bm25": ["a1", "b1"]}, _replayed(["b1", "a1"]), {"a1", "b1"})
    when = datetime(2026, 11, 20, 9, 30, tzinfo=timezone.utc)
    fidelity.changed_chunks = {"a1": ChunkChange(doc_id="leave", updated_at=when, content_differs=True)}
    explain_request(fidelity, replayed_docs={}, stale_docs_of_version=set(), members={"bm25": {"a1", "b1"}})
    reason = fidelity.stages[0].reason
    assert reason is not None and reason.kind == "chunk_changed" and not fidelity.unexplained
    assert reason.text == (
        "chunk a1 of document leave changed after the request (updated_at 2026-11-20 09:30 UTC; "
        "the logged text is not the KB's)"
    )
    report = summarize([fidelity])
    assert report.stale_documents == {"leave": 1}
    assert report.stale_evidence["leave"].startswith("chunk a1 of document leave changed after the request")


def test_without_the_change_the_same_reorder_is_unexplained() -> None:
    fidelity = _fidelity({"bm25": ["a1", "b1"]}, _replayed(["b1", "a1"]), {"a1", "b1"})
    explain_request(fidelity, replayed_docs={}, stale_docs_of_version=set(), members={"bm25": {"a1", "b1"}})
    assert fidelity.unexplained == ["bm25"]


def test_a_chunk_changes_by_its_logged_text_or_by_a_newer_kb_version_written_after_the_request() -> None:
    ts = datetime(2026, 11, 2, tzinfo=timezone.utc)
    later, earlier = ts + timedelta(days=3), ts - timedelta(days=3)
    kb = {
        "a1": KBChunk("leave", text_fingerprint("new text"), earlier, 1),
        "b1": KBChunk("leave", text_fingerprint("same"), later, 2),
        "c1": KBChunk("rooms", text_fingerprint("x"), later, 2),
        "d1": KBChunk("rooms", text_fingerprint("y"), earlier, 2),
        "e1": KBChunk("rooms", text_fingerprint("z"), later, 2),
    }
    result = RequestFidelity(request_id="r", ts=ts)
    own = {"a1": text_fingerprint("old text"), "b1": text_fingerprint("same")}
    version = {"a1": ChunkChange(doc_id="leave", updated_at=earlier, content_differs=True)}
    changed = _changed_chunks(
        result, {"a1", "b1", "c1", "d1", "e1"}, {"a1", "b1", "c1", "d1"}, own, kb, version
    )
    # a1: its logged text is not the KB's; b1: logged the KB's text (a later write changed nothing);
    # c1: no text logged, a newer version written after the request; d1: written before it;
    # e1: never logged by this request (a new chunk to it, not a changed one).
    assert sorted(changed) == ["a1", "c1"]
    assert changed["c1"] == ChunkChange(doc_id="rooms", updated_at=later, content_differs=False)


def test_a_rowless_id_is_named_by_its_logged_document_id_source_or_text(workspace: Any) -> None:
    from ragtriage.replay.fidelity_run import name_documents
    from ragtriage.store.db import write_session
    from ragtriage.store.kb_tables import ChunkRow, DocumentRow

    with write_session(workspace.engine) as session:
        session.add(DocumentRow(doc_id="leave", source_path="/srv/kb/leave.md"))
        session.add(DocumentRow(doc_id="rooms", source_path="/srv/kb/rooms.md"))
        session.add(ChunkRow(chunk_id="rooms-new", doc_id="rooms", content="会议室  可提前七天预订"))
    logged = {
        "old-1": {"doc_id": "leave"},
        "old-2": {"doc_id": "gone", "source": "C:\\team\\docs\\leave.md"},
        "old-3": {
            "source": "https://wiki/other.md",
            "content_hash": text_fingerprint("会议室 可提前七天预订"),
        },
        "old-4": {"doc_id": "gone", "content_hash": text_fingerprint("never in the KB")},
    }
    assert name_documents(workspace.engine, logged) == {
        "old-1": ("leave", "logged document id"),
        "old-2": ("leave", "logged source"),
        "old-3": ("rooms", "logged content"),
    }


def test_a_langfuse_retriever_output_gives_the_document_and_a_fingerprint_of_its_text(tmp_path: Path) -> None:
    import json

    from tests.langfuse_producer import langfuse_export, langfuse_page

    observations, traces, _ = langfuse_export([REQUEST])
    for observation in observations:
        if observation.get("type") == "RETRIEVER":
            documents = json.loads(observation["output"])
            for doc in documents:
                doc["page_content"] = f"text of {doc['id']}"
                doc["metadata"] = {"document_id": "leave", "source": "leave.md"}
            observation["output"] = json.dumps(documents)
    obs, trace_file = tmp_path / "obs.json", tmp_path / "traces.jsonl"
    obs.write_text(json.dumps(langfuse_page(observations)), encoding="utf-8")
    trace_file.write_text("".join(json.dumps(t) + "\n" for t in traces), encoding="utf-8")
    items = list(read_traces([(f, *detect(f)) for f in (obs, trace_file)], OtelSettings()))
    assert len(items) == 1 and isinstance(items[0], Assembled) and b"text of" not in items[0].body
    chunks = (RequestLog.model_validate_json(items[0].body).model_extra or {})["logged_chunks"]
    assert chunks["a1"] == {
        "doc_id": "leave",
        "source": "leave.md",
        "content_hash": text_fingerprint("text of a1"),
    }
