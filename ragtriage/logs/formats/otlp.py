"""OTLP/JSON traces (OpenTelemetry Collector file exporter, OTLP HTTP/JSON bodies, Phoenix
`/spans/otlpv1` pages) into `Span`s.

Accepted, as the OTLP/JSON encoding and protobuf's own JSON mapping allow: lowerCamelCase or
snake_case keys; trace and span ids as lowercase hex or base64 (protobuf's mapping of `bytes`,
opentelemetry-proto#500); 64-bit integers as numbers or decimal strings; enums as integers or
names. An `ExportTraceServiceRequest` is `resourceSpans[] → scopeSpans[] → spans[]`.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime, timedelta, timezone
from typing import Any

from ragtriage.logs.formats.spans import Span, group_documents, openinference_kind
from ragtriage.wording import quoted

_HEX = frozenset("0123456789abcdefABCDEF")
KIND_KEY = "openinference.span.kind"
_STATUS_ERROR = (2, "2", "STATUS_CODE_ERROR")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class SpanFormatError(ValueError):
    """A record that is not a readable span: what is wrong (`message`) and how to fix it."""

    def __init__(self, message: str, fix: str, span_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.span_id = span_id


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def normalize_id(value: Any, size: int, field: str) -> str:
    """A trace (`size` 16) or span (`size` 8) id as lowercase hex, from hex or base64 text.

    Raises:
        SpanFormatError: neither hex of `2 * size` digits nor base64 of `size` bytes.
    """
    if isinstance(value, str):
        if len(value) == 2 * size and _HEX.issuperset(value):
            return value.lower()
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == size:
            return raw.hex()
    raise SpanFormatError(
        f"{field} {quoted(value, limit=40)} is neither {2 * size} hex digits nor base64 of {size} bytes",
        "export ids as OTLP/JSON hex (or protobuf JSON base64)",
    )


def _int(value: Any, field: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise SpanFormatError(f"{field} is a boolean, not an integer", "export nanoseconds as integers")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise SpanFormatError(
            f"{field} {quoted(value, limit=40)} is not an integer", "export nanoseconds as integers"
        ) from None


def iso_time_ns(value: Any, field: str, span_id: str, exporter: str) -> int | None:
    """An ISO 8601 time (UTC when it names no zone) as nanoseconds since the epoch, at microsecond
    precision; None for a missing or empty value.

    Raises:
        SpanFormatError: not ISO 8601 (the fix names `exporter`, the tool that wrote the file).
    """
    if value in (None, ""):
        return None
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        raise SpanFormatError(
            f"{field} {quoted(value, limit=40)} is not an ISO 8601 time",
            f"export times as {exporter} does",
            span_id,
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def any_value(value: Any) -> Any:
    """An OTLP `AnyValue` (`{"stringValue": …}` and the other members) as a plain value;
    a `kvlistValue` becomes a dict, an `arrayValue` a list."""
    if not isinstance(value, dict):
        return value
    for camel, snake in (("stringValue", "string_value"), ("boolValue", "bool_value")):
        if camel in value or snake in value:
            return _get(value, camel, snake)
    if "intValue" in value or "int_value" in value:
        number = _get(value, "intValue", "int_value")
        return int(number) if isinstance(number, str) else number
    if "doubleValue" in value or "double_value" in value:
        number = _get(value, "doubleValue", "double_value")
        return float(number) if isinstance(number, str) else number
    if "arrayValue" in value or "array_value" in value:
        inner = _get(value, "arrayValue", "array_value") or {}
        return [any_value(v) for v in inner.get("values") or ()]
    if "kvlistValue" in value or "kvlist_value" in value:
        inner = _get(value, "kvlistValue", "kvlist_value") or {}
        return {kv.get("key"): any_value(kv.get("value")) for kv in inner.get("values") or ()}
    if "bytesValue" in value or "bytes_value" in value:
        return _get(value, "bytesValue", "bytes_value")
    return None


#: Attributes dropped on reading: copies of what the knowledge base or the model holds, which no
#: request needs and which would make up most of the bytes spilled and stored. (A document's
#: `document.content` is not dropped here: `group_documents` keeps its fingerprint.)
BULKY_SUFFIXES = (".embedding.vector", ".embedding.text")
BULKY_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "llm.prompts")


def attributes(kvs: Any) -> dict[str, Any]:
    """OTLP `KeyValue[]` as a flat dict; a `kvlistValue` is flattened below its key; `BULKY_*`
    attributes are left out."""
    flat: dict[str, Any] = {}
    for kv in kvs or ():
        key = kv.get("key")
        if not isinstance(key, str) or key.endswith(BULKY_SUFFIXES) or key.startswith(BULKY_PREFIXES):
            continue
        value = any_value(kv.get("value"))
        if isinstance(value, dict):
            flatten_into(flat, key, value)
        elif value is not None:
            flat[key] = value
    return group_documents(flat)


def dict_attributes(raw: Any) -> dict[str, Any]:
    """Attributes given as a flat JSON object (Phoenix, the OpenTelemetry SDK's `to_json`) without
    the bulky keys, documents grouped (`group_documents`); {} when `raw` is not an object."""
    items = raw.items() if isinstance(raw, dict) else ()
    return group_documents(
        {k: v for k, v in items if not (k.endswith(BULKY_SUFFIXES) or k.startswith(BULKY_PREFIXES))}
    )


def flatten_into(flat: dict[str, Any], prefix: str, tree: dict[str, Any]) -> None:
    """Add the leaves of a nested `tree` (a `kvlistValue`) to `flat` under dotted keys
    `prefix.key.subkey`; None leaves are left out. Both OTLP readers flatten with it."""
    for key, value in tree.items():
        if isinstance(value, dict):
            flatten_into(flat, f"{prefix}.{key}", value)
        elif value is not None:
            flat[f"{prefix}.{key}"] = value


def span_from_otlp(
    span: dict[str, Any], resource: dict[str, Any], source: str, line_no: int, *, ids_only: bool = False
) -> Span:
    """One OTLP span; with `ids_only`, of its attributes only the span kind (what grouping needs).

    Raises:
        SpanFormatError: a missing or malformed id or time.
    """
    if not isinstance(span, dict):
        raise SpanFormatError("a span is not a JSON object", "export spans as OTLP/JSON objects")
    raw_span_id = _get(span, "spanId", "span_id")
    span_id = normalize_id(raw_span_id, 8, "spanId")
    try:
        trace_id = normalize_id(_get(span, "traceId", "trace_id"), 16, "traceId")
        parent = _get(span, "parentSpanId", "parent_span_id")
        parent_id = normalize_id(parent, 8, "parentSpanId") if parent else None
        start = _int(_get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano")
        end = _int(_get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano")
        links = []
        for link in span.get("links") or ():
            if isinstance(link, dict):
                links.append(
                    (
                        normalize_id(_get(link, "traceId", "trace_id"), 16, "links.traceId"),
                        normalize_id(_get(link, "spanId", "span_id"), 8, "links.spanId"),
                    )
                )
    except SpanFormatError as error:
        error.span_id = span_id
        raise
    if ids_only:
        kinds = [kv.get("value") for kv in span.get("attributes") or () if kv.get("key") == KIND_KEY]
        attrs = {KIND_KEY: any_value(kinds[0])} if kinds else {}
    else:
        attrs = attributes(span.get("attributes"))
        events_as_evaluations(span.get("events"), attrs)
    status = span.get("status") or {}
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=str(span.get("name") or ""),
        kind=openinference_kind(attrs),
        start_ns=start,
        end_ns=end,
        attributes=attrs,
        source=source,
        line_no=line_no,
        resource=resource,
        links=links,
        status="ERROR" if isinstance(status, dict) and status.get("code") in _STATUS_ERROR else None,
    )


#: `gen_ai.evaluation.result` event attribute → OpenInference evaluation field (spec/annotations.md).
_GEN_AI_EVALUATION = {
    "gen_ai.evaluation.name": "name",
    "gen_ai.evaluation.score.value": "score",
    "gen_ai.evaluation.score.label": "label",
    "gen_ai.evaluation.explanation": "explanation",
}


def events_as_evaluations(events: Any, attrs: dict[str, Any]) -> None:
    """Add each `gen_ai.evaluation.result` event as an `evaluations.N.evaluation.*` attribute
    (event attributes as OTLP `KeyValue[]` or, as Phoenix exports them, a flat dict)."""
    number = sum(1 for key in attrs if key.startswith("evaluations.") and key.endswith(".evaluation.name"))
    for event in events or ():
        if not isinstance(event, dict) or event.get("name") != "gen_ai.evaluation.result":
            continue
        raw = event.get("attributes")
        fields = raw if isinstance(raw, dict) else attributes(raw)
        if "gen_ai.evaluation.name" not in fields:
            continue
        for key, name in _GEN_AI_EVALUATION.items():
            if key in fields:
                attrs[f"evaluations.{number}.evaluation.{name}"] = fields[key]
        number += 1


def iter_export(
    obj: dict[str, Any], source: str, line_no: int, *, ids_only: bool = False
) -> list[Span | SpanFormatError]:
    """The spans of one `ExportTraceServiceRequest`, or of a page `{"data": [OTLP span, …]}`;
    a span that cannot be read is returned as its `SpanFormatError` (the others still are read)."""
    out: list[Span | SpanFormatError] = []
    if "resourceSpans" not in obj and "resource_spans" not in obj:
        for item in obj.get("data") or ():
            out.append(_one(item, {}, source, line_no, ids_only))
        return out
    for resource_spans in _get(obj, "resourceSpans", "resource_spans") or ():
        if not isinstance(resource_spans, dict):
            continue
        resource = {} if ids_only else attributes((resource_spans.get("resource") or {}).get("attributes"))
        for scope_spans in _get(resource_spans, "scopeSpans", "scope_spans") or ():
            if not isinstance(scope_spans, dict):
                continue
            for span in scope_spans.get("spans") or ():
                out.append(_one(span, resource, source, line_no, ids_only))
    return out


def _one(
    span: Any, resource: dict[str, Any], source: str, line_no: int, ids_only: bool
) -> Span | SpanFormatError:
    try:
        return span_from_otlp(span, resource, source, line_no, ids_only=ids_only)
    except SpanFormatError as error:
        return error
