"""Real producers of trace exports for tests and the OTLP fixture.

OTLP files are made the way production makes them: spans recorded with the real
`opentelemetry-sdk` (OpenInference attribute names from `openinference-semantic-conventions`),
encoded by the OTLP exporter's own encoder (`opentelemetry-exporter-otlp-proto-common`) into an
`ExportTraceServiceRequest`, then written as JSON either with protobuf's own JSON mapping (ids in
base64, 64-bit integers as strings) or in the Collector file exporter's form (ids in hex).
Phoenix and Langfuse shapes are built from the same finished spans, field by field as their REST
APIs define them.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from google.protobuf.json_format import MessageToDict
from openinference.semconv.trace import (
    DocumentAttributes,
    OpenInferenceSpanKindValues,
    RerankerAttributes,
    SpanAttributes,
)
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, Tracer, set_span_in_context

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
DOCS = SpanAttributes.RETRIEVAL_DOCUMENTS


class SeededIds(IdGenerator):
    """Deterministic trace and span ids (same input, same file)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


def make_tracer(seed: int = 7, service_version: str | None = None) -> tuple[Tracer, InMemorySpanExporter]:
    """A tracer whose finished spans land in the returned in-memory exporter."""
    # A fixed instance id: the SDK draws a random one, and the fixture must not change per run.
    attrs: dict[str, Any] = {"service.name": "rag-service", "service.instance.id": "rag-service-1"}
    if service_version:
        attrs["service.version"] = service_version
    provider = TracerProvider(resource=Resource.create(attrs), id_generator=SeededIds(seed))
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("ragtriage-tests", "1.0"), exporter


def ns_of(moment: str | datetime) -> int:
    """An ISO 8601 time (a naive one is UTC) as Unix nanoseconds, to the microsecond."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(round(moment.timestamp() * 1e6)) * 1000


def stage_items(stage: Any) -> list[tuple[str, float | None]]:
    """A logged stage list as `(chunk_id, score or None)` pairs."""
    out = []
    for item in stage or ():
        if isinstance(item, str):
            out.append((item, None))
        else:
            out.append((str(item.get("chunk_id", item.get("id"))), item.get("score")))
    return out


def _doc_attrs(prefix: str, docs: list[tuple[str, float | None]], *, with_ids: bool = True) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for i, (chunk_id, score) in enumerate(docs):
        base = f"{prefix}.{i}."
        if with_ids:
            attrs[base + DocumentAttributes.DOCUMENT_ID] = chunk_id
            if score is not None:
                attrs[base + DocumentAttributes.DOCUMENT_SCORE] = float(score)
        else:  # LangChain: no id, no score; the id only inside document.metadata
            attrs[base + DocumentAttributes.DOCUMENT_METADATA] = json.dumps(
                {"chunk_id": chunk_id, "source": "kb"}
            )
        attrs[base + DocumentAttributes.DOCUMENT_CONTENT] = f"content of {chunk_id}"
    return attrs


def record_request(
    tracer: Tracer,
    request: dict[str, Any],
    *,
    feedback_as: str = "annotation",
    retriever_names: Sequence[str] = ("BM25Retriever", "VectorIndexRetriever"),
    langchain_documents: bool = False,
    extra_root_attributes: dict[str, Any] | None = None,
) -> None:
    """Record one request (a schema-v1 dict) as an OpenInference trace.

    Spans: root CHAIN `query` (input/output, session, user, metadata with `request_id`,
    `pipeline_version`, `kb`, `citations`, `config_hash`, `rewrite` and the rest), a `rewrite`
    CHAIN, one RETRIEVER per logged route, a RERANKER with `top_k` = the final context's size,
    and an LLM `generate`. Feedback (`rating`) becomes a root annotation (`feedback_as=
    "annotation"`) or an EVALUATOR span in a new trace linked to the root (`"evaluator"`);
    `escalated` an `escalation` annotation.
    """
    start = ns_of(request["ts"])
    latency_ns = int(float(request.get("latency_ms") or 1000) * 1e6)
    stages = request.get("stages") or {}
    metadata = {"request_id": request["request_id"]}
    for key in ("pipeline_version", "kb", "citations", "config_hash", "rewrite", "fixture"):
        if request.get(key) is not None:
            metadata[key] = request[key]
    feedback = request.get("feedback") or {}
    root_attrs: dict[str, Any] = {
        KIND: OpenInferenceSpanKindValues.CHAIN.value,
        SpanAttributes.INPUT_VALUE: request["raw_query"],
        SpanAttributes.METADATA: json.dumps(metadata, ensure_ascii=False),
    }
    if request.get("answer") is not None:
        root_attrs[SpanAttributes.OUTPUT_VALUE] = request["answer"]
    if request.get("session"):
        root_attrs[SpanAttributes.SESSION_ID] = request["session"]
    if request.get("user"):
        root_attrs[SpanAttributes.USER_ID] = request["user"]
    annotations: list[dict[str, Any]] = []
    if feedback.get("rating") is not None:
        annotations.append(
            {"name": "user_feedback", "label": str(feedback["rating"]), "annotator_kind": "HUMAN"}
        )
    if feedback.get("escalated"):
        annotations.append({"name": "escalation", "label": "true", "annotator_kind": "HUMAN"})
    if feedback_as == "annotation":
        for i, note in enumerate(annotations):
            for key, value in note.items():
                root_attrs[f"annotations.{i}.annotation.{key}"] = value
    root_attrs.update(extra_root_attributes or {})
    root = tracer.start_span("query", start_time=start, attributes=root_attrs)
    ctx = set_span_in_context(root)
    step = max(latency_ns // 10, 1000)
    at = start + step // 10
    rewrite = request.get("rewrite") or {}
    if rewrite.get("rewritten_query"):
        span = tracer.start_span(
            "rewrite",
            context=ctx,
            start_time=at,
            attributes={
                KIND: OpenInferenceSpanKindValues.CHAIN.value,
                SpanAttributes.INPUT_VALUE: request["raw_query"],
                SpanAttributes.OUTPUT_VALUE: rewrite["rewritten_query"],
            },
        )
        span.end(end_time=at + step // 2)
        at += step
    for name, stage in zip(retriever_names, ("bm25", "dense"), strict=False):
        if stages.get(stage) is None:
            continue
        attrs = {
            KIND: OpenInferenceSpanKindValues.RETRIEVER.value,
            SpanAttributes.INPUT_VALUE: request["raw_query"],
            **_doc_attrs(DOCS, stage_items(stages[stage]), with_ids=not langchain_documents),
        }
        span = tracer.start_span(name, context=ctx, start_time=at, attributes=attrs)
        span.end(end_time=at + step)
        at += step
    if stages.get("reranked") is not None:
        attrs = {
            KIND: OpenInferenceSpanKindValues.RERANKER.value,
            RerankerAttributes.RERANKER_QUERY: request["raw_query"],
            RerankerAttributes.RERANKER_MODEL_NAME: "features-only",
            **_doc_attrs(RerankerAttributes.RERANKER_INPUT_DOCUMENTS, stage_items(stages.get("fused"))),
            **_doc_attrs(RerankerAttributes.RERANKER_OUTPUT_DOCUMENTS, stage_items(stages.get("reranked"))),
        }
        if stages.get("final_context") is not None:
            attrs[RerankerAttributes.RERANKER_TOP_K] = len(stages["final_context"])
        span = tracer.start_span("rerank", context=ctx, start_time=at, attributes=attrs)
        span.end(end_time=at + step)
        at += step
    span = tracer.start_span(
        "generate",
        context=ctx,
        start_time=at,
        attributes={KIND: OpenInferenceSpanKindValues.LLM.value, "llm.model_name": "qwen-test"},
    )
    span.end(end_time=at + step)
    root.end(end_time=start + latency_ns)
    if feedback_as == "evaluator" and annotations:
        link = Link(root.get_span_context())
        attrs = {KIND: OpenInferenceSpanKindValues.EVALUATOR.value}
        for i, note in enumerate(annotations):
            for key, value in note.items():
                attrs[f"annotations.{i}.annotation.{key}"] = value
        later = start + latency_ns + 60_000_000_000
        span = tracer.start_span("user feedback", start_time=later, attributes=attrs, links=[link])
        span.end(end_time=later + 1_000_000)


def protobuf_dict(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The OTLP exporter's `ExportTraceServiceRequest` in protobuf's JSON mapping (base64 ids,
    64-bit integers as strings, enum names)."""
    return MessageToDict(encode_spans(spans))


def _hex(value: str) -> str:
    return base64.b64decode(value).hex()


def collector_dict(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The same request as the Collector's file exporter writes it: OTLP/JSON, ids in hex."""
    message = protobuf_dict(spans)
    for resource_spans in message.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = _hex(span[key])
                for link in span.get("links", ()):
                    link["traceId"], link["spanId"] = _hex(link["traceId"]), _hex(link["spanId"])
    return message


def otlp_lines(spans: Sequence[ReadableSpan], *, per_line: int = 5, ids: str = "hex") -> str:
    """Collector file-exporter JSONL: one `ExportTraceServiceRequest` per line, `per_line` spans
    each (so a trace's spans are split across lines)."""
    encode = collector_dict if ids == "hex" else protobuf_dict
    lines = [
        json.dumps(encode(spans[i : i + per_line]), ensure_ascii=False, separators=(",", ":"))
        for i in range(0, len(spans), per_line)
    ]
    return "\n".join(lines) + "\n"


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat()


def _flatten_phoenix(attributes: dict[str, Any]) -> dict[str, Any]:
    """Phoenix loads JSON-string attributes (`metadata`, `document.metadata`) and flattens them."""
    flat: dict[str, Any] = {}

    def put(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                put(f"{prefix}.{k}", v)
        elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
            for i, v in enumerate(value):
                put(f"{prefix}.{i}", v)
        else:
            flat[prefix] = value

    for key, value in attributes.items():
        if key.endswith("metadata") and isinstance(value, str):
            put(key, json.loads(value))
        else:
            flat[key] = list(value) if isinstance(value, tuple) else value
    return flat


def phoenix_page(spans: Iterable[ReadableSpan]) -> dict[str, Any]:
    """A `GET /v1/projects/{id}/spans` page: Phoenix's own span shape, `openinference.span.kind`
    moved to `span_kind`, attributes flattened, metadata flattened too."""
    data = []
    for span in spans:
        attrs = _flatten_phoenix(dict(span.attributes or {}))
        kind = attrs.pop(KIND, "UNKNOWN")
        ctx = span.get_span_context()
        data.append(
            {
                "id": f"U3Bhbjo{len(data)}",
                "name": span.name,
                "context": {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")},
                "span_kind": kind,
                "parent_id": format(span.parent.span_id, "016x") if span.parent else None,
                "start_time": _iso(span.start_time),
                "end_time": _iso(span.end_time),
                "status_code": "UNSET",
                "status_message": "",
                "attributes": attrs,
                "events": [],
            }
        )
    return {"data": data, "next_cursor": None}


def phoenix_annotations(spans: Iterable[ReadableSpan]) -> tuple[list[ReadableSpan], dict[str, Any]]:
    """Move root-span annotations into a `span_annotations` page (as Phoenix serves annotations
    logged through its API); returns the spans without them and the page. EVALUATOR carrier
    spans become annotations of the span they link to."""
    kept: list[ReadableSpan] = []
    notes: list[dict[str, Any]] = []
    for span in spans:
        attrs = dict(span.attributes or {})
        found: dict[str, dict[str, Any]] = {}
        for key, value in attrs.items():
            if key.startswith("annotations."):
                index, _, field = key[len("annotations.") :].partition(".annotation.")
                found.setdefault(index, {})[field] = value
        target = span.get_span_context().span_id
        if attrs.get(KIND) == "EVALUATOR" and span.links:
            target = span.links[0].context.span_id
        for note in found.values():
            notes.append(
                {
                    "id": f"U3BhbkFubm90YXRpb246{len(notes)}",
                    "span_id": format(target, "016x"),
                    "name": note["name"],
                    "annotator_kind": note.get("annotator_kind", "HUMAN"),
                    "result": {"label": note.get("label"), "score": note.get("score"), "explanation": None},
                    "metadata": {},
                    "identifier": "",
                    "source": "API",
                    "user_id": None,
                    "created_at": "2026-11-05T00:00:00+00:00",
                    "updated_at": "2026-11-05T00:00:00+00:00",
                }
            )
        if attrs.get(KIND) == "EVALUATOR":
            continue
        if found:
            span = _without(span, [k for k in attrs if k.startswith("annotations.")])
        kept.append(span)
    return kept, {"data": notes, "next_cursor": None}


def _without(span: ReadableSpan, keys: list[str]) -> ReadableSpan:
    attrs = {k: v for k, v in (span.attributes or {}).items() if k not in keys}
    return ReadableSpan(
        name=span.name,
        context=span.get_span_context(),
        parent=span.parent,
        resource=span.resource,
        attributes=attrs,
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _phoenix_any_value(value: Any) -> dict[str, Any]:
    """Phoenix's `_to_any_value` (routers/v1/spans.py): snake_case members, lists as array_value."""
    if isinstance(value, bool):
        return {"bool_value": value}
    if isinstance(value, int):
        return {"int_value": value}
    if isinstance(value, float):
        return {"double_value": value}
    if isinstance(value, (list, tuple)):
        return {"array_value": {"values": [_phoenix_any_value(v) for v in value]}}
    return {"string_value": str(value)}


def phoenix_otlp_page(spans: Iterable[ReadableSpan]) -> dict[str, Any]:
    """A `GET /v1/projects/{id}/spans/otlpv1` page: OTLP spans with snake_case keys, hex ids,
    integer nanoseconds, and the attributes as Phoenix stores them (JSON-string metadata loaded
    and flattened)."""
    data = []
    for span in spans:
        ctx = span.get_span_context()
        attrs = _flatten_phoenix(dict(span.attributes or {}))
        data.append(
            {
                "trace_id": format(ctx.trace_id, "032x"),
                "span_id": format(ctx.span_id, "016x"),
                "parent_span_id": format(span.parent.span_id, "016x") if span.parent else None,
                "name": span.name,
                "start_time_unix_nano": span.start_time,
                "end_time_unix_nano": span.end_time,
                "attributes": [{"key": k, "value": _phoenix_any_value(v)} for k, v in attrs.items()],
                "events": None,
                "status": {"code": 0, "message": None},
                "kind": "SPAN_KIND_INTERNAL",
            }
        )
    return {"data": data, "next_cursor": None}
