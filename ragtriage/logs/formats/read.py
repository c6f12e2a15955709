"""Read trace-format files (OTLP, Phoenix, Langfuse) of one ingest into requests.

All files of one ingest are read together: a trace's spans may be spread over them, and a
Langfuse export comes as observations, traces and scores files. Each trace becomes one
`Assembled` request body or one `Rejected` quarantine entry; a record that cannot be read at all
(bad JSON, not a span) is a `Rejected` of its own. So the unit counted as read is a trace or an
unreadable record, and `read = assembled + rejected`.
"""

from __future__ import annotations

import functools
import gzip
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import orjson

from ragtriage.config.settings import OtelSettings
from ragtriage.errors import InputError
from ragtriage.logs.formats import langfuse, otel_sdk, otlp, otlp_fast, phoenix
from ragtriage.logs.formats.assemble import Assembled, Rejected, assemble, digest, unpack_result
from ragtriage.logs.formats.collect import Digest, TraceCollector
from ragtriage.logs.formats.detect import iter_stream, open_bytes
from ragtriage.logs.formats.otlp import SpanFormatError
from ragtriage.logs.formats.spans import Note, Span
from ragtriage.logs.line_files import cut_message

_BOM = b"\xef\xbb\xbf"
_MISSING_FORMAT = {
    "otlp": (
        "not_otlp",
        "an ExportTraceServiceRequest (resourceSpans), an OTLP span or an OpenTelemetry SDK span (to_json)",
    ),
    "phoenix": ("not_phoenix", "a Phoenix span (context, span_kind) or annotation"),
    "langfuse": ("not_langfuse", "a Langfuse observation, trace or score"),
}


def iter_raw(
    path: Path, layout: str, piece: tuple[int, int, int] | None = None
) -> Iterator[tuple[int, bytes]]:
    """`(line number, bytes)` of every non-blank line, `(1, whole file)` for a document, or each
    value of a stream with the line it starts on; a leading byte-order mark is dropped. `piece`
    `(first line number, offset, length)`: only the whole lines in those bytes of an uncompressed
    file (`line_files.iter_line_ranges`).

    Raises:
        InputError: the file cannot be read, or its gzip stream is corrupt or cut off.
    """
    first_line_no = 1 if piece is None else piece[0]
    line_no = first_line_no - 1
    with open_bytes(path) as handle:
        try:
            if layout in ("document", "stream"):
                text = handle.read()
                text = text[len(_BOM) :] if text.startswith(_BOM) else text
                if layout == "stream":
                    yield from iter_stream(text)
                else:
                    yield 1, text
                return
            lines = handle if piece is None else _lines_between(handle, piece[1], piece[2])
            for line_no, raw in enumerate(lines, start=first_line_no):
                if line_no == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM) :]
                if not raw.isspace():
                    yield line_no, raw
        except (EOFError, gzip.BadGzipFile, OSError) as error:
            raise InputError(cut_message(path, line_no, error)) from None


def _lines_between(handle: BinaryIO, offset: int, length: int) -> Iterator[bytes]:
    """The lines in `length` bytes from `offset` (a piece always ends at a line's end)."""
    handle.seek(offset)
    left = length
    while left > 0:
        raw = handle.readline(left)
        if not raw:
            break
        left -= len(raw)
        yield raw


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


def read_traces(
    files: Sequence[tuple[Path, str, str]],
    otel: OtelSettings,
    *,
    spill_dir: Path | None = None,
    memory_spans: int = 5_000,
) -> Iterator[Assembled | Rejected]:
    """Every trace of `files` (`(path, format, layout)`) as a request body or a rejection;
    unreadable records first, as they are met, then the traces in the order their first span
    was read.

    Raises:
        InputError: a file cannot be read.
    """
    collector = TraceCollector(
        memory_spans=memory_spans,
        spill_dir=spill_dir,
        index_spans=needs_span_index(files),
        digest=digester(otel),
    )
    try:
        for path, fmt, layout in files:
            yield from read_into(collector, iter_raw(path, layout), str(path), fmt, layout, otel)
        yield from assembled(collector, otel)
    finally:
        collector.close()


def digester(otel: OtelSettings) -> Digest:
    """The collector's `digest`: assemble a spill row's spans where they are read."""
    return functools.partial(digest, otel=otel)


def needs_span_index(files: Sequence[tuple[Path, str, str]]) -> bool:
    """Whether notes naming only a span id may come (Phoenix annotations, Langfuse scores)."""
    return any(fmt != "otlp" for _, fmt, _ in files)


def read_into(
    collector: TraceCollector,
    lines: Iterable[tuple[int, bytes]],
    display: str,
    fmt: str,
    layout: str,
    otel: OtelSettings,
) -> Iterator[Rejected]:
    """Read numbered `lines` of one file into `collector`; yield each unreadable record.

    Raises:
        InputError: the file cannot be read.
    """
    for line_no, raw in lines:
        fast = None
        if fmt == "otlp":
            try:
                fast = otlp_fast.spans_from_json(raw, display, line_no)
            except msgspec.DecodeError:
                fast = None  # the dict path below reports the JSON error
        if fast is not None:
            found: Iterable[tuple[int, Any, Sequence[Span | Note | SpanFormatError]]] = [
                (line_no, None, fast)
            ]
        else:
            found = (
                (
                    number,
                    record,
                    [] if isinstance(record, Rejected) else items_of(fmt, record, otel, display, number),
                )
                for number, record in records_of(raw, line_no, display, document=layout == "document")
            )
        for number, record, items in found:
            if isinstance(record, Rejected):
                yield record
            for item in items:
                if isinstance(item, Span):
                    collector.add_span(item)
                elif isinstance(item, Note):
                    collector.add_note(item)
                else:
                    yield _rejected_record(fmt, item, record if record is not None else raw, display, number)


def assembled(collector: TraceCollector, otel: OtelSettings) -> Iterator[Assembled | Rejected]:
    """Each collected trace assembled into a request (or rejected), in order of first appearance."""
    for trace_id, spans, notes, result in collector.traces():
        if result is not None:
            yield unpack_result(result)
            continue
        if not spans:
            first = notes[0]
            yield Rejected(
                "orphan_feedback",
                f"{len(notes)} {'annotation or score' if len(notes) == 1 else 'annotations or scores'} for "
                + (f"span {trace_id[5:]}" if trace_id.startswith("span:") else f"trace {trace_id}")
                + f" ('{first.name}'), which is not in this ingest",
                "ingest the feedback together with the trace's spans",
                first.source,
                first.line_no,
                orjson.dumps([n.as_annotation() for n in notes]),
            )
            continue
        yield assemble(trace_id, spans, notes, otel)
