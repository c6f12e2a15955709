"""Request-log table formats in detection: Parquet and CSV by content, never by name; a whole JSON
document is never read as JSONL; a forced format is checked before anything is stored."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragtriage.errors import InputError
from ragtriage.logs.formats.detect import detect, plan_files

V1 = {"request_id": "r1", "raw_query": "怎么补卡", "stages": {"bm25": ["c1"]}}
FLAT = {"request_id": "r2", "raw_query": "q", "bm25_results": [{"id": "c1", "score": 1.5}]}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("a.json", (json.dumps(V1) + "\n").encode(), ("v1", "lines")),
        ("a.txt", b"\xef\xbb\xbf" + (json.dumps(FLAT) + "\n").encode(), ("flat", "lines")),
        ("rows.jsonl", b'request_id,raw_query,stages\nr1,q,"{""bm25"": []}"\n', ("csv", "lines")),
        ("rows.dat", "request_id\traw_query\nr1\t怎么补卡\n".encode(), ("csv", "lines")),
        ("export.txt", "\ufeffRequest_Id;raw_query\nr1;q\n".encode(), ("csv", "lines")),
        ("page.jsonl", json.dumps({"data": [V1], "meta": {}}).encode(), ("v1", "document")),
        ("pretty.jsonl", json.dumps({"data": [FLAT], "meta": {}}, indent=2).encode(), ("flat", "document")),
        ("array.jsonl", json.dumps([V1, V1]).encode(), ("v1", "document")),
    ],
)
def test_format_and_layout_come_from_the_content(
    tmp_path: Path, name: str, data: bytes, expected: tuple[str, str]
) -> None:
    assert detect(_write(tmp_path / name, data)) == expected


def test_a_one_line_document_longer_than_the_peek_is_still_a_document(tmp_path: Path) -> None:
    # A compact API page (Phoenix spans with LlamaIndex's prompts and embeddings) past the 1 MB
    # looked at first: read whole, not as one JSONL line cut in the middle.
    attributes = {"openinference.span.kind": "RETRIEVER", "input.value": "怎么补卡" * 40_000}
    span = {"name": "r", "context": {"trace_id": "a" * 32, "span_id": "b" * 16}, "span_kind": "RETRIEVER"}
    page = {"data": [{**span, "attributes": attributes}] * 3, "next_cursor": None}
    assert detect(_write(tmp_path / "spans.json", json.dumps(page, ensure_ascii=False).encode())) == (
        "phoenix",
        "document",
    )
    v1_page = {"data": [{**V1, "answer": "长" * 400_000}], "meta": {}}
    assert detect(_write(tmp_path / "v1.json", json.dumps(v1_page, ensure_ascii=False).encode())) == (
        "v1",
        "document",
    )


def test_gzip_csv_is_looked_through(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.bin", gzip.compress(b"raw_query,request_id\nq,r1\n"))
    assert detect(path) == ("csv", "lines")


def test_parquet_is_found_under_any_name(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    pq.write_table(pa.Table.from_pylist([V1]), path)
    assert detect(path)[0] == "parquet"


def test_text_that_is_no_known_format_names_the_formats_tried(tmp_path: Path) -> None:
    path = _write(tmp_path / "notes.csv", b"name,age\nann,3\n")  # CSV, but no request_id column
    with pytest.raises(InputError) as caught:
        detect(path)
    assert "tried v1, flat, otlp, phoenix, langfuse, parquet, csv" in str(caught.value)


def test_forced_formats_are_checked_before_anything_is_stored(tmp_path: Path) -> None:
    jsonl = _write(tmp_path / "a.parquet", (json.dumps(V1) + "\n").encode())
    with pytest.raises(InputError, match="not a Parquet file, but --format parquet"):
        plan_files([jsonl], "parquet")
    with pytest.raises(InputError, match=r"a\.parquet:1: not a CSV header with a request_id column"):
        plan_files([jsonl], "csv")
    duplicated = _write(tmp_path / "dup.csv", b"request_id,raw_query,raw_query\nr1,q,q\n")
    with pytest.raises(InputError, match="repeats column 'raw_query'"):
        plan_files([duplicated])
    parquet = tmp_path / "p.bin"
    pq.write_table(pa.Table.from_pylist([V1]), parquet)
    with pytest.raises(InputError, match="a Parquet file, but --format v1"):
        plan_files([parquet], "v1")
    assert [p.format for p in plan_files([jsonl, parquet])] == ["v1", "parquet"]
