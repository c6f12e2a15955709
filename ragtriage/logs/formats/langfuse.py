"""Langfuse exports into `Span`s and `Note`s: observations, traces and scores.

Shapes (langfuse `fern/apis/server/definition/commons.yml`, `observations-v2.yml`): API pages
`{"data": [...], "meta": {...}}` or the UI's JSONL batch export, one object per line.
- observation: `id, traceId, type, name, startTime, endTime, input, output, metadata, level,
  parentObservationId, …`; `type` RETRIEVER is a route, GENERATION an LLM call; Langfuse has no
  RERANKER type, so `[logs.otel] stage_names` maps observation names to stages. An observation
  that came in over OpenTelemetry keeps its raw attributes in `metadata.attributes`, read as the
  span's own OpenInference attributes;
- trace: `id, timestamp, name, input, output, sessionId, userId, version, release, metadata,
  tags`: the request's root (query, answer, session, user; `version` is the pipeline version);
- score: `traceId, observationId, name, value, stringValue, dataType (NUMERIC, BOOLEAN,
  CATEGORICAL), source, comment`: feedback on the trace.
Input and output may be JSON text (API v2 without `parseIoAsJson`); they are parsed when they are.
"""

from __future__ import annotations

from typing import Any

import orjson

from ragtriage.config.settings import OtelSettings
from ragtriage.logs.formats.otlp import SpanFormatError, iso_time_ns
from ragtriage.logs.formats.spans import Note, Span, group_documents, openinference_kind

_TYPE_KIND = {
    "RETRIEVER": "RETRIEVER",
    "GENERATION": "LLM",
    "EVALUATOR": "EVALUATOR",
    "EMBEDDING": "EMBEDDING",
    "AGENT": "AGENT",
    "TOOL": "TOOL",
    "CHAIN": "CHAIN",
    "GUARDRAIL": "GUARDRAIL",
}
_STAGE_KIND = {"reranked": "RERANKER", "route": "RETRIEVER"}
_ID_KEYS = ("id", "chunk_id", "doc_id", "document_id", "node_id")
#: Keys of a document object that hold its text (LangChain's `page_content`, LlamaIndex's `text`).
_CONTENT_KEYS = ("page_content", "text", "content")
_SOURCE_KIND = {"ANNOTATION": "HUMAN", "EVAL": "LLM", "API": "CODE"}


def _json(value: Any) -> Any:
    """A JSON-text input/output parsed; anything else as is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _documents(value: Any) -> list[Any] | None:
    value = _json(value)
    if isinstance(value, dict):
        value = next(
            (value[k] for k in ("documents", "nodes", "results") if isinstance(value.get(k), list)), None
        )
    return value if isinstance(value, list) else None


def _put_documents(attrs: dict[str, Any], prefix: str, documents: list[Any]) -> None:
    for i, doc in enumerate(documents):
        base = f"{prefix}.{i}.document"
        if isinstance(doc, (str, int)):
            attrs[f"{base}.id"] = str(doc)
            continue
        if not isinstance(doc, dict):
            continue
        doc_id = next((doc[k] for k in _ID_KEYS if doc.get(k) not in (None, "")), None)
        if doc_id is not None:
            attrs[f"{base}.id"] = str(doc_id)
        if isinstance(doc.get("score"), (int, float)):
            attrs[f"{base}.score"] = doc["score"]
        if isinstance(doc.get("metadata"), dict):
            attrs[f"{base}.metadata"] = orjson.dumps(doc["metadata"]).decode()
        text = next((doc[k] for k in _CONTENT_KEYS if isinstance(doc.get(k), str)), None)
        if text is not None:
            attrs[f"{base}.content"] = text  # kept as its fingerprint (`group_documents`)


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(_flat(value, name))
        elif value is not None:
            flat[name] = value
    return flat


def span_from_observation(obj: dict[str, Any], otel: OtelSettings, source: str, line_no: int) -> Span:
    """One observation.

    Raises:
        SpanFormatError: no `id` or `traceId`, or a time that is not ISO 8601.
    """
    obs_id, trace_id = obj.get("id"), obj.get("traceId")
    if not obs_id or not trace_id:
        raise SpanFormatError(
            "observation without id or traceId", "export observations with their trace", obs_id
        )
    name = str(obj.get("name") or "")
    metadata = _json(obj.get("metadata"))
    raw = metadata.get("attributes") if isinstance(metadata, dict) else None
    attrs: dict[str, Any] = _flat(raw) if isinstance(raw, dict) else {}
    kind = openinference_kind(attrs)
    if not kind:
        kind = _TYPE_KIND.get(str(obj.get("type") or "").upper(), "")
        lower = name.lower()
        for stage, names in otel.stage_names.items():
            if any(n.lower() in lower for n in names if n) and stage in _STAGE_KIND:
                kind = _STAGE_KIND[stage]
    if not raw:
        _attributes_from_io(obj, kind, metadata, attrs)
    attrs = group_documents(attrs)
    start = iso_time_ns(obj.get("startTime"), "startTime", str(obs_id), "Langfuse")
    end = iso_time_ns(obj.get("endTime"), "endTime", str(obs_id), "Langfuse")
    return Span(
        trace_id=str(trace_id),
        span_id=str(obs_id),
        parent_id=str(obj["parentObservationId"]) if obj.get("parentObservationId") else f"trace:{trace_id}",
        name=name,
        kind=kind,
        start_ns=start,
        end_ns=end,
        attributes=attrs,
        source=source,
        line_no=line_no,
        status="ERROR" if obj.get("level") == "ERROR" else None,
    )


def _attributes_from_io(obj: dict[str, Any], kind: str, metadata: Any, attrs: dict[str, Any]) -> None:
    """OpenInference attributes from an SDK observation's input, output and metadata."""
    inp, out = _json(obj.get("input")), _json(obj.get("output"))
    if kind == "RERANKER":
        for prefix, value in (("reranker.input_documents", inp), ("reranker.output_documents", out)):
            documents = _documents(value)
            if documents is not None:
                _put_documents(attrs, prefix, documents)
        params = {**(obj.get("modelParameters") or {}), **(metadata if isinstance(metadata, dict) else {})}
        top_k = next((params[k] for k in ("top_k", "top_n") if params.get(k) is not None), None)
        if top_k is not None:
            attrs["reranker.top_k"] = int(top_k)
        if isinstance(inp, dict) and isinstance(inp.get("query"), str):
            attrs["input.value"] = inp["query"]
        return
    if inp is not None:
        attrs["input.value"] = _as_text(inp)
    if kind == "RETRIEVER":
        documents = _documents(out)
        if documents is not None:
            _put_documents(attrs, "retrieval.documents", documents)
    elif out is not None:
        attrs["output.value"] = _as_text(out)
    if isinstance(metadata, dict) and metadata:
        attrs["metadata"] = orjson.dumps(metadata).decode()


def span_from_trace(obj: dict[str, Any], source: str, line_no: int) -> Span:
    """A trace record as the request's root span (its observations hang below it)."""
    trace_id = str(obj["id"])
    attrs: dict[str, Any] = {}
    for key, value in (("input.value", obj.get("input")), ("output.value", obj.get("output"))):
        value = _json(value)
        if value is not None:
            attrs[key] = _as_text(value)
    if obj.get("sessionId"):
        attrs["session.id"] = str(obj["sessionId"])
    if obj.get("userId"):
        attrs["user.id"] = str(obj["userId"])
    metadata = _json(obj.get("metadata"))
    if isinstance(metadata, dict) and metadata:
        attrs["metadata"] = orjson.dumps(metadata).decode()
    if obj.get("tags"):
        attrs["tag.tags"] = [str(t) for t in obj["tags"]]
    start = iso_time_ns(obj.get("timestamp"), "timestamp", trace_id, "Langfuse")
    latency = obj.get("latency")
    end = start + int(latency * 1e9) if start is not None and isinstance(latency, (int, float)) else None
    resource = {"service.version": str(obj["version"])} if obj.get("version") else {}
    if obj.get("release"):
        resource["service.release"] = str(obj["release"])
    return Span(
        trace_id=trace_id,
        span_id=f"trace:{trace_id}",
        parent_id=None,
        name=str(obj.get("name") or "trace"),
        kind="CHAIN",
        start_ns=start,
        end_ns=end,
        attributes=attrs,
        source=source,
        line_no=line_no,
        resource=resource,
    )


def note_from_score(obj: dict[str, Any], source: str, line_no: int) -> Note | None:
    """A NUMERIC, BOOLEAN or CATEGORICAL score as trace feedback; None for other data types."""
    data_type = str(obj.get("dataType") or "NUMERIC").upper()
    value = obj.get("value")
    number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if data_type in ("NUMERIC", "BOOLEAN"):
        label = None  # BOOLEAN: 1 is True, 0 is False; a 0 is bad like any score at the bottom
    elif data_type == "CATEGORICAL":
        label = None if obj.get("stringValue") is None else str(obj["stringValue"])
    else:
        return None
    return Note(
        trace_id=str(obj["traceId"]),
        span_id=None,
        name=str(obj.get("name")),
        label=label,
        score=number,
        explanation=obj.get("comment"),
        annotator_kind=_SOURCE_KIND.get(str(obj.get("source")), obj.get("source")),
        source=source,
        line_no=line_no,
    )
