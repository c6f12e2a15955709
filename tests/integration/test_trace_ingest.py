"""Trace exports ingested into a real SQLite store: the OTLP, Phoenix and Langfuse exports of the
fixture traffic store the same requests, stage lists and flags as its schema-v1 log; the OTLP
fixture file (`fixtures/logs/requests.otlp.jsonl.gz`, made by `scripts/gen_fixture_otlp.py` with
the real OpenTelemetry SDK) included. Quarantine, reconciliation, idempotency and the CLI too."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace.export import ConsoleSpanExporter
from sqlalchemy import select
from sqlalchemy.engine import Engine

from ragtriage.cli import cli
from ragtriage.config.settings import OtelSettings
from ragtriage.errors import InputError, LogFormatError
from ragtriage.logs.formats.detect import detect
from ragtriage.logs.ingest import ingest_files
from ragtriage.logs.schema import RequestLog, map_flat_form, stage_ids
from ragtriage.store.db import make_engine, read_session, sqlite_url
from ragtriage.store.log_tables import QuarantinedLineRow, RequestLogRow, TriageRow
from tests.conftest import FIXTURES_DIR, REPO_ROOT
from tests.langfuse_producer import langfuse_export, langfuse_page
from tests.trace_producers import (
    make_tracer,
    otlp_lines,
    phoenix_annotations,
    phoenix_page,
    record_request,
)

V1_LOG = FIXTURES_DIR / "logs" / "requests.jsonl"
OTLP_FIXTURE = FIXTURES_DIR / "logs" / "requests.otlp.jsonl.gz"
STAGES = ("bm25", "dense", "fused", "reranked", "final_context")


def _requests() -> list[dict[str, Any]]:
    return [map_flat_form(json.loads(line)) for line in V1_LOG.read_text(encoding="utf-8").splitlines()]


def _store(tmp_path: Path, name: str) -> Engine:
    return make_engine(sqlite_url(tmp_path / f"{name}.db"))


def _stored(engine: Engine, *, ms: bool = False) -> dict[str, Any]:
    """request id → what triage sees of it: columns, stage lists, answer, citations, flags."""
    with read_session(engine) as session:
        flags = {row.request_id: sorted(row.reasons) for row in session.execute(select(TriageRow)).scalars()}
        out = {}
        for row in session.execute(select(RequestLogRow)).scalars():
            record = RequestLog.model_validate_json(row.body)
            stages = record.stages
            assert stages is not None and row.ts is not None
            ts = row.ts.replace(microsecond=row.ts.microsecond // 1000 * 1000) if ms else row.ts
            out[row.request_id] = (
                ts, row.session_hash, row.user_hash, row.raw_query, row.rating, row.escalated,
                [stage_ids(getattr(stages, name)) for name in STAGES],
                record.answer, None if record.citations is None else stage_ids(record.citations),
                record.pipeline_version, flags.get(row.request_id, []),
            )  # fmt: skip
    return out


@pytest.fixture(scope="module")
def v1_view(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    engine = _store(tmp_path_factory.mktemp("v1"), "v1")
    report = ingest_files(engine, [V1_LOG])
    assert report.ingested == 267 and report.flagged > 100
    return _stored(engine)


def test_otlp_fixture_stores_what_the_v1_log_stores(tmp_path: Path, v1_view: dict[str, Any]) -> None:
    engine = _store(tmp_path, "otlp")
    report = ingest_files(engine, [OTLP_FIXTURE])
    assert (report.read, report.ingested, report.quarantined) == (267, 267, 0) and report.reconciles()
    assert _stored(engine) == v1_view
    again = ingest_files(engine, [OTLP_FIXTURE])
    assert (again.read, again.duplicates, again.ingested, again.conflicts) == (267, 267, 0, 0)


def test_base64_phoenix_and_langfuse_exports_store_the_same(tmp_path: Path, v1_view: dict[str, Any]) -> None:
    requests = _requests()
    tracer, exporter = make_tracer(seed=5)
    for number, request in enumerate(requests):
        record_request(tracer, request, feedback_as="evaluator" if number % 2 else "annotation")
    spans = exporter.get_finished_spans()
    # Protobuf's JSON mapping (base64 ids, int64 as strings), rotated over two files.
    lines = otlp_lines(spans, per_line=9, ids="base64").splitlines(keepends=True)
    first, second = tmp_path / "otel-0.json", tmp_path / "otel-1.json"
    first.write_text("".join(lines[: len(lines) // 2]))
    second.write_text("".join(lines[len(lines) // 2 :]))
    engine = _store(tmp_path, "b64")
    report = ingest_files(engine, [second, first])
    assert (report.ingested, report.quarantined) == (267, 0) and report.reconciles()
    assert _stored(engine) == v1_view

    kept, notes = phoenix_annotations(spans)
    spans_page, notes_page = tmp_path / "phoenix_spans.json", tmp_path / "phoenix_annotations.json"
    spans_page.write_text(json.dumps(phoenix_page(kept), ensure_ascii=False, indent=2))
    notes_page.write_text(json.dumps(notes, ensure_ascii=False, indent=2))
    engine = _store(tmp_path, "phoenix")
    report = ingest_files(engine, [spans_page, notes_page])
    assert (report.ingested, report.quarantined) == (267, 0) and report.reconciles()
    assert _stored(engine) == v1_view

    observations, traces, scores = langfuse_export(requests)
    obs_file, traces_file, scores_file = (
        tmp_path / "obs.json",
        tmp_path / "traces.jsonl",
        tmp_path / "scores.json",
    )
    obs_file.write_text(json.dumps(langfuse_page(observations), ensure_ascii=False, indent=2))
    traces_file.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in traces))
    scores_file.write_text(json.dumps(langfuse_page(scores), ensure_ascii=False, indent=2))
    engine = _store(tmp_path, "langfuse")
    report = ingest_files(engine, [obs_file, traces_file, scores_file])
    assert (report.ingested, report.quarantined) == (267, 0) and report.reconciles()
    # Langfuse keeps times to the millisecond.
    expected = {
        k: (v[0].replace(microsecond=v[0].microsecond // 1000 * 1000), *v[1:]) for k, v in v1_view.items()
    }
    assert _stored(engine, ms=True) == expected


def test_opentelemetry_sdk_console_exporter_output_stores_the_same(
    tmp_path: Path, v1_view: dict[str, Any]
) -> None:
    # What a service without a Collector has on disk: the SDK's own ConsoleSpanExporter, whose
    # default formatter pretty-prints each span (ReadableSpan.to_json, "0x" hex ids, ISO times)
    # with nothing between spans; and the same spans one per line with a compact formatter.
    tracer, exporter = make_tracer(seed=11, service_version="prod-2.3")
    for number, request in enumerate(_requests()):
        record_request(tracer, request, feedback_as="evaluator" if number % 2 else "annotation")
    spans = exporter.get_finished_spans()
    pretty, compact = io.StringIO(), io.StringIO()
    ConsoleSpanExporter(out=pretty).export(spans)
    ConsoleSpanExporter(out=compact, formatter=lambda span: span.to_json(indent=None) + "\n").export(spans)
    assert pretty.getvalue().startswith("{\n") and '"trace_id": "0x' in pretty.getvalue()
    expected = {k: (*v[:9], "prod-2.3" if v[9] is None else v[9], v[10]) for k, v in v1_view.items()}
    for name, text in (("console.txt", pretty.getvalue()), ("console.jsonl", compact.getvalue())):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        assert detect(path) == ("otlp", "stream" if name.endswith(".txt") else "lines")
        engine = _store(tmp_path, name)
        report = ingest_files(engine, [path])
        assert (report.read, report.ingested, report.quarantined) == (267, 267, 0) and report.reconciles()
        assert _stored(engine) == expected


def test_a_bad_sdk_span_in_a_pretty_printed_stream_names_its_line(tmp_path: Path) -> None:
    tracer, exporter = make_tracer(seed=12)
    record_request(
        tracer,
        {"request_id": "r1", "ts": "2026-11-02T08:00:00Z", "raw_query": "年假", "stages": {"bm25": ["c1"]}},
    )
    out = io.StringIO()
    ConsoleSpanExporter(out=out).export(exporter.get_finished_spans())
    text = out.getvalue()
    first_line_of_second = text[: text.index("\n}\n") + 3].count("\n") + 1
    bad = text.replace('"span_id": "0x', '"span_id": "0xzz', 2)  # the first span keeps its id
    bad = bad.replace('"span_id": "0xzz', '"span_id": "0x', 1)
    path = tmp_path / "console.txt"
    path.write_text(bad, encoding="utf-8")
    report = ingest_files(_store(tmp_path, "bad"), [path])
    assert report.reconciles() and report.quarantined >= 1
    with read_session(_store(tmp_path, "bad")) as session:
        rows = session.execute(select(QuarantinedLineRow)).scalars().all()
    assert any(
        row.line_no == first_line_of_second and "context.span_id" in row.reason and "hex" in row.reason
        for row in rows
    ), [(row.line_no, row.reason) for row in rows]


def test_quarantine_names_file_line_and_span(tmp_path: Path) -> None:
    tracer, exporter = make_tracer(seed=3)
    good = {"request_id": "ok-1", "ts": "2026-11-02T08:00:00Z", "raw_query": "q", "stages": {"bm25": ["c1"]}}
    record_request(tracer, good)
    record_request(tracer, {**good, "request_id": "no-retriever", "stages": {}})
    path = tmp_path / "traces.jsonl"
    traces = otlp_lines(exporter.get_finished_spans(), per_line=3)
    path.write_text(traces + "{not json\n")
    engine = _store(tmp_path, "q")
    report = ingest_files(engine, [path])
    assert (report.read, report.ingested, report.quarantined) == (3, 1, 2) and report.reconciles()
    assert report.quarantined_by_kind == {"no_retriever": 1, "invalid_json": 1}
    with read_session(engine) as session:
        rows = (
            session.execute(select(QuarantinedLineRow).order_by(QuarantinedLineRow.line_no)).scalars().all()
        )
    assert [r.source_file for r in rows] == [str(path.resolve())] * 2
    no_retriever = next(r for r in rows if r.kind == "no_retriever")
    assert "root span" in no_retriever.reason and "'query'" in no_retriever.reason
    path.write_text(traces)
    with pytest.raises(LogFormatError, match=r"traces\.jsonl:\d+: trace [0-9a-f]{32} .*no RETRIEVER"):
        ingest_files(_store(tmp_path, "strict"), [path], strict=True)


def test_cli_format_override_and_unknown_shape(tmp_path: Path, home: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["logs", "ingest", str(OTLP_FIXTURE), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ingested"] == 267
    odd = tmp_path / "rows.json"
    odd.write_text(json.dumps({"rows": [{"a": 1}]}, indent=2))
    failed = subprocess.run(
        [sys.executable, "-m", "ragtriage", "logs", "ingest", str(odd)],
        capture_output=True,
        text=True,
        env={**os.environ, "RAGTRIAGE_HOME": str(home)},
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert failed.returncode == 2 and failed.stderr.startswith("input error: ")
    assert "tried v1, flat, otlp, phoenix, langfuse" in failed.stderr and "--format" in failed.stderr
    # --format names the format of a file whose content would not tell (an OTLP span page).
    plain = tmp_path / "spans.json"
    with gzip.open(OTLP_FIXTURE, "rt", encoding="utf-8") as handle:
        export = json.loads(handle.readline())
    plain.write_text(json.dumps({"data": export["resourceSpans"][0]["scopeSpans"][0]["spans"]}))
    result = runner.invoke(cli, ["logs", "ingest", str(plain), "--format", "otlp", "--json"])
    assert result.exit_code == 0, result.stderr
    counts = json.loads(result.stdout)
    outcomes = ("ingested", "merged", "duplicates", "conflicts", "quarantined", "blank")
    assert counts["read"] == sum(counts[k] for k in outcomes) > 0
    # Part of a trace already stored whole adds nothing, even where it lacks the root span (whose
    # metadata names the request): duplicates, stored under the request's id.
    assert counts["duplicates"] == counts["read"] and counts["conflicts"] == 0


def test_otel_settings_rename_routes(tmp_path: Path) -> None:
    engine = _store(tmp_path, "routes")
    otel = OtelSettings(routes={"bm25_raw": ["BM25Retriever"], "dense_raw": ["VectorIndexRetriever"]})
    ingest_files(engine, [OTLP_FIXTURE], otel=otel)
    with read_session(engine) as session:
        body = session.execute(select(RequestLogRow.body).limit(1)).scalar_one()
    routes = json.loads(body)["routes"]
    assert [r["name"] for r in routes] == ["bm25_raw", "dense_raw"]


def test_cut_gzip_strict_mode_and_a_stop_request(tmp_path: Path) -> None:
    tracer, exporter = make_tracer(seed=8)
    good = {"request_id": "ok-1", "ts": "2026-11-02T08:00:00Z", "raw_query": "q", "stages": {"bm25": ["c1"]}}
    record_request(tracer, good)
    record_request(tracer, {**good, "request_id": "no-retriever", "stages": {}})
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_lines(exporter.get_finished_spans(), per_line=3))
    with pytest.raises(LogFormatError, match="no RETRIEVER"):
        ingest_files(make_engine(sqlite_url(tmp_path / "strict.db")), [path], strict=True)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(path.read_bytes() * 40)[:-200])
    with pytest.raises(InputError, match="cut.jsonl.gz: the gzip stream is corrupt or cut off"):
        ingest_files(make_engine(sqlite_url(tmp_path / "cut.db")), [cut])
    # A stop request after the first batch: that batch is stored.
    for i in range(29):
        record_request(tracer, {**good, "request_id": f"more-{i}"})
    path.write_text(otlp_lines(exporter.get_finished_spans(), per_line=4))
    engine = make_engine(sqlite_url(tmp_path / "stop.db"))
    report = ingest_files(engine, [path], batch_size=10, should_stop=lambda: True)
    assert (
        report.stopped
        and (report.read, report.ingested + report.quarantined) == (10, 10)
        and report.reconciles()
    )
