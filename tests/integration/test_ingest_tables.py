"""Parquet and CSV request logs (the way warehouses export them) ingest to the same stored requests,
flags and counts as the JSONL they were made from; bad rows are quarantined by row and field; an
ingest that reads nothing usable exits non-zero."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.engine import Engine

from ragtriage.cli import cli
from ragtriage.errors import InputError
from ragtriage.logs.ingest import ingest_files
from ragtriage.logs.requests import get_request
from ragtriage.logs.schema import RequestLog
from ragtriage.store.db import make_engine, read_session, sqlite_url
from ragtriage.store.log_tables import QuarantinedLineRow, TriageRow
from tests.conftest import FIXTURES_DIR

REQUESTS = FIXTURES_DIR / "logs" / "requests.jsonl"
LINES = REQUESTS.read_bytes().splitlines()
FLAT_LINES = [line for line in LINES if b'"bm25_results"' in line]
V1_LINES = [line for line in LINES if b'"bm25_results"' not in line]


def _engine(tmp_path: Path, name: str) -> Engine:
    return make_engine(sqlite_url(tmp_path / f"{name}.db"))


def _parquet(lines: list[bytes], path: Path) -> Path:
    """Parquet as a warehouse writes it: Arrow infers structs and lists from the JSON (an
    independent reader), absent members become nulls."""
    pq.write_table(pa_json.read_json(io.BytesIO(b"\n".join(lines) + b"\n")), path)
    return path


def _csv(lines: list[bytes], path: Path, delimiter: str = ",") -> Path:
    """CSV with the csv module: objects and lists as JSON text in their cell, other values as text."""
    records = [json.loads(line) for line in lines]
    columns = list(dict.fromkeys(key for record in records for key in record))
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, columns, delimiter=delimiter)
        writer.writeheader()
        for record in records:
            writer.writerow(
                {
                    key: json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else value
                    for key, value in record.items()
                }
            )
    return path


def _flags(engine: Engine) -> dict[str, list[str]]:
    with read_session(engine) as session:
        return {row.request_id: sorted(row.reasons) for row in session.execute(select(TriageRow)).scalars()}


def test_parquet_and_csv_store_what_the_jsonl_stores(tmp_path: Path) -> None:
    tables = [
        _parquet(V1_LINES, tmp_path / "v1.parquet"),
        _csv(FLAT_LINES, tmp_path / "flat.csv"),
    ]
    from_tables = _engine(tmp_path, "tables")
    report = ingest_files(from_tables, tables)
    assert report.formats == {str(tables[0]): "parquet", str(tables[1]): "csv"}
    assert (report.read, report.ingested, report.quarantined) == (len(LINES), len(LINES), 0)
    assert report.reconciles() and report.files_without_requests == []

    from_jsonl = _engine(tmp_path, "jsonl")
    ingest_files(from_jsonl, [REQUESTS])
    assert _flags(from_tables) == _flags(from_jsonl)  # per-line rules and session follow-ups alike
    for line in (V1_LINES[0], V1_LINES[-1], FLAT_LINES[0]):
        request_id = json.loads(line)["request_id"]
        from_table = get_request(from_tables, request_id).model_dump()
        assert _without_nulls(from_table) == _without_nulls(get_request(from_jsonl, request_id).model_dump())

    # The JSONL after the tables: each line is the same request (a duplicate), also where the
    # JSONL logged an explicit null that Parquet cannot tell from an absent member (a null is
    # absence, and absence is not difference).
    with_nulls = sum(
        _validated(_without_nulls(json.loads(line))) != _validated(json.loads(line)) for line in V1_LINES
    )
    assert 0 < with_nulls < len(LINES)
    again = ingest_files(from_tables, [REQUESTS])
    assert (again.duplicates, again.merged, again.conflicts, again.ingested) == (len(LINES), 0, 0, 0)
    assert ingest_files(from_tables, tables).duplicates == len(LINES)  # idempotent


def _validated(record: dict[str, Any]) -> dict[str, Any]:
    return RequestLog.model_validate(record).model_dump()


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def test_bad_parquet_rows_are_quarantined_by_row_and_field(tmp_path: Path) -> None:
    stage = pa.list_(pa.struct([("chunk_id", pa.string()), ("score", pa.float64())]))
    schema = pa.schema(
        [
            ("request_id", pa.string()),
            ("ts", pa.timestamp("ns")),  # pandas' default unit; no zone = UTC
            ("raw_query", pa.string()),
            ("bm25_results", stage),
            ("user_feedback", pa.string()),
            ("latency_ms", pa.decimal128(8, 2)),
        ]
    )
    rows: list[dict[str, Any]] = [
        {
            "request_id": "p1",
            "ts": 1_762_070_400_123_456_789,
            "raw_query": "怎么补卡",
            "bm25_results": [{"chunk_id": "c1", "score": 2.5}],
            "user_feedback": "down",
            "latency_ms": "12.50",
        },
        {"request_id": "p2", "raw_query": "q", "bm25_results": [{"chunk_id": "c1", "score": float("nan")}]},
        {"request_id": None, "raw_query": "no id"},
        {},
        {"request_id": "p5", "raw_query": "q", "bm25_results": [{"chunk_id": "", "score": 1.0}]},
    ]
    import decimal

    for row in rows:
        if "latency_ms" in row:
            row["latency_ms"] = decimal.Decimal(row["latency_ms"])
    path = tmp_path / "requests.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    engine = _engine(tmp_path, "store")
    report = ingest_files(engine, [path])
    assert (report.read, report.ingested, report.quarantined, report.blank) == (5, 1, 3, 1)
    assert report.reconciles()
    request = get_request(engine, "p1")
    assert request.ts is not None and request.ts.isoformat() == "2025-11-02T08:00:00.123456"  # µs kept
    assert request.latency_ms == 12.5 and request.feedback is not None and request.feedback.rating == "down"
    assert _flags(engine) == {"p1": ["bad_rating"]}
    with read_session(engine) as session:
        bad = session.execute(select(QuarantinedLineRow).order_by(QuarantinedLineRow.line_no)).scalars().all()
    assert [(b.line_no, b.kind) for b in bad] == [(2, "nan"), (3, "missing_field"), (5, "invalid_field")]
    assert "field 'bm25_results.0.score'" in bad[0].reason and "finite number" in bad[0].reason
    assert "'request_id'" in bad[1].reason
    assert "stages.bm25.0.chunk_id" in bad[2].reason
    assert all(b.source_file == str(path.resolve()) for b in bad)


def test_bad_csv_rows_are_quarantined_and_the_good_ones_stored(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text(
        "request_id\traw_query\tstages\tlatency_ms\tuser_feedback\n"
        'c1\t补卡怎么申请\t{"bm25": ["k1", "k2"]}\t35.5\tdown\n'
        'c2\tq\t{"bm25": ["k1",]}\t\t\n'  # a trailing comma in the JSON cell
        "\t\t\t\t\n"
        "c4\tq\t\tNaN\t\n"
        "c5\ttoo few cells\n"
        'c6\t"多行\n查询"\t\t\t{"rating": 1}\n'
        "c7\tq\t\tslow\t\n",
        encoding="utf-8",
    )
    engine = _engine(tmp_path, "store")
    report = ingest_files(engine, [path])
    assert report.formats == {str(path): "csv"}
    assert (report.read, report.ingested, report.quarantined, report.blank) == (7, 2, 4, 1)
    assert report.reconciles()
    assert get_request(engine, "c1").stages.bm25 == ["k1", "k2"]  # type: ignore[union-attr]
    assert get_request(engine, "c6").raw_query == "多行\n查询"
    with read_session(engine) as session:
        bad = session.execute(select(QuarantinedLineRow).order_by(QuarantinedLineRow.line_no)).scalars().all()
    # Line numbers are where the row starts in the file (the header is line 1).
    assert [(b.line_no, b.kind) for b in bad] == [
        (3, "invalid_json"),
        (5, "nan"),
        (6, "bad_row"),
        (9, "invalid_field"),
    ]
    assert bad[0].reason.startswith("field 'stages': the cell is not valid JSON")
    assert "'latency_ms'" in bad[3].reason


def test_cli_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    unusable = tmp_path / "events.jsonl"
    unusable.write_text('{"event": "login", "user": "u1"}\n{"event": "logout", "user": "u1"}\n')
    result = runner.invoke(cli, ["logs", "ingest", str(unusable)])
    assert result.exit_code == 2
    assert "quarantined: 2" in result.stdout  # the counts are still printed
    assert f"{unusable}: no request could be read from it" in result.stderr

    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    result = runner.invoke(cli, ["logs", "ingest", str(passwd)], standalone_mode=False)
    assert isinstance(result.exception, InputError) and "cannot tell the log format" in str(result.exception)

    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n")
    as_json = runner.invoke(cli, ["logs", "ingest", "--json", str(blank)])
    assert as_json.exit_code == 2 and json.loads(as_json.stdout)["files_without_requests"] == [str(blank)]

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert runner.invoke(cli, ["logs", "ingest", str(empty)]).exit_code == 0

    good = _csv(FLAT_LINES[:3], tmp_path / "flat.csv")
    assert runner.invoke(cli, ["logs", "ingest", str(good)]).exit_code == 0
    assert runner.invoke(cli, ["logs", "ingest", str(good)]).exit_code == 0  # all duplicates is fine

    # An API page of records on one line is a JSON document: read record by record, never as one line.
    document = tmp_path / "page.json"
    record = dict(json.loads(FLAT_LINES[0]), request_id="from-a-page")
    document.write_text(json.dumps({"data": [record], "meta": {"page": 1}}))
    result = runner.invoke(cli, ["logs", "ingest", "--json", str(document)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ingested"] == 1


@pytest.mark.parametrize("log_format", ["parquet", "csv"])
def test_format_option_reads_a_file_whatever_its_name(tmp_path: Path, log_format: str) -> None:
    path = tmp_path / "requests.data"
    _parquet(V1_LINES[:5], path) if log_format == "parquet" else _csv(V1_LINES[:5], path)
    result = CliRunner().invoke(cli, ["logs", "ingest", "--format", log_format, "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ingested"] == 5
