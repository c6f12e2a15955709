"""The fast path for OTLP/JSON in camelCase (the Collector's file exporter, OTLP HTTP bodies,
protobuf's JSON mapping): msgspec decodes a line straight into typed structs in C, about twice
as fast as parsing to dicts and walking them. It yields exactly the `Span`s `otlp.iter_export`
does (a test compares them); anything it does not cover (snake_case keys, wrong types) returns
None and takes the dict path, which explains what is wrong.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

from ragtriage.logs.formats.otlp import (
    BULKY_PREFIXES,
    BULKY_SUFFIXES,
    SpanFormatError,
    events_as_evaluations,
    flatten_into,
    normalize_id,
)
from ragtriage.logs.formats.spans import (
    DOCUMENT_KEY_PREFIXES,
    DROPPED_DOCUMENT_FIELDS,
    Span,
    openinference_kind,
)


class _ArrayValue(msgspec.Struct, gc=False):
    values: list[_AnyValue] = []


class _KvList(msgspec.Struct, gc=False):
    values: list[_KeyValue] = []


class _AnyValue(msgspec.Struct, gc=False):
    stringValue: Union[str, None] = None
    intValue: Union[int, str, None] = None
    doubleValue: Union[float, str, None] = None
    boolValue: Union[bool, None] = None
    arrayValue: Union[_ArrayValue, None] = None
    kvlistValue: Union[_KvList, None] = None
    bytesValue: Union[str, None] = None


class _KeyValue(msgspec.Struct, gc=False):
    key: str
    value: Union[_AnyValue, None] = None


class _Link(msgspec.Struct, gc=False):
    traceId: str = ""
    spanId: str = ""


class _Status(msgspec.Struct, gc=False):
    code: Union[int, str] = 0


class _Event(msgspec.Struct, gc=False):
    name: str = ""
    attributes: list[_KeyValue] = []


class _Span(msgspec.Struct, gc=False):
    traceId: Union[str, None] = None
    spanId: Union[str, None] = None
    parentSpanId: str = ""
    name: str = ""
    startTimeUnixNano: Union[int, str, None] = None
    endTimeUnixNano: Union[int, str, None] = None
    attributes: list[_KeyValue] = []
    events: list[_Event] = []
    links: list[_Link] = []
    status: Union[_Status, None] = None


class _Resource(msgspec.Struct, gc=False):
    attributes: list[_KeyValue] = []


class _ScopeSpans(msgspec.Struct, gc=False):
    spans: list[_Span] = []


class _ResourceSpans(msgspec.Struct, gc=False):
    resource: Union[_Resource, None] = None
    scopeSpans: list[_ScopeSpans] = []


class _Export(msgspec.Struct, gc=False):
    resourceSpans: list[_ResourceSpans] = []


_DECODER = msgspec.json.Decoder(_Export)
_STATUS_ERROR = (2, "2", "STATUS_CODE_ERROR")


def _value(value: _AnyValue | None) -> Any:
    if value is None:
        return None
    if value.stringValue is not None:
        return value.stringValue
    if value.doubleValue is not None:
        return float(value.doubleValue)
    if value.intValue is not None:
        return int(value.intValue)
    if value.boolValue is not None:
        return value.boolValue
    if value.arrayValue is not None:
        return [_value(v) for v in value.arrayValue.values]
    if value.kvlistValue is not None:
        return {kv.key: _value(kv.value) for kv in value.kvlistValue.values}
    return value.bytesValue


_PLAIN, _DROP = object(), object()
#: Attribute key → `_PLAIN`, `_DROP` or `(list prefix, index, field)`. The same keys recur in every
#: span (`retrieval.documents.3.document.id`), so each is classified once; bounded by `_KEYS_MAX`.
_KEYS: dict[str, Any] = {}
_KEYS_MAX = 100_000


def _classify(key: str) -> Any:
    if key.startswith(DOCUMENT_KEY_PREFIXES):
        parts = key.split(".", 3)
        if len(parts) == 4 and parts[2].isdigit():
            if parts[3] in DROPPED_DOCUMENT_FIELDS:
                return _DROP
            return (f"{parts[0]}.{parts[1]}", int(parts[2]), parts[3])
    if key.endswith(BULKY_SUFFIXES) or key.startswith(BULKY_PREFIXES):
        return _DROP
    return _PLAIN


def _attributes(kvs: list[_KeyValue]) -> dict[str, Any]:
    """`otlp.attributes` for structs, documents grouped inline (`spans.group_documents`)."""
    flat: dict[str, Any] = {}
    lists: dict[str, dict[int, dict[str, Any]]] | None = None
    keys = _KEYS
    for kv in kvs:
        key = kv.key
        kind = keys.get(key)
        if kind is None:
            kind = _classify(key)
            if len(keys) < _KEYS_MAX:
                keys[key] = kind
        if kind is _DROP:
            continue
        value = kv.value
        if value is None:
            continue
        plain: Any = value.stringValue
        if plain is None:
            number = value.doubleValue
            plain = number if number.__class__ is float else _value(value)
        if kind is _PLAIN:
            if isinstance(plain, dict):
                flatten_into(flat, key, plain)
            elif plain is not None:
                flat[key] = plain
            continue
        prefix, index, field = kind
        if lists is None:
            lists = {}
        documents = lists.get(prefix)
        if documents is None:
            documents = lists[prefix] = {}
        document = documents.get(index)
        if document is None:
            document = documents[index] = {}
        document[field] = plain
    if lists:
        for prefix, items in lists.items():
            flat[prefix] = [items[i] for i in sorted(items)]
    return flat


def spans_from_json(raw: bytes, source: str, line_no: int) -> list[Span | SpanFormatError] | None:
    """The spans of one camelCase `ExportTraceServiceRequest`, or None when this path does not
    apply (the caller then parses the record as dicts).

    Raises:
        msgspec.DecodeError: `raw` is not valid JSON.
    """
    if b'"resourceSpans"' not in raw:
        return None
    try:
        export = _DECODER.decode(raw)
    except msgspec.ValidationError:
        return None
    out: list[Span | SpanFormatError] = []
    for resource_spans in export.resourceSpans:
        resource = _attributes(resource_spans.resource.attributes) if resource_spans.resource else {}
        for scope_spans in resource_spans.scopeSpans:
            for span in scope_spans.spans:
                try:
                    out.append(_span(span, resource, source, line_no))
                except (SpanFormatError, ValueError):
                    return None  # the dict path names the span and the field
    return out


def _span(span: _Span, resource: dict[str, Any], source: str, line_no: int) -> Span:
    attrs = _attributes(span.attributes)
    if span.events:
        events = [
            {"name": e.name, "attributes": _attributes(e.attributes)}
            for e in span.events
            if e.name == "gen_ai.evaluation.result"
        ]
        events_as_evaluations(events, attrs)
    start, end = span.startTimeUnixNano, span.endTimeUnixNano
    status = span.status
    return Span(
        trace_id=normalize_id(span.traceId, 16, "traceId"),
        span_id=normalize_id(span.spanId, 8, "spanId"),
        parent_id=normalize_id(span.parentSpanId, 8, "parentSpanId") if span.parentSpanId else None,
        name=span.name,
        kind=openinference_kind(attrs),
        start_ns=None if start in (None, "") else int(start),
        end_ns=None if end in (None, "") else int(end),
        attributes=attrs,
        source=source,
        line_no=line_no,
        resource=resource,
        links=[
            (normalize_id(link.traceId, 16, "links.traceId"), normalize_id(link.spanId, 8, "links.spanId"))
            for link in span.links
        ],
        status="ERROR" if status is not None and status.code in _STATUS_ERROR else None,
    )
