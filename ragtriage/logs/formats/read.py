"""Read the trace-format files of one ingest (OTLP, Phoenix, Langfuse) into requests.

All files of one ingest are read together: a trace's spans may be spread over them (the Collector
rotates its files), a Langfuse export comes as observations, traces and scores files, and feedback
may come long after its trace. So no trace is complete before the input ends: spans are grouped by
trace in memory, without their bulky attributes (`otlp.BULKY_*`, document contents), and each trace
becomes one `Assembled` request body, one `Rejected` quarantine entry, or, when only its feedback
is in the input (EVALUATOR carrier spans, annotations, scores), one `Late` item that ingest merges
into the stored request. A record that cannot be read at all (bad JSON, not a span) is a
`Rejected` of its own. So the unit counted as read is a trace or an unreadable record, and
`read = assembled + rejected + late`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from ragtriage.config.settings import OtelSettings
from ragtriage.logs.formats import langfuse, otel_sdk, otlp, phoenix
from ragtriage.logs.formats.assemble import Assembled, Late, Rejected, assemble, late_feedback
from ragtriage.logs.formats.detect import record_kind
from ragtriage.logs.formats.otlp import SpanFormatError
from ragtriage.logs.formats.spans import KIND_EVALUATOR, Note, Span
from ragtriage.logs.line_files import iter_records
from ragtriage.logs.log_line import BadLine, document_error

_MISSING_FORMAT = {
    "otlp": (
        "not_otlp",
        "an ExportTraceServiceRequest (resourceSpans), an OTLP span or an OpenTelemetry SDK span (to_json)",
    ),
    "phoenix": ("not_phoenix", "a Phoenix span (context, span_kind) or annotation"),
    "langfuse": ("not_langfuse", "a Langfuse observation, trace or score"),
}

NumberedLine = tuple[int, "bytes | BadLine | Late", bool]
"""`(line_no, raw line, an already rejected record or late feedback, unterminated)`: what the
line parser takes."""


def trace_lines(
    files: Sequence[tuple[Path, str, str]], otel: OtelSettings
) -> Iterator[tuple[Path, Iterator[NumberedLine]]]:
    """The requests of all trace-format `files` (`(path, format, layout)`), as runs of numbered
    lines per file: each assembled request as a schema-v1 line, each rejected trace or record as a
    `BadLine`, feedback for a trace not in `files` as `Late` (ingest merges it into the stored
    request). A request's line is the line of its root span; a rejected trace's is the line of the
    span the rejection names. Consume each run before asking for the next.

    Raises:
        InputError: a file cannot be read.
    """
    by_display = {str(path): path for path, _, _ in files}
    for display, group in itertools.groupby(read_traces(files, otel), key=lambda item: item.source):
        yield (
            by_display.get(display, Path(display)),
            (
                (item.line_no, item.body, False)
                if isinstance(item, Assembled)
                else (item.line_no, item, False)
                if isinstance(item, Late)
                else (item.line_no, BadLine(item.line_no, item.kind, item.message, item.fix, item.raw), False)
                for item in group
            ),
        )


#: Trace inputs up to this size are grouped in memory in one pass. Bigger ones are read twice: the
#: first pass only learns the record where each trace's last span or note is, so that the second
#: assembles and releases each trace there; memory then follows the traces open at once, not the
#: input (a trace holds about 30 KB of Python objects).
SINGLE_PASS_BYTES = 64 << 20

_Record = tuple[str, str, int, Any]
"""`(format, file as given, line or record number, record or Rejected)`."""


def read_traces(
    files: Sequence[tuple[Path, str, str]], otel: OtelSettings, *, single_pass_bytes: int = SINGLE_PASS_BYTES
) -> Iterator[Assembled | Rejected | Late]:
    """Every trace of `files` (`(path, format, layout)`) as a request body, a rejection, or `Late`
    feedback when its only spans are EVALUATOR carriers, each once its last span or note is read
    (inputs of `single_pass_bytes` or less: at the end, in the order their first span was read);
    unreadable records as they are met; then, as `Late`, notes whose trace is not in the input.

    Raises:
        InputError: a file cannot be read.
    """
    size = sum(path.stat().st_size for path, _, _ in files if path.is_file())
    due = _last_records(files, otel) if size > single_pass_bytes else {}
    traces: dict[str, list[Span]] = {}
    noted: dict[str, list[tuple[int, Note]]] = {}
    """Notes by the trace they name, or `span:ID` when they name only a span, with their place."""
    for index, (fmt, display, number, record) in enumerate(_records(files)):
        if isinstance(record, Rejected):
            yield record
            continue
        for item in items_of(fmt, record, otel, display, number):
            if isinstance(item, Span):
                traces.setdefault(_trace_of(item), []).append(item)
            elif isinstance(item, Note):
                key = item.trace_id or f"span:{item.span_id}"
                noted.setdefault(key, []).append((index, item))
            else:
                yield _rejected_record(fmt, item, record, display, number)
        for trace_id in due.get(index, ()):
            if trace_id in traces:
                yield _assembled(trace_id, traces.pop(trace_id), noted, otel)
    while traces:
        trace_id = next(iter(traces))
        yield _assembled(trace_id, traces.pop(trace_id), noted, otel)
    for trace_id in sorted(noted):
        yield late_feedback(trace_id, [], [note for _, note in noted[trace_id]], otel)


def _records(files: Sequence[tuple[Path, str, str]]) -> Iterator[_Record]:
    for path, fmt, layout in files:
        display = str(path)
        for line_no, raw in iter_records(path, layout):
            for number, record in records_of(raw, line_no, display, layout=layout):
                yield fmt, display, number, record


def _last_records(files: Sequence[tuple[Path, str, str]], otel: OtelSettings) -> dict[int, list[str]]:
    """The first pass: trace ids by the index (in `_records` order) of the record that holds the
    trace's last span or note."""
    last: dict[str, int] = {}
    span_traces: dict[str, str] = {}
    by_span: list[tuple[int, str]] = []
    index_spans = any(fmt != "otlp" for _, fmt, _ in files)  # only those formats name a span alone
    for index, (fmt, display, number, record) in enumerate(_records(files)):
        if isinstance(record, Rejected):
            continue
        for item in items_of(fmt, record, otel, display, number, ids_only=True):
            if isinstance(item, Span):
                trace_id = _trace_of(item)
                last[trace_id] = index
                if index_spans:
                    span_traces[item.span_id] = trace_id
            elif isinstance(item, Note):
                if item.trace_id is not None:
                    last[item.trace_id] = index
                else:
                    by_span.append((index, item.span_id or ""))
    for index, span_id in by_span:
        found = span_traces.get(span_id)
        if found is not None and last[found] < index:
            last[found] = index
    due: dict[int, list[str]] = {}
    for trace_id, index in last.items():
        due.setdefault(index, []).append(trace_id)
    return due


def _trace_of(span: Span) -> str:
    """The trace a span belongs to: an EVALUATOR carrier span joins the trace it links to."""
    if span.kind == KIND_EVALUATOR and span.links:
        return span.links[0][0]
    return span.trace_id


def _assembled(
    trace_id: str, spans: list[Span], noted: dict[str, list[tuple[int, Note]]], otel: OtelSettings
) -> Assembled | Rejected | Late:
    """Assemble one trace with the notes naming it or one of its spans (in the order read)."""
    notes = noted.pop(trace_id, [])
    if noted:
        for span in spans:
            notes += noted.pop(f"span:{span.span_id}", [])
    return assemble(trace_id, spans, [note for _, note in sorted(notes, key=lambda item: item[0])], otel)


def records_of(raw: bytes, line_no: int, display: str, *, layout: str = "lines") -> Iterator[tuple[int, Any]]:
    """`(line or record number, record)` of one line, document or stream value (`layout`, as
    `iter_records` read it), or one `Rejected` for bad JSON (of a document or stream value: where
    it breaks, `log_line.document_error`).

    A page (`{"data": [...], …}`, one line or a whole document) or a top-level array is its items
    (in a document, numbered from 1); anything else is one record.
    """
    document = layout in ("document", "broken")
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        if layout == "lines":
            bad = BadLine(line_no, "invalid_json", f"not valid JSON: {error}", "fix the JSON syntax", raw)
        else:
            # A stream's value that does not parse is the rest of the stream: offsets count from its start.
            bad = document_error(
                raw, error, "JSON document" if document else "JSON value starting on this line"
            )
        yield (
            line_no,
            Rejected(bad.kind, bad.message, bad.fix, display, line_no, bad.raw.rstrip(b"\n")[:65536]),
        )
        return
    items = record["data"] if _is_page(record) else record
    if isinstance(items, list):
        for number, item in enumerate(items, start=1):
            yield (number if document else line_no), item
    else:
        yield line_no, record


def _is_page(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("data"), list)
        and record_kind(record) != "otlp_export"
    )


def items_of(
    fmt: str, record: Any, otel: OtelSettings, source: str, line_no: int, *, ids_only: bool = False
) -> list[Span | Note | SpanFormatError]:
    """The spans and notes one record of format `fmt` holds (unreadable ones as errors). With
    `ids_only`, OTLP spans carry only their span kind of their attributes (the first pass)."""
    kind = record_kind(record)
    try:
        if fmt in ("otlp", "phoenix") and isinstance(record, dict):
            if kind == "otlp_export" or isinstance(record.get("data"), list):
                return list(otlp.iter_export(record, source, line_no, ids_only=ids_only))
            if kind == "otlp_span":
                return [otlp.span_from_otlp(record, {}, source, line_no, ids_only=ids_only)]
            if kind == "sdk_span":
                return [otel_sdk.span_from_sdk(record, source, line_no)]
        if fmt == "phoenix" and kind == "phoenix_span":
            return [phoenix.span_from_phoenix(record, source, line_no)]
        if fmt == "phoenix" and kind == "phoenix_annotation":
            note = phoenix.note_from_phoenix(record, source, line_no)
            return [] if note is None else [note]
        if kind == "langfuse_observation" and fmt == "langfuse":
            return [langfuse.span_from_observation(record, otel, source, line_no)]
        if kind == "langfuse_trace" and fmt == "langfuse":
            return [langfuse.span_from_trace(record, source, line_no)]
        if kind == "langfuse_score" and fmt == "langfuse":
            note = langfuse.note_from_score(record, source, line_no)
            return [] if note is None else [note]
    except SpanFormatError as error:
        return [error]
    _, expected = _MISSING_FORMAT[fmt]
    keys = ", ".join(list(record)[:6]) if isinstance(record, dict) else type(record).__name__
    return [
        SpanFormatError(f"not {expected} (got {keys})", f"give only {fmt} files, or pass the right --format")
    ]


def _rejected_record(fmt: str, error: SpanFormatError, record: Any, display: str, line_no: int) -> Rejected:
    where = f"span {error.span_id}: " if error.span_id else ""
    raw = record if isinstance(record, bytes) else orjson.dumps(record)
    return Rejected(
        _MISSING_FORMAT[fmt][0] if error.message.startswith("not ") else "bad_span",
        where + error.message,
        error.fix,
        display,
        line_no,
        raw[:65536],
    )
