"""Tell a log file's format and layout by its content, never by its name (`plan_files` for the
files of one ingest), and what one trace-format record is (`record_kind`).

Layout: `lines` (JSONL, one record per line), `document` (one JSON object or array, perhaps
pretty-printed over many lines; never read line by line), `stream` (JSON values one after
another, each perhaps over many lines, as OpenTelemetry's `ConsoleSpanExporter` prints spans;
trace formats only) or `broken` (a file that starts as one JSON document, its first line not a
complete JSON value, and does not parse: usually cut short by an interrupted download; it is one
error, never thousands of bad lines). Format: one of `FORMATS`, from the keys of the first record
that names one (of a broken document: of the first complete record inside it).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ragtriage.errors import InputError
from ragtriage.logs.formats.tables import csv_columns, csv_header
from ragtriage.logs.line_files import open_bytes
from ragtriage.wording import quoted

#: Formats `--format` accepts besides `auto` (`parquet` is read by the columnar reader).
FORMATS = ("v1", "flat", "otlp", "phoenix", "langfuse", "parquet", "csv")
#: Formats read by this package (the others by the request-log reader).
TRACE_FORMATS = ("otlp", "phoenix", "langfuse")
#: `--format` choices.
FORMAT_CHOICES = ("auto", *FORMATS)
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


@dataclass(frozen=True, slots=True)
class PlannedFile:
    """One input file and how it is read."""

    path: Path
    format: str
    layout: str
    """`lines` (JSONL), `document` (one JSON value), `stream` (JSON values one after another) or
    `broken` (a JSON document that does not parse: nothing in it is read)."""

    @property
    def is_trace(self) -> bool:
        """Read by the trace formats (together with the other trace files of the ingest)."""
        return self.format in TRACE_FORMATS


def plan_files(paths: Sequence[Path], log_format: str = "auto") -> list[PlannedFile]:
    """Each file's format and layout: detected from its content, or `log_format` for all.

    Raises:
        InputError: an unknown `log_format`, or a file whose content matches no format.
    """
    if log_format not in FORMAT_CHOICES:
        raise InputError(f"unknown log format {quoted(log_format)}; use one of {', '.join(FORMAT_CHOICES)}")
    planned = []
    for path in paths:
        path = Path(path)
        detected, layout = detect(path)
        if log_format != "auto" and detected != log_format:
            if "parquet" in (detected, log_format):
                raise InputError(
                    f"{path}: {'a' if detected == 'parquet' else 'not a'} Parquet file, but "
                    f"--format {log_format} was given; fix: drop --format (auto detects it) or give the right one"
                )
            # Forced: keep the detected layout (a document is never read as JSONL).
            detected = log_format
        if detected == "csv":
            csv_columns(path)  # a file without a usable header stops the ingest before anything is stored
        planned.append(PlannedFile(path, detected, layout))
    return planned


def record_kind(record: Any) -> str | None:
    """What one trace-format record is: `otlp_export` (an ExportTraceServiceRequest, either key
    style), `otlp_span` (a bare OTLP span, a Phoenix `/spans/otlpv1` page item), `sdk_span` (as the
    OpenTelemetry SDK's `ReadableSpan.to_json()` writes it), `phoenix_span`, `phoenix_annotation`
    (of a span, trace or document), `langfuse_observation`, `langfuse_trace`, `langfuse_score`;
    None for anything else."""
    if not isinstance(record, dict):
        return None
    keys = record.keys()
    if "resourceSpans" in keys or "resource_spans" in keys:
        return "otlp_export"
    if ("spanId" in keys or "span_id" in keys) and (
        "startTimeUnixNano" in keys or "start_time_unix_nano" in keys
    ):
        return "otlp_span"
    context = record.get("context")
    if isinstance(context, dict):
        if "span_kind" in keys:
            return "phoenix_span"
        if "kind" in keys and "trace_id" in context and "span_id" in context:
            return "sdk_span"
    if "annotator_kind" in keys and "name" in keys and ("span_id" in keys or "trace_id" in keys):
        return "phoenix_annotation"
    if "traceId" in keys and "type" in keys and "startTime" in keys:
        return "langfuse_observation"
    if "traceId" in keys and "name" in keys and ("dataType" in keys or "stringValue" in keys):
        return "langfuse_score"
    if (
        "id" in keys
        and "timestamp" in keys
        and "traceId" not in keys
        and ({"sessionId", "userId", "release", "observations", "htmlPath", "tags"} & keys)
    ):
        return "langfuse_trace"
    return None


_FORMAT_OF_KIND = {
    "otlp_export": "otlp",
    "otlp_span": "otlp",
    "sdk_span": "otlp",
    "phoenix_span": "phoenix",
    "phoenix_annotation": "phoenix",
    "langfuse_observation": "langfuse",
    "langfuse_trace": "langfuse",
    "langfuse_score": "langfuse",
}


def sniff(record: Any) -> str | None:
    """The format one parsed record (a line, or a whole document) belongs to, or None."""
    if isinstance(record, list):
        return sniff(record[0]) if record else None
    if not isinstance(record, dict):
        return None
    kind = record_kind(record)
    if kind is not None:
        return _FORMAT_OF_KIND[kind]
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
        return _document_format(path, text if complete else None, text)
    lines = text.split(b"\n")
    if not complete:
        lines.pop()  # the last piece may be cut
    first = next((line for line in lines if line.strip()), b"")
    try:
        first_record = orjson.loads(first) if first else None
        first_parses = True
    except orjson.JSONDecodeError:
        first_record, first_parses = None, False
    if not first and not complete:
        first_parses = False  # one line longer than the peek: an API page on one line, read whole
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
        first_value = first_stream_value(text)
        found = sniff(first_value)
        if found in TRACE_FORMATS:
            return found, "stream"
        opens = stripped[:1] == b"{"
        if opens and first_value is None and not any(_names_format(line) for line in lines[:_SNIFF_LINES]):
            # Not even its first value parses, and it is not JSONL with a bad first line.
            return _partial_format(text), "broken"
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


def _document_format(path: Path, text: bytes | None, peek: bytes) -> tuple[str, str]:
    document = _load_document(path, text)
    if document is _NOT_JSON:
        return _partial_format(peek), "broken"
    found = sniff(document)
    if found is None:
        raise InputError(_unknown(path, document))
    return found, "document"


def _names_format(line: bytes) -> bool:
    try:
        return sniff(orjson.loads(line)) is not None
    except orjson.JSONDecodeError:
        return False


def _partial_format(peek: bytes) -> str:
    """The format of a document that does not parse, from the first complete object inside it
    that names one (a page's first item, an OTLP export's first span); `v1` when none does."""
    text = peek.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    start = text.find("{", 1)
    while start != -1:
        try:
            found = sniff(decoder.raw_decode(text, start)[0])
        except json.JSONDecodeError:
            found = None  # an object cut short (or a brace inside a string): look further in
        if found is not None:
            return found
        start = text.find("{", start + 1)
    return "v1"


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
