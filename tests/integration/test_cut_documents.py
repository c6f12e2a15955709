"""A JSON document cut short (an interrupted download or export) is one error naming the file and
the byte where it breaks, never thousands of quarantined "lines"; the other files of the ingest are
read as they would be without it. Across every format that comes as one document: Langfuse API
pages, pretty-printed OTLP/JSON exports, Phoenix JSON arrays and pages, request-log pages, the
SDK console stream, and eval sets (JSON arrays of cases). Real SQLite stores; traces from the
real OpenTelemetry SDK (`tests/trace_producers.py`)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace.export import ConsoleSpanExporter
from sqlalchemy import select

from ragtriage.cli import cli
from ragtriage.errors import InputError
from ragtriage.eval.formats import read_cases_json
from ragtriage.logs.formats.detect import detect
from ragtriage.logs.ingest import ingest_files
from ragtriage.logs.schema import map_flat_form
from ragtriage.store.db import make_engine, read_session, sqlite_url
from ragtriage.store.log_tables import QuarantinedLineRow
from tests.conftest import FIXTURES_DIR
from tests.langfuse_producer import langfuse_export, langfuse_page
from tests.trace_producers import (
    collector_dict,
    make_tracer,
    phoenix_annotations,
    phoenix_page,
    record_request,
)

V1_LOG = FIXTURES_DIR / "logs" / "requests.jsonl"


def _requests(count: int | None = None) -> list[dict[str, Any]]:
    lines = V1_LOG.read_text(encoding="utf-8").splitlines()[:count]
    return [map_flat_form(json.loads(line)) for line in lines]


def _spans(count: int) -> Any:
    tracer, exporter = make_tracer(seed=3)
    for request in _requests(count):
        record_request(tracer, request)
    return exporter.get_finished_spans()


def _cut(path: Path, text: str, fraction: float = 0.5) -> int:
    """Write the first `fraction` of `text`'s bytes; the size written."""
    data = text.encode("utf-8")[: int(len(text.encode("utf-8")) * fraction)]
    path.write_bytes(data)
    return len(data)


def _quarantined(engine: Any) -> list[QuarantinedLineRow]:
    with read_session(engine) as session:
        return list(session.execute(select(QuarantinedLineRow)).scalars())


def test_a_cut_langfuse_page_is_one_error_and_the_intact_files_are_not_blamed(tmp_path: Path) -> None:
    observations, traces, scores = langfuse_export(_requests())
    obs, traces_file, scores_file = tmp_path / "obs.json", tmp_path / "traces.jsonl", tmp_path / "scores.json"
    whole = json.dumps(langfuse_page(observations), ensure_ascii=False, indent=2)
    size = _cut(obs, whole)
    traces_file.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in traces))
    scores_file.write_text(json.dumps(langfuse_page(scores), ensure_ascii=False, indent=2))
    assert detect(obs) == ("langfuse", "broken")

    engine = make_engine(sqlite_url(tmp_path / "home.db"))
    report = ingest_files(engine, [obs, traces_file, scores_file])
    # Read as JSONL it was thousands of quarantined lines (one per pretty-printed line).
    assert (
        report.quarantined_by_kind["cut_document"] == 1 and "invalid_json" not in report.quarantined_by_kind
    )
    assert report.read == report.ingested + report.quarantined == 1 + len(traces) and report.reconciles()
    assert report.broken_documents == report.files_without_requests == [str(obs)]
    [cut] = [row for row in _quarantined(engine) if row.kind == "cut_document"]
    assert cut.source_file == str(obs.resolve()) and cut.line_no == 1
    assert f"breaks off at byte {size:,} (line" in cut.reason and "export it again" in cut.reason
    # The traces that lack the observations say where those were.
    others = [row for row in _quarantined(engine) if row.kind != "cut_document"]
    assert others and all(f"was in {obs}, not read" in row.reason for row in others)

    obs.write_text(whole)  # downloaded again: the same ingest now stores every trace
    again = ingest_files(engine, [obs, traces_file, scores_file])
    assert (again.ingested, again.quarantined, again.files_without_requests) == (len(traces), 0, [])


def _otlp_document(tmp_path: Path) -> tuple[str, str]:
    return json.dumps(collector_dict(_spans(3)), ensure_ascii=False, indent=2), "otlp"


def _phoenix_spans(tmp_path: Path) -> tuple[str, str]:
    kept, _ = phoenix_annotations(_spans(3))
    return json.dumps(phoenix_page(kept), ensure_ascii=False, indent=2), "phoenix"


def _phoenix_array(tmp_path: Path) -> tuple[str, str]:
    _, notes = phoenix_annotations(_spans(6))
    return json.dumps(notes["data"], ensure_ascii=False, indent=2), "phoenix"


def _v1_page_one_line(tmp_path: Path) -> tuple[str, str]:
    return json.dumps({"data": _requests(20), "meta": {"page": 1}}, ensure_ascii=False), "v1"


def _flat_array(tmp_path: Path) -> tuple[str, str]:
    rows = [
        {"request_id": f"flat-{n}", "raw_query": f"问题 {n}", "bm25_results": [{"id": f"c{n}", "score": 1.5}]}
        for n in range(40)
    ]
    return json.dumps(rows, ensure_ascii=False, indent=2), "flat"


@pytest.mark.parametrize(
    "make", [_otlp_document, _phoenix_spans, _phoenix_array, _v1_page_one_line, _flat_array]
)
def test_every_document_format_cut_short_is_one_error(tmp_path: Path, make: Any) -> None:
    text, fmt = make(tmp_path)
    path = tmp_path / "export.json"
    size = _cut(path, text, 0.6)
    intact = tmp_path / "requests.jsonl"
    intact.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _requests(5)), encoding="utf-8"
    )
    assert detect(path) == (fmt, "broken")
    engine = make_engine(sqlite_url(tmp_path / "home.db"))
    report = ingest_files(engine, [path, intact])
    assert (report.read, report.ingested, report.quarantined) == (6, 5, 1) and report.reconciles()
    assert report.quarantined_by_kind == {"cut_document": 1}
    assert report.files_without_requests == [str(path)]
    [row] = _quarantined(engine)
    assert f"breaks off at byte {size:,} (line" in row.reason


def test_a_syntax_error_inside_a_document_names_its_byte(tmp_path: Path) -> None:
    path = tmp_path / "page.json"
    text = json.dumps({"data": _requests(3), "meta": {}}, ensure_ascii=False, indent=2)
    broken = text.replace('"meta": {}', '"meta": {},', 1)  # a trailing comma, everything else intact
    path.write_text(broken, encoding="utf-8")
    offset = len(broken[: broken.index('"meta": {},') + len('"meta": {}')].encode("utf-8"))  # the comma
    assert detect(path) == ("v1", "broken")
    report = ingest_files(make_engine(sqlite_url(tmp_path / "home.db")), [path], log_format="v1")
    assert report.quarantined_by_kind == {"invalid_json": 1} and report.read == 1
    [row] = _quarantined(make_engine(sqlite_url(tmp_path / "home.db")))
    assert f"not valid JSON at byte {offset:,}" in row.reason, row.reason


def test_jsonl_with_a_bad_first_line_is_still_read_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    good = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _requests(4))
    path.write_text('{"request_id": "cut-in-the-middle", "raw_q\n' + good, encoding="utf-8")
    assert detect(path) == ("v1", "lines")
    report = ingest_files(make_engine(sqlite_url(tmp_path / "home.db")), [path])
    assert (report.read, report.ingested, report.quarantined) == (5, 4, 1)


def test_a_console_stream_cut_short_names_the_value_where_it_breaks(tmp_path: Path) -> None:
    out = io.StringIO()
    ConsoleSpanExporter(out=out).export(_spans(3))
    path = tmp_path / "console.txt"
    text = out.getvalue()
    path.write_text(text[: len(text) - 200], encoding="utf-8")
    assert detect(path) == ("otlp", "stream")
    report = ingest_files(make_engine(sqlite_url(tmp_path / "home.db")), [path])
    assert report.quarantined_by_kind.get("cut_document") == 1 and report.reconciles()
    [row] = [
        r for r in _quarantined(make_engine(sqlite_url(tmp_path / "home.db"))) if r.kind == "cut_document"
    ]
    assert "the JSON value starting on this line is cut short" in row.reason


def test_cli_says_once_what_to_do_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "obs.json"
    observations, _, _ = langfuse_export(_requests(10))
    _cut(path, json.dumps(langfuse_page(observations), indent=2))
    intact = tmp_path / "requests.jsonl"
    intact.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _requests(5)), encoding="utf-8"
    )
    result = CliRunner().invoke(
        cli, ["--home", str(tmp_path / "home"), "logs", "ingest", str(path), str(intact)]
    )
    assert result.exit_code == 2, result.output
    assert "ingested: 5" in result.stdout
    assert result.stderr.count(f"{path}") == 2  # the quarantined line, then the one input error
    assert "input error: " + str(path) + ": nothing was read from it" in result.stderr
    assert "download or export it again" in result.stderr


def test_an_eval_set_cut_short_says_so(tmp_path: Path) -> None:
    cases = [{"query": f"问题 {n}", "relevant_chunk_ids": [f"c{n}"]} for n in range(40)]
    path = tmp_path / "cases.json"
    size = _cut(path, json.dumps(cases, ensure_ascii=False, indent=2), 0.5)
    with pytest.raises(
        InputError, match=r"cases.json:\d+: the JSON document is cut short: it breaks off"
    ) as caught:
        read_cases_json(path)
    assert f"at byte {size:,} (line" in str(caught.value) and "export it again" in str(caught.value)
    path.write_text(json.dumps(cases, ensure_ascii=False)[:-1])  # only the closing bracket is missing
    with pytest.raises(InputError, match="cut short"):
        read_cases_json(path)
