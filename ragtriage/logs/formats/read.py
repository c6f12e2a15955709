"""Read the trace-format files of one ingest (OTLP, Phoenix, Langfuse) into requests.

All files of one ingest are read together: a trace's spans may be spread over them (the Collector
rotates its files), a Langfuse export comes as observations, traces and scores files, and feedback
may come long after its trace. So no trace is complete before the input ends: spans are grouped by
trace in memory, without their bulky attributes (`otlp.BULKY_*`, document contents), and each trace
becomes one `Assembled` request body or one `Rejected` quarantine entry. A record that cannot be
read at all (bad JSON, not a span) is a `Rejected` of its own. So the unit counted as read is a
trace or an unreadable record, and `read = assembled + rejected`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from ragtriage.config.settings import OtelSettings
from ragtriage.gc_thresholds import fewer_young_collections
from ragtriage.logs.formats import langfuse, otel_sdk, otlp, phoenix
from ragtriage.logs.formats.assemble import Assembled, Rejected, assemble
from ragtriage.logs.formats.otlp import SpanFormatError
from ragtriage.logs.formats.spans import KIND_EVALUATOR, Note, Span
from ragtriage.logs.line_files import iter_records
from ragtriage.logs.log_line import BadLine

_MISSING_FORMAT = {
    "otlp": (
        "not_otlp",
        "an ExportTraceServiceRequest (resourceSpans), an OTLP span or an OpenTelemetry SDK span (to_json)",
    ),
    "phoenix": ("not_phoenix", "a Phoenix span (context, span_kind) or annotation"),
    "langfuse": ("not_langfuse", "a Langfuse observation, trace or score"),
}

NumberedLine = tuple[int, "bytes | BadLine", bool]
"""`(line_no, raw line or an already rejected record, unterminated)`: what the line parser takes."""


def trace_lines(
    files: Sequence[tuple[Path, str, str]], otel: OtelSettings
) -> Iterator[tuple[Path, Iterator[NumberedLine]]]:
    """The requests of all trace-format `files` (`(path, format, layout)`), as runs of numbered
    lines per file: each assembled request as a schema-v1 line, each rejected trace or record as a
    `BadLine`. A request's line is the line of its root span; a rejected trace's is the line of the
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
                else (item.line_no, BadLine(item.line_no, item.kind, item.message, item.fix, item.raw), False)
                for item in group
            ),
        )


def read_traces(files: Sequence[tuple[Path, str, str]], otel: OtelSettings) -> Iterator[Assembled | Rejected]:
    """Every trace of `files` (`(path, format, layout)`) as a request body or a rejection;
    unreadable records first, as they are met, then the traces in the order their first span
    was read, then feedback whose trace is not in the input.

    Raises:
        InputError: a file cannot be read.
    """
    traces: dict[str, list[Span]] = {}
    notes: list[Note] = []
    with fewer_young_collections():
        for path, fmt, layout in files:
            display = str(path)
            for line_no, raw in iter_records(path, layout):
                for number, record in records_of(raw, line_no, display, document=layout == "document"):
                    if isinstance(record, Rejected):
                        yield record
                        continue
                    for item in items_of(fmt, record, otel, display, number):
                        if isinstance(item, Span):
                            traces.setdefault(_trace_of(item), []).append(item)
                        elif isinstance(item, Note):
                            notes.append(item)
                        else:
                            yield _rejected_record(fmt, item, record, display, number)
        noted = _notes_by_trace(notes, traces)
        while traces:
            trace_id = next(iter(traces))
            yield assemble(trace_id, traces.pop(trace_id), noted.pop(trace_id, []), otel)
        for trace_id in sorted(noted):
            yield _orphan(trace_id, noted[trace_id])


def _trace_of(span: Span) -> str:
    """The trace a span belongs to: an EVALUATOR carrier span joins the trace it links to."""
    if span.kind == KIND_EVALUATOR and span.links:
        return span.links[0][0]
    return span.trace_id


def _notes_by_trace(notes: list[Note], traces: dict[str, list[Span]]) -> dict[str, list[Note]]:
    """Notes keyed by trace id; a note naming only a span id joins the trace of that span."""
    wanted = {n.span_id for n in notes if n.trace_id is None and n.span_id}
    span_traces = {
        span.span_id: trace_id
        for trace_id, spans in (traces.items() if wanted else ())
        for span in spans
        if span.span_id in wanted
    }
    grouped: dict[str, list[Note]] = {}
    for note in notes:
        trace_id = note.trace_id or span_traces.get(note.span_id or "") or f"span:{note.span_id}"
        grouped.setdefault(trace_id, []).append(note)
    return grouped


def _orphan(trace_id: str, notes: list[Note]) -> Rejected:
    first = notes[0]
    return Rejected(
        "orphan_feedback",
        f"{len(notes)} {'annotation or score' if len(notes) == 1 else 'annotations or scores'} for "
        + (f"span {trace_id[5:]}" if trace_id.startswith("span:") else f"trace {trace_id}")
        + f" ('{first.name}'), which is not in this ingest",
        "ingest the feedback together with the trace's spans",
        first.source,
        first.line_no,
        orjson.dumps([n.as_annotation() for n in notes]),
    )


def records_of(
    raw: bytes, line_no: int, display: str, *, document: bool = False
) -> Iterator[tuple[int, Any]]:
    """`(line or record number, record)` of one line or document, or one `Rejected` for bad JSON.

    A page (`{"data": [...], …}`, one line or a whole document) or a top-level array is its items
    (in a document, numbered from 1); anything else is one record.
    """
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        yield (
            line_no,
            Rejected(
                "invalid_json",
                f"not valid JSON: {error}",
                "fix the JSON syntax",
                display,
                line_no,
                raw.rstrip(b"\n")[:65536],
            ),
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
        and not otlp.is_export_request(record)
    )


def items_of(
    fmt: str, record: Any, otel: OtelSettings, source: str, line_no: int
) -> list[Span | Note | SpanFormatError]:
    """The spans and notes one record of format `fmt` holds (unreadable ones as errors)."""
    try:
        if fmt in ("otlp", "phoenix") and isinstance(record, dict):
            if otlp.is_export_request(record) or isinstance(record.get("data"), list):
                return list(otlp.iter_export(record, source, line_no))
            if otlp.is_otlp_span(record):
                return [otlp.span_from_otlp(record, {}, source, line_no)]
            if otel_sdk.is_sdk_span(record):
                return [otel_sdk.span_from_sdk(record, source, line_no)]
        if fmt == "phoenix" and isinstance(record, dict):
            if phoenix.is_span(record):
                return [phoenix.span_from_phoenix(record, source, line_no)]
            if phoenix.is_annotation(record):
                note = phoenix.note_from_phoenix(record, source, line_no)
                return [] if note is None else [note]
        if fmt == "langfuse":
            kind = langfuse.kind_of(record)
            if kind == "observation":
                return [langfuse.span_from_observation(record, otel, source, line_no)]
            if kind == "trace":
                return [langfuse.span_from_trace(record, source, line_no)]
            if kind == "score":
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
