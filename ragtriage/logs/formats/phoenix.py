"""Arize Phoenix exports into `Span`s and `Note`s.

Shapes (Phoenix `src/phoenix/server/api/routers/v1/spans.py` and `annotations.py`):
- `GET /v1/projects/{id}/spans` pages `{"data": [span, …], "next_cursor": …}`; a span is
  `{id, name, context{trace_id, span_id}, span_kind, parent_id, start_time, end_time (ISO 8601),
  status_code, status_message, attributes (flattened; `metadata` flattened too), events}`;
- `GET /v1/projects/{id}/spans/otlpv1` pages hold OTLP spans with snake_case keys (read by `otlp`);
- span annotations `{span_id, name, annotator_kind, result{label, score, explanation}, metadata,
  identifier}` and trace annotations (`trace_id` instead of `span_id`). Document annotations
  (`document_position`) judge single documents, not the request, and are skipped.
"""

from __future__ import annotations

from typing import Any

from ragtriage.logs.formats.otlp import (
    SpanFormatError,
    dict_attributes,
    events_as_evaluations,
    iso_time_ns,
)
from ragtriage.logs.formats.spans import Note, Span


def span_from_phoenix(obj: dict[str, Any], source: str, line_no: int) -> Span:
    """One Phoenix span.

    Raises:
        SpanFormatError: no trace or span id, or a time that is not ISO 8601.
    """
    context = obj.get("context") or {}
    span_id, trace_id = context.get("span_id"), context.get("trace_id")
    if not span_id or not trace_id:
        raise SpanFormatError(
            "span without context.trace_id / context.span_id", "export spans with their context", span_id
        )
    attrs = dict_attributes(obj.get("attributes"))
    events_as_evaluations(obj.get("events"), attrs)
    kind = str(obj.get("span_kind") or "").upper()
    return Span(
        trace_id=str(trace_id).lower(),
        span_id=str(span_id).lower(),
        parent_id=str(obj["parent_id"]).lower() if obj.get("parent_id") else None,
        name=str(obj.get("name") or ""),
        kind="" if kind == "UNKNOWN" else kind,
        start_ns=iso_time_ns(obj.get("start_time"), "start_time", str(span_id), "Phoenix"),
        end_ns=iso_time_ns(obj.get("end_time"), "end_time", str(span_id), "Phoenix"),
        attributes=attrs,
        source=source,
        line_no=line_no,
        status="ERROR" if obj.get("status_code") == "ERROR" else None,
    )


def note_from_phoenix(obj: dict[str, Any], source: str, line_no: int) -> Note | None:
    """A span or trace annotation as a `Note`; None for a document annotation."""
    if "document_position" in obj:
        return None
    result = obj.get("result") or {}
    score = result.get("score")
    return Note(
        trace_id=str(obj["trace_id"]).lower() if obj.get("trace_id") else None,
        span_id=str(obj["span_id"]).lower() if obj.get("span_id") else None,
        name=str(obj.get("name")),
        label=None if result.get("label") is None else str(result["label"]),
        score=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
        explanation=result.get("explanation"),
        annotator_kind=obj.get("annotator_kind"),
        source=source,
        line_no=line_no,
    )
