"""Later facts about a stored request merge in (issue 26 items 1 and 2): feedback ingested after its
trace gives the queue a one-run ingest gives, for OTLP EVALUATOR carrier spans, Phoenix span
annotations and Langfuse scores (all made by the real producers); a log without scores after the
trace is no conflict, the trace after the log adds its scores; a different request under a stored
id is still a conflict; the same files again are all duplicates; the merge is written in the
batch's one transaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine
from sqlmodel import col

from ragtriage.errors import LogFormatError
from ragtriage.logs.ingest import IngestReport, ingest_files, ingest_lines
from ragtriage.logs.requests import conflicting_lines, find_request, get_request, quarantined_lines
from ragtriage.logs.schema import STAGE_NAMES
from ragtriage.store import ingest_sql
from ragtriage.store.db import read_session
from ragtriage.store.log_tables import LogConflictRow, LogMergeRow, RequestLogRow, TriageRow
from tests.conftest import RunCli
from tests.integration.test_trace_ingest import _requests, _store, _stored
from tests.langfuse_producer import langfuse_export, langfuse_page
from tests.trace_producers import (
    make_tracer,
    otlp_lines,
    phoenix_annotations,
    phoenix_page,
    record_request,
    stage_items,
)


def _traces_and_feedback(tmp_path: Path, fmt: str) -> tuple[list[Path], list[Path]]:
    """The fixture traffic's trace files and feedback files in `fmt`, feedback apart as each
    producer sends it after the trace."""
    requests = _requests()
    if fmt == "langfuse":
        observations, traces, scores = langfuse_export(requests)
        obs, trs, sco = tmp_path / "obs.json", tmp_path / "traces.jsonl", tmp_path / "scores.json"
        obs.write_text(json.dumps(langfuse_page(observations), ensure_ascii=False, indent=2))
        trs.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in traces))
        sco.write_text(json.dumps(langfuse_page(scores), ensure_ascii=False, indent=2))
        return [obs, trs], [sco]
    if fmt == "otlp-root-annotations":  # the same traces exported again once rated, on the root span
        tracer, exporter = make_tracer(seed=5)
        for request in requests:
            record_request(tracer, {**request, "feedback": None})
        rated_tracer, rated = make_tracer(seed=5)
        for request in requests:
            record_request(rated_tracer, request)
        trace, again = tmp_path / "traces.jsonl", tmp_path / "traces-rated.jsonl"
        trace.write_text(otlp_lines(exporter.get_finished_spans()))
        again.write_text(otlp_lines(rated.get_finished_spans()))
        return [trace], [again]
    tracer, exporter = make_tracer(seed=5)
    for request in requests:
        record_request(tracer, request, feedback_as="evaluator")
    spans = exporter.get_finished_spans()
    if fmt == "phoenix":
        kept, notes = phoenix_annotations(spans)
        page, annotations = tmp_path / "spans.json", tmp_path / "span_annotations.json"
        page.write_text(json.dumps(phoenix_page(kept), ensure_ascii=False, indent=2))
        annotations.write_text(json.dumps(notes, ensure_ascii=False, indent=2))
        return [page], [annotations]
    carriers = [s for s in spans if (s.attributes or {}).get("openinference.span.kind") == "EVALUATOR"]
    trace, feedback = tmp_path / "traces.jsonl", tmp_path / "feedback.jsonl"
    trace.write_text(otlp_lines([s for s in spans if s not in carriers]))
    feedback.write_text(otlp_lines(carriers))
    return [trace], [feedback]


def _rows(engine: Engine, table: Any) -> int:
    with read_session(engine) as session:
        return int(session.execute(select(func.count()).select_from(table)).scalar_one())


def _bodies(engine: Engine) -> dict[str, str]:
    with read_session(engine) as session:
        rows = session.execute(select(col(RequestLogRow.request_id), col(RequestLogRow.body)))
        return {request_id: body for request_id, body in rows}


@pytest.mark.parametrize("fmt", ["otlp", "otlp-root-annotations", "phoenix", "langfuse"])
def test_feedback_after_its_trace_gives_the_queue_of_one_run(tmp_path: Path, fmt: str) -> None:
    traces, feedback = _traces_and_feedback(tmp_path, fmt)
    one = _store(tmp_path, "one")
    # One run: the traces with their feedback (the rated export alone, when it is a whole export).
    ingest_files(one, feedback if fmt == "otlp-root-annotations" else traces + feedback)
    two = _store(tmp_path, "two")
    first = ingest_files(two, traces)
    late = ingest_files(two, feedback)
    # Every feedback merges in (a whole trace exported again: the rated ones; the rest add nothing).
    rated = late.read if fmt != "otlp-root-annotations" else late.read - late.duplicates
    assert (late.merged, late.conflicts, late.quarantined, late.ingested) == (rated, 0, 0, 0)
    assert late.merged > 0
    assert late.reconciles() and late.files_without_requests == []
    # The late negative feedback flags its requests: the same queue, ratings and escalations.
    assert first.flagged + late.flagged == _rows(one, TriageRow) > first.flagged
    assert _stored(two, ms=fmt == "langfuse") == _stored(one, ms=fmt == "langfuse")
    # The traces, then everything again in a second run (the user's second ingest had both).
    three = _store(tmp_path, "three")
    ingest_files(three, traces)
    both = ingest_files(three, traces + feedback)
    assert both.conflicts == 0 and both.merged > 0 and both.reconciles()
    assert _stored(three, ms=fmt == "langfuse") == _stored(one, ms=fmt == "langfuse")
    # Where each fact came from.
    with read_session(two) as session:
        merge = session.execute(select(LogMergeRow)).scalars().first()
    assert merge is not None and merge.source_file == str(feedback[0].resolve())
    assert "feedback" in merge.added
    # The same feedback again, or everything in one run, changes nothing.
    bodies, merges = _bodies(two), _rows(two, LogMergeRow)
    for files in (feedback, traces + feedback):
        again = ingest_files(two, files)
        assert (again.duplicates, again.merged, again.flagged) == (again.read, 0, 0)
        assert (_bodies(two), _rows(two, LogMergeRow)) == (bodies, merges)


def test_langfuse_observations_first_then_all_three_files_is_one_run(tmp_path: Path) -> None:
    files, scores = _traces_and_feedback(tmp_path, "langfuse")
    one = _store(tmp_path, "one")
    ingest_files(one, files + scores)
    engine = _store(tmp_path, "late")
    ingest_files(engine, files[:1])  # no traces file: each request is known by its trace id only
    report = ingest_files(engine, files + scores)
    assert report.merged == report.read and report.conflicts == 0 and report.reconciles()
    assert _stored(engine, ms=True) == _stored(one, ms=True)


def _flat_without_scores(request: dict[str, Any]) -> dict[str, Any]:
    """The request as a team's flat log writes it: ids only, no score, no trace."""
    stages = request.get("stages") or {}
    line: dict[str, Any] = {
        "request_id": request["request_id"],
        "query": request["raw_query"],
        "timestamp": request["ts"],
        "session": request.get("session"),
        "user": request.get("user"),
        "answer": request.get("answer"),
    }
    for flat, stage in (
        ("bm25_results", "bm25"),
        ("vector_results", "dense"),
        ("reranked_results", "reranked"),
    ):
        if stages.get(stage) is not None:
            line[flat] = [chunk_id for chunk_id, _ in stage_items(stages[stage])]
    return line


def test_a_flat_log_without_scores_and_the_otlp_export_of_the_same_requests(tmp_path: Path) -> None:
    requests = _requests()
    tracer, exporter = make_tracer(seed=5)
    for request in requests:
        record_request(tracer, request)
    otlp = tmp_path / "traces.jsonl"
    otlp.write_text(otlp_lines(exporter.get_finished_spans()))
    flat = tmp_path / "flat.jsonl"
    flat.write_text("".join(json.dumps(_flat_without_scores(r), ensure_ascii=False) + "\n" for r in requests))

    # OTLP first, then the flat log: absence is not difference.
    engine = _store(tmp_path, "otlp-first")
    ingest_files(engine, [otlp])
    view = _stored(engine)
    report = ingest_files(engine, [flat])
    assert (report.conflicts, report.duplicates) == (0, len(requests)) and report.reconciles()
    assert _stored(engine) == view

    # The flat log first, then OTLP: the scores (and the feedback, the trace) are merged in.
    engine = _store(tmp_path, "flat-first")
    ingest_files(engine, [flat])
    report = ingest_files(engine, [otlp])
    assert (report.merged, report.conflicts, report.ingested) == (len(requests), 0, 0)
    assert _stored(engine) == view
    record = get_request(engine, "fx-0001")
    assert record.stages is not None and all(
        not isinstance(item, str) and item.score is not None
        for name in STAGE_NAMES
        for item in getattr(record.stages, name) or ()
    )
    stored = find_request(engine, "fx-0001")
    assert stored is not None and stored.source_file == str(flat.resolve())
    [merge] = stored.merges
    assert merge.startswith(f"{otlp.resolve()}:") and "stages.bm25[].score" in merge


def test_the_cli_reports_and_shows_what_was_merged(tmp_path: Path, home: Path, run_cli: RunCli) -> None:
    traces, feedback = _traces_and_feedback(tmp_path, "otlp")
    base = ["--home", str(home)]
    assert run_cli(["logs", "ingest", *base, *map(str, traces)])[0] == 0
    code, out, err = run_cli(["logs", "ingest", *base, *map(str, feedback)])
    assert code == 0, err
    counts = {
        name.strip(): value.strip() for name, _, value in (line.partition(":") for line in out.splitlines())
    }
    assert counts["merged"] == counts["read"] != "0" and counts["conflicts"] == "0"
    rated = next(r["request_id"] for r in _requests() if (r.get("feedback") or {}).get("rating") == "down")
    code, out, err = run_cli(["show", rated, *base])
    assert code == 0, err
    assert f"{feedback[0].resolve()}:" in out and "feedback" in out.split("merged from", 1)[1]


def test_a_different_request_under_a_stored_id_is_still_a_conflict(tmp_path: Path) -> None:
    engine = _store(tmp_path, "conflict")
    requests = _requests()[:3]
    tracer, exporter = make_tracer(seed=5)
    for request in requests:
        record_request(tracer, request)
    otlp = tmp_path / "traces.jsonl"
    otlp.write_text(otlp_lines(exporter.get_finished_spans()))
    ingest_files(engine, [otlp])
    other_query = {**_flat_without_scores(requests[0]), "query": "一个别的问题"}
    flat = _flat_without_scores(requests[1])
    other_chunk = {**flat, "bm25_results": ["other/chunk#1", *flat["bm25_results"][1:]]}
    lines = tmp_path / "other.jsonl"
    lines.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in (other_query, other_chunk)))
    report = ingest_files(engine, [lines])
    assert (report.conflicts, report.merged, report.duplicates) == (2, 0, 0) and report.reconciles()
    assert _rows(engine, LogConflictRow) == 2
    assert get_request(engine, requests[0]["request_id"]).raw_query == requests[0]["raw_query"]
    _, [first, second] = conflicting_lines(engine)
    assert (first.fields[0], second.fields[0]) == ("raw_query", "stages.bm25[0]")


def test_a_merge_is_written_in_the_batch_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traces, feedback = _traces_and_feedback(tmp_path, "otlp")
    engine = _store(tmp_path, "rollback")
    ingest_files(engine, traces)
    bodies = _bodies(engine)

    def fail(*_: Any, **__: Any) -> list[str]:
        raise RuntimeError("disk full")

    # The triage flags are written after the merged bodies, in the same BEGIN IMMEDIATE batch.
    monkeypatch.setattr(ingest_sql, "_flag_stored", fail)
    with pytest.raises(RuntimeError):
        ingest_files(engine, feedback)
    assert _bodies(engine) == bodies and _rows(engine, LogMergeRow) == 0
    monkeypatch.undo()
    report: IngestReport = ingest_files(engine, feedback)
    assert report.merged == report.read
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM log_merge")).scalar() == report.merged


def test_feedback_for_a_trace_never_stored_is_orphan_feedback(tmp_path: Path) -> None:
    _, feedback = _traces_and_feedback(tmp_path, "otlp")
    engine = _store(tmp_path, "orphans")
    report = ingest_files(engine, feedback)
    assert (report.quarantined, report.merged) == (report.read, 0) and report.quarantined_by_kind == {
        "orphan_feedback": report.read
    }
    assert report.files_without_requests == [str(feedback[0])]
    [line] = quarantined_lines(engine, limit=1)[1]
    assert (
        line.source_file == str(feedback[0].resolve()) and "neither in this ingest nor stored" in line.reason
    )
    with pytest.raises(LogFormatError, match="orphan|neither in this ingest nor stored"):
        ingest_files(_store(tmp_path, "strict"), feedback, strict=True)


def test_renaming_a_stored_request_moves_everything_that_names_it(tmp_path: Path) -> None:
    engine = _store(tmp_path, "rename")
    line = {"request_id": "trace-1", "raw_query": "q", "feedback": {"rating": "down"}}
    ingest_lines(engine, [json.dumps(line)])
    ingest_lines(engine, [json.dumps({**line, "raw_query": "other"})])  # a conflict row
    with ingest_sql.ingest_transaction(engine) as connection:
        body = json.dumps({**line, "request_id": "REQ-1"})
        ingest_sql.rename_requests(connection, [("trace-1", "REQ-1", body)])
    renamed = get_request(engine, "REQ-1")
    assert (renamed.request_id, renamed.raw_query) == ("REQ-1", "q") and find_request(
        engine, "trace-1"
    ) is None
    with read_session(engine) as session:
        [record] = session.execute(select(TriageRow)).scalars().all()
        [conflict] = session.execute(select(LogConflictRow)).scalars().all()
    assert (record.request_id, record.reasons, conflict.request_id) == ("REQ-1", ["bad_rating"], "REQ-1")
