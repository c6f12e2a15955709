"""`kb import` of one chunk table exported as JSONL, CSV and Parquet in turn: the same values are
unchanged whatever the format, and a real change still counts (real files, a real SQLite KB)."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from tests.conftest import RunCli
from tests.report_lines import report_text

MAP = (
    "chunk_id=id,doc_id=document_id,content=text,title=section_title,ordinal=chunk_index,"
    "heading_path=headings,published=is_published,deleted=is_deleted,status=state,updated_at=modified"
)
UTC = dt.timezone.utc

# Foreign ids (integers and UUIDs), typed columns: ints, floats, bools, nulls, a list, an object, a time.
ROWS: list[dict[str, Any]] = [
    {"id": 42, "document_id": 7, "text": "出差结束后十五天内提交发票原件。", "section_title": "报销时限",
     "chunk_index": 0, "headings": ["财务", "报销"], "is_published": True, "is_deleted": False,
     "state": "READY", "modified": 1714550400, "score": 0.1, "views": 12, "weight": 2.0, "note": None,
     "tags": ["财务", "报销"], "extra": {"lang": "zh", "rank": 1}, "reviewed": dt.datetime(2024, 5, 1, 8, tzinfo=UTC)},
    {"id": "5d0e9a54-6a0b-4f55-8e43-0d2b6d1f1a02", "document_id": 7, "text": "超过期限需要部门负责人审批。",
     "section_title": "逾期", "chunk_index": 1, "headings": ["财务", "报销", "逾期"], "is_published": True,
     "is_deleted": False, "state": "READY", "modified": 1714636800, "score": 1.5, "views": 0, "weight": 0.25,
     "note": "已复核", "tags": [], "extra": {"lang": "zh", "rank": 2}, "reviewed": None},
    {"id": 43, "document_id": 8, "text": "草稿：新的 VPN 网关。", "section_title": "草稿", "chunk_index": 0,
     "headings": ["IT"], "is_published": False, "is_deleted": False, "state": "DRAFT", "modified": 1714723200,
     "score": 2.25, "views": 3, "weight": 1.0, "note": "", "tags": ["IT"], "extra": {"lang": "zh", "rank": None},
     "reviewed": dt.datetime(2024, 5, 3, 16, 30, tzinfo=UTC)},
]  # fmt: skip


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    """As a JSONL writer that omits nulls writes it (times as ISO text with Z)."""
    lines = []
    for row in rows:
        kept = {key: value for key, value in row.items() if value is not None}
        if "reviewed" in kept:
            kept["reviewed"] = kept["reviewed"].strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(json.dumps(kept, ensure_ascii=False) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    """As Python's csv module writes it: str() of each value (True, 2.0, 2024-05-01 08:00:00+00:00),
    empty cells for nulls, lists and objects as JSON text; is_deleted as PostgreSQL writes a bool."""
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            cells = {
                key: json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else value
                for key, value in row.items()
            }
            cells["is_deleted"] = "t" if row["is_deleted"] else "f"
            writer.writerow(cells)
    return path


def _parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Typed columns as pyarrow infers them, with `score` as float32 and ids as text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([{**row, "id": str(row["id"])} for row in rows])
    table = table.set_column(
        table.schema.get_field_index("score"), "score", table.column("score").cast(pa.float32())
    )
    pq.write_table(table, path)
    return path


WRITERS = {"jsonl": _jsonl, "csv": _csv, "parquet": _parquet}


def _import(path: Path, *extra: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["kb", "import", str(path), "--map", MAP, "--json", *extra])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["adds_up"] is True
    return report


def test_the_same_table_in_another_format_is_unchanged_and_embeds_nothing(tmp_path: Path) -> None:
    first = _import(_jsonl(tmp_path / "chunks.jsonl", ROWS))
    assert (first["added"], first["deleted"]) == (2, 1)
    assert first["index"]["embedded"] == 2
    for fmt in ("csv", "parquet", "jsonl", "parquet", "csv"):
        again = _import(WRITERS[fmt](tmp_path / f"chunks.{fmt}", ROWS))
        assert (again["changed"], again["unchanged"], again["deleted"], again["written"]) == (0, 2, 1, 0), fmt
        assert again["kb_revision"] == first["kb_revision"], fmt
        assert again["index"] is None and "nothing changed" in again["index_skipped"], fmt


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize(
    "field, value",
    [
        ("text", "出差结束后三十天内提交发票原件。"),
        ("section_title", "报销期限"),
        ("headings", ["财务", "差旅"]),
        ("chunk_index", 5),
        ("modified", 1714550401),
        ("state", "REVIEW"),
        ("views", 13),
        ("weight", 2.5),
        ("note", "0"),
        ("tags", ["财务"]),
        ("extra", {"lang": "en", "rank": 1}),
        ("reviewed", dt.datetime(2024, 5, 1, 9, tzinfo=UTC)),
    ],
)
def test_a_real_change_still_counts_across_formats(tmp_path: Path, fmt: str, field: str, value: Any) -> None:
    _import(_jsonl(tmp_path / "chunks.jsonl", ROWS), "--no-index")
    edited = [dict(row) for row in ROWS]
    edited[0][field] = value
    report = _import(WRITERS[fmt](tmp_path / f"chunks.{fmt}", edited), "--no-index")
    if field == "state":  # REVIEW is not a retrievable status: the chunk leaves retrieval
        assert (report["deleted"], report["unchanged"]) == (2, 1)
    else:
        assert (report["changed"], report["unchanged"], report["written"]) == (1, 1, 1)


def test_text_a_number_writer_would_not_produce_stays_text(tmp_path: Path) -> None:
    """`"1.10"` and `"007"` are not the numbers 1.1 and 7: changing them to those counts."""
    rows = [{**ROWS[0], "release": "1.10", "zip": "007"}]
    _import(_jsonl(tmp_path / "chunks.jsonl", rows), "--no-index")
    for column, value in (("release", 1.1), ("zip", 7)):
        edited = [{**rows[0], column: value}]
        report = _import(_csv(tmp_path / "chunks.csv", edited), "--no-index")
        assert report["changed"] == 1, column
        _import(_jsonl(tmp_path / "chunks.jsonl", rows), "--no-index")


def test_an_ordinal_written_as_a_float_and_an_epoch_written_as_text_are_read(tmp_path: Path) -> None:
    """pandas writes an integer column that holds nulls as floats ("3.0"); a CSV of epoch seconds is text."""
    _import(_jsonl(tmp_path / "chunks.jsonl", ROWS), "--no-index")
    as_floats = [{**row, "chunk_index": float(row["chunk_index"])} for row in ROWS]
    path = _csv(tmp_path / "chunks.csv", as_floats)
    assert ",1.0," in path.read_text(encoding="utf-8") and ",1714636800," in path.read_text(encoding="utf-8")
    report = _import(path, "--no-index")
    assert (report["changed"], report["unchanged"]) == (0, 2)


def test_a_jsonl_row_without_an_optional_mapped_column_reads_null_and_is_reported(
    tmp_path: Path, run_cli: RunCli
) -> None:
    rows = [dict(row) for row in ROWS]
    del rows[1]["section_title"], rows[2]["section_title"]
    path = _jsonl(tmp_path / "chunks.jsonl", rows)
    report = _import(path, "--no-index")

    assert (report["absent_mapped"], report["absent_mapped_first"]) == (
        2,
        f"{path}:2: no column 'section_title' for title",
    )
    # As from an empty CSV cell: the title falls back to the last heading, and the CSV is unchanged.
    shown = json.loads(
        CliRunner().invoke(cli, ["kb", "show", "5d0e9a54-6a0b-4f55-8e43-0d2b6d1f1a02", "--json"]).stdout
    )
    assert shown["title"] == "逾期"
    again = _import(
        _csv(tmp_path / "chunks.csv", [{**row, "section_title": row.get("section_title")} for row in rows]),
        "--no-index",
    )
    assert (again["changed"], again["unchanged"], again["absent_mapped"]) == (0, 2, 0)

    outcome = run_cli(["kb", "import", str(path), "--map", MAP, "--no-index"])
    assert outcome.code == 0, outcome.err
    assert (
        "absent: a mapped column is missing from 2 rows, read as null "
        f"(first at {path}:2: no column 'section_title' for title)" in report_text(outcome.out)
    )


@pytest.mark.parametrize(
    "column, expected",
    [
        (
            "id",
            "chunks.jsonl:2: the required field chunk_id (column 'id') is missing or null; "
            "fix: give every row a value in column 'id'",
        ),
        (
            "text",
            "chunks.jsonl:2: chunk 5d0e9a54-6a0b-4f55-8e43-0d2b6d1f1a02: the required field content "
            "(column 'text') is missing or null; fix: give every row a value in column 'text'",
        ),
    ],
)
def test_a_jsonl_row_without_a_required_mapped_column_stops_the_import(
    tmp_path: Path, run_cli: RunCli, column: str, expected: str
) -> None:
    rows = [dict(row) for row in ROWS]
    del rows[1][column]
    outcome = run_cli(["kb", "import", str(_jsonl(tmp_path / "chunks.jsonl", rows)), "--map", MAP])

    assert outcome.code == 2
    assert outcome.err.count("\n") == 1 and expected in outcome.err.replace(f"{tmp_path}/", "")
    assert CliRunner().invoke(cli, ["kb", "chunks", "--all", "--json"]).stdout.strip() in ("", "[]")
