"""Read trace-format files (OTLP, Phoenix, Langfuse) of one ingest into requests.

All files of one ingest are read together: a trace's spans may be spread over them, and a
Langfuse export comes as observations, traces and scores files. Each trace becomes one
`Assembled` request body or one `Rejected` quarantine entry; a record that cannot be read at all
(bad JSON, not a span) is a `Rejected` of its own. So the unit counted as read is a trace or an
unreadable record, and `read = assembled + rejected`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from ragtriage.config import OtelSettings
from ragtriage.logs.formats import langfuse, otlp, phoenix
from ragtriage.logs.formats.assemble import Assembled, Rejected, assemble
from ragtriage.logs.formats.collect import TraceCollector
from ragtriage.logs.formats.detect import open_bytes
from ragtriage.logs.formats.otlp import SpanFormatError
from ragtriage.logs.formats.spans import Note, Span

_BOM = b"\xef\xbb\xbf"
_MISSING_FORMAT = {
    "otlp": ("not_otlp", "an ExportTraceServiceRequest (resourceSpans) or an OTLP span"),
    "phoenix": ("not_phoenix", "a Phoenix span (context, span_kind) or annotation"),
    "langfuse": ("not_langfuse", "a Langfuse observation, trace or score"),
}


def iter_records(path: Path, layout: str, display: str) -> Iterator[tuple[int, Any]]:
    """`(line or record number, parsed record or Rejected)` of a JSONL file or a JSON document.

    A document's records are the items of its `data` list (an API page) or of a top-level array;
    any other document is one record.

    Raises:
        InputError: the file cannot be read.
    """
    with open_bytes(path) as handle:
        if layout == "document":
            text = handle.read()
            text = text[len(_BOM) :] if text.startswith(_BOM) else text
            try:
                document = orjson.loads(text)
            except orjson.JSONDecodeError as error:
                yield (
                    1,
                    Rejected(
                        "invalid_json",
                        f"not valid JSON: {error}",
                        "fix the JSON document",
                        display,
                        1,
                        text[:4096],
                    ),
                )
                return
            items = document["data"] if _is_page(document) else document
            if isinstance(items, list):
                for number, item in enumerate(items, start=1):
                    yield number, item
            else:
                yield 1, document
            return
        for line_no, raw in enumerate(handle, start=1):
            if line_no == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            if not raw.strip():
                continue
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
                        raw.rstrip(b"\n"),
                    ),
                )
                continue
            if _is_page(record):
                # A page written on one line (`{"data": [...], "meta": …}`): its items are the records.
                for item in record["data"]:
                    yield line_no, item
            else:
                yield line_no, record


def _is_page(record: Any) -> bool:
    return isinstance(record, dict) and isinstance(record.get("data"), list) and not otlp.is_export_request(record)


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


def read_traces(
    files: Sequence[tuple[Path, str, str]],
    otel: OtelSettings,
    *,
    spill_dir: Path | None = None,
    memory_spans: int = 10_000,
) -> Iterator[Assembled | Rejected]:
    """Every trace of `files` (`(path, format, layout)`) as a request body or a rejection;
    unreadable records first, as they are met, then the traces in the order their first span
    was read.

    Raises:
        InputError: a file cannot be read.
    """
    collector = TraceCollector(memory_spans=memory_spans, spill_dir=spill_dir)
    try:
        for path, fmt, layout in files:
            display = str(path)
            for line_no, record in iter_records(path, layout, display):
                if isinstance(record, Rejected):
                    yield record
                    continue
                for item in items_of(fmt, record, otel, display, line_no):
                    if isinstance(item, Span):
                        collector.add_span(item)
                    elif isinstance(item, Note):
                        collector.add_note(item)
                    else:
                        where = f"span {item.span_id}: " if item.span_id else ""
                        yield Rejected(
                            _MISSING_FORMAT[fmt][0] if item.message.startswith("not ") else "bad_span",
                            where + item.message,
                            item.fix,
                            display,
                            line_no,
                            orjson.dumps(record)[:65536],
                        )
        for trace_id, spans, notes in collector.traces():
            if not spans:
                first = notes[0]
                yield Rejected(
                    "orphan_feedback",
                    f"{len(notes)} annotation(s)/score(s) for trace {trace_id} ('{first.name}'), whose "
                    "spans are not in this ingest",
                    "ingest the feedback together with the trace's spans",
                    first.source,
                    first.line_no,
                    orjson.dumps([n.as_annotation() for n in notes]),
                )
                continue
            yield assemble(trace_id, spans, notes, otel)
    finally:
        collector.close()
