"""Tell a log file's format and layout by its content, never by its name.

Layout: `lines` (JSONL, one record per line), `document` (one JSON object or array, perhaps
pretty-printed over many lines; never read line by line) or `stream` (JSON values one after
another, each perhaps over many lines, as OpenTelemetry's `ConsoleSpanExporter` prints spans;
trace formats only). Format: one of `FORMATS`, from the
keys of the first record that names one.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ragtriage.errors import InputError
from ragtriage.logs.formats import langfuse, otel_sdk, otlp, phoenix
from ragtriage.logs.formats.tables import csv_header

#: Formats `--format` accepts besides `auto` (`parquet` is read by the columnar reader).
FORMATS = ("v1", "flat", "otlp", "phoenix", "langfuse", "parquet", "csv")
#: Table formats, read row by row (`formats.tables`).
TABLE_FORMATS = ("parquet", "csv")
#: Formats read by this package (the others by the request-log reader).
TRACE_FORMATS = ("otlp", "phoenix", "langfuse")
_SNIFFED = ("v1", "flat", "otlp", "phoenix", "langfuse", "parquet", "csv")
PEEK_BYTES = 1 << 20
_SNIFF_LINES = 200
_BOM = b"\xef\xbb\xbf"
_FLAT_KEYS = (
    "bm25_results",
    "vector_results",
    "dense_results",
    "fused_results",
    "reranked_results",
    "final_context_docs",
    "rewritten_queries",
    "user_feedback",
)
_PARQUET_MAGIC = b"PAR1"


def open_bytes(path: Path) -> Any:
    """A binary handle on `path`, decompressing gzip.

    Raises:
        InputError: the file cannot be opened.
    """
    try:
        handle = open(path, "rb")  # noqa: SIM115 (the caller closes it)
        if handle.read(2) == b"\x1f\x8b":
            handle.seek(0)
            return gzip.GzipFile(fileobj=handle, mode="rb")
        handle.seek(0)
        return handle
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None


def sniff(record: Any) -> str | None:
    """The format one parsed record (a line, or a whole document) belongs to, or None."""
    if isinstance(record, list):
        return sniff(record[0]) if record else None
    if not isinstance(record, dict):
        return None
    if otlp.is_export_request(record) or otlp.is_otlp_span(record) or otel_sdk.is_sdk_span(record):
        return "otlp"
    if phoenix.is_span(record) or phoenix.is_annotation(record):
        return "phoenix"
    if langfuse.kind_of(record) is not None:
        return "langfuse"
    if "raw_query" in record or "request_id" in record:
        return "flat" if any(k in record for k in _FLAT_KEYS) else "v1"
    data = record.get("data")
    if isinstance(data, list):
        if data:
            return sniff(data[0])
        if "meta" in record:
            return "langfuse"
        if "next_cursor" in record:
            return "phoenix"
    return None


def detect(path: Path) -> tuple[str, str]:
    """`(format, layout)` of a file. An empty file is `("v1", "lines")`.

    Raises:
        InputError: the content matches no format (the message names the formats tried).
    """
    with open_bytes(path) as handle:
        # GzipFile.read(n) loses what it decompressed when the stream is cut off; read1 does not.
        read = handle.read1 if isinstance(handle, gzip.GzipFile) else handle.read
        chunks: list[bytes] = []
        size = 0
        try:
            while size < PEEK_BYTES and (chunk := read(PEEK_BYTES - size)):
                chunks.append(chunk)
                size += len(chunk)
            complete = size < PEEK_BYTES
        except (EOFError, OSError, gzip.BadGzipFile):
            complete = (
                False  # a cut-off stream: tell the format from what came before; the reader reports the cut
            )
        peek = b"".join(chunks)
    if peek.startswith(_PARQUET_MAGIC):
        return "parquet", "document"
    text = peek[len(_BOM) :] if peek.startswith(_BOM) else peek
    stripped = text.lstrip()
    if not stripped:
        return "v1", "lines"
    if stripped[:1] not in (b"{", b"[") and csv_header(text.split(b"\n", 1)[0]) is not None:
        return "csv", "lines"
    if stripped[:1] == b"[":
        return _document_format(path, text if complete else None), "document"
    lines = text.split(b"\n")
    if not complete:
        lines.pop()  # the last piece may be cut
    first = next((line for line in lines if line.strip()), b"")
    try:
        first_record = orjson.loads(first) if first else None
        first_parses = True
    except orjson.JSONDecodeError:
        first_record, first_parses = None, False
    if first_parses and isinstance(first_record, (dict, list)):
        found = sniff(first_record)
        if found is not None:
            if found in ("v1", "flat") and _is_page(first_record) and _single_line(lines, complete):
                return found, "document"  # an API page of records on one line: never one JSONL line
            return found, "lines"
    if not first_parses:
        # A document pretty-printed over many lines, or JSONL whose first line is bad.
        document = _load_document(path, text if complete else None)
        if document is not _NOT_JSON:
            found = sniff(document)
            if found is None:
                raise InputError(_unknown(path, document))
            return found, "document"
        found = sniff(first_stream_value(text))
        if found in TRACE_FORMATS:
            return found, "stream"
    for line in lines[:_SNIFF_LINES]:
        try:
            found = sniff(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
        if found is not None:
            return found, "lines"
    if stripped[:1] == b"{":
        return "v1", "lines"  # JSONL the request-log reader explains line by line
    raise InputError(_unknown(path, first_record if first_parses else None))


_NOT_JSON = object()


def first_stream_value(text: bytes) -> Any:
    """The first of several JSON values written one after another (None if it does not parse)."""
    try:
        value, _ = json.JSONDecoder().raw_decode(text.decode("utf-8", errors="replace").lstrip())
    except json.JSONDecodeError:
        return None
    return value


def iter_stream(text: bytes) -> Iterator[tuple[int, bytes]]:
    """`(line number where it starts, bytes)` of each JSON value of a stream of them; where a value
    does not parse, the rest of the text as one piece (its reader reports the JSON error)."""
    decoded = text.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    position, line_no, size = 0, 1, len(decoded)
    while True:
        start = position
        while start < size and decoded[start].isspace():
            start += 1
        if start >= size:
            return
        line_no += decoded.count("\n", position, start)
        try:
            _, end = decoder.raw_decode(decoded, start)
        except json.JSONDecodeError:
            yield line_no, decoded[start:].encode("utf-8")
            return
        yield line_no, decoded[start:end].encode("utf-8")
        line_no += decoded.count("\n", start, end)
        position = end


def _is_page(record: Any) -> bool:
    return isinstance(record, dict) and isinstance(record.get("data"), list) and "request_id" not in record


def _single_line(lines: list[bytes], complete: bool) -> bool:
    return complete and sum(1 for line in lines if line.strip()) == 1


def _load_document(path: Path, text: bytes | None) -> Any:
    if text is None:
        try:
            with open_bytes(path) as handle:
                text = handle.read()
        except (EOFError, OSError, gzip.BadGzipFile):
            return _NOT_JSON
        text = text[len(_BOM) :] if text.startswith(_BOM) else text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return _NOT_JSON


def _document_format(path: Path, text: bytes | None) -> str:
    document = _load_document(path, text)
    if document is _NOT_JSON:
        raise InputError(
            f"{path}: starts like a JSON array but is not valid JSON; tried "
            + ", ".join(_SNIFFED)
            + " — fix the document, or give --format"
        )
    found = sniff(document)
    if found is None:
        raise InputError(_unknown(path, document))
    return found


def _unknown(path: Path, record: Any) -> str:
    if isinstance(record, list):
        record = record[0] if record else None
    if isinstance(record, dict):
        keys = ", ".join(list(record)[:8])
        seen = f"its first record has the keys {keys}"
    else:
        seen = "it is not JSON lines or a JSON document"
    return (
        f"{path}: cannot tell the log format ({seen}); tried "
        + ", ".join(_SNIFFED)
        + " — give --format, or see README 'Trace formats'"
    )
