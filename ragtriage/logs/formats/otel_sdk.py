"""Spans as the OpenTelemetry Python SDK writes them itself, into `Span`s.

`ReadableSpan.to_json()` (opentelemetry-sdk `opentelemetry/sdk/trace/__init__.py`), which
`ConsoleSpanExporter` prints, is the JSON a service without a Collector most often has on disk:
`{name, context{trace_id, span_id, trace_state}, kind ("SpanKind.INTERNAL"), parent_id,
start_time, end_time (ISO 8601, UTC), status{status_code, description}, attributes (a flat
dict), events[{name, timestamp, attributes}], links[{context, attributes}], resource{attributes,
schema_url}}`, ids as `0x`-prefixed hex. The exporter's default formatter indents it over many
lines with no separator between spans (`detect` calls that layout `stream`); a formatter such as
`lambda span: span.to_json(indent=None) + "\\n"` makes it JSONL. Both are read the same way, under
the `otlp` format, into the same `Span` as an OTLP span.
"""

from __future__ import annotations

from typing import Any

from ragtriage.logs.formats.otlp import (
    SpanFormatError,
    dict_attributes,
    events_as_evaluations,
    iso_time_ns,
    normalize_id,
)
from ragtriage.logs.formats.spans import Span, openinference_kind

_EXPORTER = "the OpenTelemetry SDK (ReadableSpan.to_json)"


def _hex_id(value: Any, size: int, field: str) -> str:
    """`0x…` hex (the SDK's form) or plain hex/base64 as lowercase hex of `2 * size` digits."""
    text = value[2:] if isinstance(value, str) and value[:2] in ("0x", "0X") else value
    return normalize_id(text, size, field)


def span_from_sdk(obj: dict[str, Any], source: str, line_no: int) -> Span:
    """One SDK span.

    Raises:
        SpanFormatError: a missing or malformed id, or a time that is not ISO 8601.
    """
    context = obj.get("context") or {}
    raw_span_id = context.get("span_id")
    span_id = _hex_id(raw_span_id, 8, "context.span_id")
    try:
        trace_id = _hex_id(context.get("trace_id"), 16, "context.trace_id")
        parent = obj.get("parent_id")
        parent_id = _hex_id(parent, 8, "parent_id") if parent else None
        links = [
            (
                _hex_id(link["context"].get("trace_id"), 16, "links.context.trace_id"),
                _hex_id(link["context"].get("span_id"), 8, "links.context.span_id"),
            )
            for link in obj.get("links") or ()
            if isinstance(link, dict) and isinstance(link.get("context"), dict)
        ]
        start = iso_time_ns(obj.get("start_time"), "start_time", span_id, _EXPORTER)
        end = iso_time_ns(obj.get("end_time"), "end_time", span_id, _EXPORTER)
    except SpanFormatError as error:
        error.span_id = span_id
        raise
    attrs = dict_attributes(obj.get("attributes"))
    events_as_evaluations(obj.get("events"), attrs)
    resource = obj.get("resource")
    resource_attrs = resource.get("attributes") if isinstance(resource, dict) else None
    status = obj.get("status")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=str(obj.get("name") or ""),
        kind=openinference_kind(attrs),
        start_ns=start,
        end_ns=end,
        attributes=attrs,
        source=source,
        line_no=line_no,
        resource=dict(resource_attrs) if isinstance(resource_attrs, dict) else {},
        links=links,
        status="ERROR" if isinstance(status, dict) and status.get("status_code") == "ERROR" else None,
    )
