"""One trace's spans → one schema-v1 request body, or the reason it cannot be one.

The mapping (OpenInference conventions; every default is a `[logs.otel]` setting):
- the root span is the request: `input.value` the query, `output.value` the answer, `session.id`
  and `user.id` the session and user, its start the request time, its duration `latency_ms`;
- each RETRIEVER span is a route (named by `routes`, else lexical `bm25` / dense `dense`), its
  `retrieval.documents.N.document.{id,score}` the route's hits;
- the first RERANKER span's input documents are `stages.fused`, its output `stages.reranked`,
  and the output cut at `reranker.top_k` the final context;
- annotations and evaluations on the root span, on EVALUATOR spans linked to it, and notes
  (Phoenix annotations, Langfuse scores) give the feedback;
- span durations become `stage_latency_ms`; attributes the mapping does not read are kept under
  `otel.spans[].attributes`, unread root `metadata` keys under `otel.metadata`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec
import orjson

from ragtriage.config.settings import OtelSettings
from ragtriage.logs.formats.feedback import feedback_of, root_annotations
from ragtriage.logs.formats.spans import (
    KIND_EVALUATOR,
    KIND_RERANKER,
    KIND_RETRIEVER,
    QUERY_KEYS,
    Note,
    Span,
    nested,
    text_value,
)
from ragtriage.logs.formats.stages import Reject, documents, final_context, routes
from ragtriage.wording import plural, quoted

#: Root `metadata` keys that fill the v1 field of the same name.
V1_METADATA_FIELDS = ("kb", "citations", "rewrite", "config_hash", "confidence")
_ANSWER_KEYS = ("answer", "response", "output", "text", "result")


@dataclass(slots=True)
class Assembled:
    """A trace read as a request: its v1 body (UTF-8 JSON) and where its root span was read."""

    request_id: str
    body: bytes
    source: str
    line_no: int


@dataclass(slots=True)
class Rejected:
    """A trace (or record) that cannot be a request: the quarantine entry's parts."""

    kind: str
    message: str
    fix: str
    source: str
    line_no: int
    raw: bytes


_PACK = msgspec.msgpack.Encoder().encode
_UNPACK = msgspec.msgpack.Decoder(list).decode


def pack_result(item: Assembled | Rejected) -> bytes:
    """An assembled or rejected trace as MessagePack (a spill row's digest)."""
    if isinstance(item, Assembled):
        return _PACK((0, item.request_id, item.body, item.source, item.line_no))
    return _PACK((1, item.kind, item.message, item.fix, item.source, item.line_no, item.raw))


def unpack_result(data: bytes) -> Assembled | Rejected:
    """The item `pack_result` wrote."""
    values = _UNPACK(data)
    return Assembled(*values[1:]) if values[0] == 0 else Rejected(*values[1:])


def digest(trace_id: str, spans: list[Span], otel: OtelSettings) -> bytes:
    """`pack_result` of the request a trace of exactly `spans` and no notes comes to (the
    collector's `digest`)."""
    return pack_result(assemble(trace_id, spans, (), otel))


def assemble(
    trace_id: str, spans: Iterable[Span], notes: Iterable[Note], otel: OtelSettings
) -> Assembled | Rejected:
    """The request one trace describes (spans of any order; a span seen twice counts once)."""
    unique: dict[str, Span] = {}
    for span in spans:
        unique.setdefault(span.span_id, span)
    ordered = sorted(unique.values(), key=lambda s: (s.start_ns or 0, s.span_id))
    note_list = list(notes)
    try:
        return _assemble(trace_id, ordered, note_list, otel)
    except Reject as reject:
        where = reject.span or (ordered[0] if ordered else None)
        raw = orjson.dumps([orjson.loads(s.to_bytes()) for s in ordered])
        return Rejected(
            reject.kind,
            reject.message,
            reject.fix,
            where.source if where else "<trace>",
            where.line_no if where else 0,
            raw,
        )


def _assemble(trace_id: str, spans: list[Span], notes: list[Note], otel: OtelSettings) -> Assembled:
    ids = {s.span_id for s in spans}
    carriers = [s for s in spans if s.kind == KIND_EVALUATOR and s.links]
    carrier_ids = {s.span_id for s in carriers}
    roots = [
        s for s in spans if (s.parent_id is None or s.parent_id not in ids) and s.span_id not in carrier_ids
    ]
    if not roots:
        raise Reject(
            "no_root_span",
            f"trace {trace_id}: no root span among {plural(len(spans), 'span')} ({_names(spans)})",
            "export the whole trace (its root span may be in a file not given to this ingest)",
        )
    # The span without a parent id wins over an orphan whose parent was not exported.
    root = min(roots, key=lambda s: (s.parent_id is not None, s.start_ns or 0, s.span_id))
    attrs = root.attributes
    metadata = dict(nested(attrs, "metadata") or {})
    raw_tags = attrs.get("tag.tags")
    tags: list[Any] = raw_tags if isinstance(raw_tags, list) else []
    consumed_metadata: set[str] = set()

    def lookup(sources: list[str]) -> Any:
        for path in sources:
            value = _resolve(path, root, metadata, tags, consumed_metadata)
            if value not in (None, ""):
                return value
        return None

    request_id = lookup(otel.request_id_from) or trace_id
    retrievers = [s for s in spans if s.kind == KIND_RETRIEVER]
    if not retrievers:
        raise Reject(
            "no_retriever",
            f"trace {trace_id} (root span {root.span_id} {quoted(root.name)}): no RETRIEVER span, so no "
            f"route to triage ({_names(spans)})",
            "instrument the retrieval step (openinference.span.kind = RETRIEVER)",
            root,
        )
    raw_query = text_value(attrs, "input", QUERY_KEYS) or text_value(
        retrievers[0].attributes, "input", QUERY_KEYS
    )
    if raw_query is None:
        raise Reject(
            "missing_query",
            f"trace {trace_id}: root span {root.span_id} {quoted(root.name)} has no input.value and the "
            "retriever none either",
            "record the user's query as input.value of the root span",
            root,
        )
    body: dict[str, Any] = {"schema_version": 1, "request_id": str(request_id), "raw_query": raw_query}
    if root.start_ns is not None:
        body["ts"] = _iso(root.start_ns)
    for field, key in (("session", "session.id"), ("user", "user.id")):
        value = attrs.get(key)
        if value is None:
            value = next((s.attributes[key] for s in spans if key in s.attributes), None)
        if value is not None:
            body[field] = str(value)
    answer = text_value(attrs, "output", _ANSWER_KEYS)
    if answer is not None:
        body["answer"] = answer
    for key in V1_METADATA_FIELDS:
        if key in metadata:
            body[key] = metadata[key]
            consumed_metadata.add(key)
    version = lookup(otel.pipeline_version_from)
    if version is not None:
        body["pipeline_version"] = str(version)

    latencies: dict[str, float] = {}
    stages: dict[str, Any] = {}
    route_list = routes(retrievers, otel, latencies)
    for kind in ("bm25", "dense"):
        first = next((r for r in route_list if r["kind"] == kind), None)
        if first is not None:
            stages[kind] = first["hits"]
            first["stage"] = kind
    rerankers = [s for s in spans if s.kind == KIND_RERANKER]
    reranker = rerankers[0] if rerankers else None
    if reranker is not None:
        stages["fused"] = documents(reranker, "reranker.input_documents", otel)
        stages["reranked"] = documents(reranker, "reranker.output_documents", otel)
        if (duration := reranker.duration_ms) is not None:
            latencies["rerank"] = duration
    final = final_context(spans, reranker, stages, metadata, consumed_metadata, otel)
    if final is not None:
        stages["final_context"] = final
    body["stages"] = stages
    body["routes"] = [{k: v for k, v in r.items() if k != "hits" or "stage" not in r} for r in route_list]
    rewrite = _rewrite(spans, body, otel, latencies)
    if rewrite:
        body["rewrite"] = rewrite
    annotations = root_annotations(root, carriers, notes)
    feedback = feedback_of(annotations, otel)
    if feedback:
        body["feedback"] = feedback
    if (duration := root.duration_ms) is not None:
        body["latency_ms"] = duration
    if latencies:
        body["stage_latency_ms"] = latencies
    body["otel"] = _kept(trace_id, root, spans, metadata, consumed_metadata, annotations)
    return Assembled(
        str(request_id), orjson.dumps(body, option=orjson.OPT_SORT_KEYS), root.source, root.line_no
    )


def _names(spans: list[Span]) -> str:
    shown = ", ".join(f"{s.span_id} {quoted(s.name)}" for s in spans[:4])
    return shown + (f", … {len(spans) - 4} more" if len(spans) > 4 else "")


def _iso(ns: int) -> str:
    seconds, rest = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest // 1000:06d}Z"


def _resolve(path: str, root: Span, metadata: dict[str, Any], tags: list[Any], consumed: set[str]) -> Any:
    if path.startswith("metadata."):
        key = path[len("metadata.") :]
        if key in metadata:
            consumed.add(key)
            return metadata[key]
        return None
    if path.startswith("resource."):
        return root.resource.get(path[len("resource.") :])
    if path.startswith("tag:"):
        prefix = path[len("tag:") :]
        return next((str(t)[len(prefix) :] for t in tags if str(t).startswith(prefix)), None)
    return root.attributes.get(path)


def _rewrite(
    spans: list[Span], body: dict[str, Any], otel: OtelSettings, latencies: dict[str, float]
) -> dict[str, Any]:
    rewrite = dict(body.pop("rewrite", None) or {})
    markers = [m.lower() for m in otel.rewrite_spans if m]
    for span in spans:
        if span.kind == KIND_RETRIEVER or not any(m in span.name.lower() for m in markers):
            continue
        text = text_value(span.attributes, "output", ("rewritten_query", "query", "output", "text"))
        if text is not None:
            rewrite.setdefault("rewritten_query", text)
        if (duration := span.duration_ms) is not None:
            latencies["rewrite"] = duration
        break
    return rewrite


#: Attributes the mapping reads, or bulky copies of what the knowledge base holds; not kept.
_READ_PREFIXES = (
    "openinference.span.kind",
    "input.",
    "output.",
    "session.id",
    "user.id",
    "metadata",
    "retrieval.documents",
    "reranker.input_documents",
    "reranker.output_documents",
    "annotations.",
    "evaluations.",
    "trace.annotations.",
    "trace.evaluations.",
    "embedding.embeddings.",
    "llm.input_messages.",
    "llm.output_messages.",
    "llm.prompts",
)


#: Attribute key → not read by the mapping (kept). The same keys recur in every trace, so each is
#: tested once; bounded by `_UNREAD_MAX`.
_UNREAD: dict[str, bool] = {}
_UNREAD_MAX = 100_000


def _kept(
    trace_id: str,
    root: Span,
    spans: list[Span],
    metadata: dict[str, Any],
    consumed: set[str],
    annotations: list[dict[str, Any]],
) -> dict[str, Any]:
    start = root.start_ns
    kept_spans = []
    unread = _UNREAD
    for span in spans:
        entry: dict[str, Any] = {"span_id": span.span_id, "name": span.name}
        if span.kind:
            entry["kind"] = span.kind
        if span.parent_id:
            entry["parent_id"] = span.parent_id
        if start is not None and span.start_ns is not None:
            entry["start_offset_ms"] = round((span.start_ns - start) / 1e6, 3)
        if (duration := span.duration_ms) is not None:
            entry["duration_ms"] = duration
        if span.status:
            entry["status"] = span.status
        unknown = {}
        for key, value in span.attributes.items():
            keep = unread.get(key)
            if keep is None:
                keep = not key.startswith(_READ_PREFIXES)
                if len(unread) < _UNREAD_MAX:
                    unread[key] = keep
            if keep:
                unknown[key] = value
        if unknown:
            entry["attributes"] = unknown
        kept_spans.append(entry)
    kept: dict[str, Any] = {"trace_id": trace_id, "root_span_id": root.span_id, "spans": kept_spans}
    rest = {k: v for k, v in metadata.items() if k not in consumed}
    if rest:
        kept["metadata"] = rest
    if root.resource:
        kept["resource"] = root.resource
    if annotations:
        kept["annotations"] = annotations
    return kept
