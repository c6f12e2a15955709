"""Stage lists from spans: a route per RETRIEVER span, documents as stage items, the final context."""

from __future__ import annotations

from typing import Any

from ragtriage.config.settings import OtelSettings
from ragtriage.logs.formats.spans import KIND_RERANKER, QUERY_KEYS, Span, nested, text_value
from ragtriage.wording import quoted


class Reject(Exception):
    """A trace that cannot be a request: quarantine kind, message, fix, and the span it names."""

    def __init__(self, kind: str, message: str, fix: str, span: Span | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.fix, self.span = kind, message, fix, span


def documents(span: Span, prefix: str, otel: OtelSettings) -> list[Any]:
    """The documents under `prefix` as stage items: `{chunk_id, score}`, or the id without a score.

    Runs for every document of every trace, so the common case (an id, a float score) is kept short.
    """
    documents = span.attributes.get(prefix)
    if not isinstance(documents, list):
        return []
    hits: list[Any] = []
    append = hits.append
    for position, doc in enumerate(documents):
        chunk_id = doc.get("document.id")
        score = doc.get("document.score")
        if chunk_id.__class__ is str and score.__class__ is float and chunk_id:
            append({"chunk_id": chunk_id, "score": score})  # the usual document
            continue
        if chunk_id is None or chunk_id == "":
            chunk_id = _id_from_metadata(span, prefix, position, doc, otel)
        elif chunk_id.__class__ is not str:
            chunk_id = str(chunk_id)
        if score.__class__ is float or score.__class__ is int:
            append({"chunk_id": chunk_id, "score": float(score)})
        elif score.__class__ is str and _is_number(score):
            append({"chunk_id": chunk_id, "score": float(score)})  # Langfuse keeps OTel attributes as text
        else:
            append(chunk_id)
    return hits


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _id_from_metadata(span: Span, prefix: str, position: int, doc: dict[str, Any], otel: OtelSettings) -> str:
    metadata = nested(doc, "document.metadata") or {}
    chunk_id = next((metadata[k] for k in otel.document_id_keys if metadata.get(k) not in (None, "")), None)
    if chunk_id is None:
        raise Reject(
            "missing_document_id",
            f"trace {span.trace_id}, span {span.span_id} {quoted(span.name)}: document {position} of "
            f"{prefix} has no document.id and no metadata key {' / '.join(otel.document_id_keys)}",
            "set [logs.otel] document_id_keys to the document.metadata key that holds the chunk id",
            span,
        )
    return str(chunk_id)


def routes(retrievers: list[Span], otel: OtelSettings, latencies: dict[str, float]) -> list[dict[str, Any]]:
    """One route per retriever span: name and kind from `[logs.otel]`, query, latency, hits."""
    routes: list[dict[str, Any]] = []
    taken: dict[str, int] = {}
    lexical = [k.lower() for k in otel.lexical_keywords]
    for span in retrievers:
        lower = span.name.lower()
        name = next(
            (
                route
                for route, names in otel.routes.items()
                if any(n.lower() == lower or n.lower() in lower for n in names)
            ),
            None,
        )
        if name is None:
            name = "bm25" if any(k in lower for k in lexical) else "dense"
        kind = "bm25" if any(k in name.lower() for k in lexical) else "dense"
        taken[name] = taken.get(name, 0) + 1
        if taken[name] > 1:
            name = f"{name}_{taken[name]}"
        route: dict[str, Any] = {"name": name, "kind": kind, "span_id": span.span_id, "span_name": span.name}
        query = text_value(span.attributes, "input", QUERY_KEYS)
        if query is not None:
            route["query"] = query
        if (duration := span.duration_ms) is not None:
            route["latency_ms"] = latencies[name] = duration
        route["hits"] = documents(span, "retrieval.documents", otel)
        routes.append(route)
    return routes


def final_context(
    spans: list[Span],
    reranker: Span | None,
    stages: dict[str, Any],
    metadata: dict[str, Any],
    consumed: set[str],
    otel: OtelSettings,
) -> list[Any] | None:
    """The final context by `[logs.otel] final_context`: the reranker's output cut at
    `reranker.top_k`, a chunk-id list in the root metadata, or a named span's documents; None
    when the rule finds nothing (the stage was not logged)."""
    rule = otel.final_context
    if rule == "reranker":
        if reranker is None:
            return None
        top_k = reranker.attributes.get("reranker.top_k")
        if isinstance(top_k, str) and top_k.isdigit():
            top_k = int(top_k)  # Langfuse keeps OTel attributes as text
        reranked: list[Any] = stages["reranked"]
        return reranked[: int(top_k)] if isinstance(top_k, (int, float)) and top_k >= 0 else reranked
    if rule.startswith("metadata."):
        key = rule[len("metadata.") :]
        value = metadata.get(key)
        if isinstance(value, list):
            consumed.add(key)
            return [str(v) for v in value]
        return None
    named = next((s for s in spans if s.name == rule), None)
    if named is None:
        return None
    prefix = "reranker.output_documents" if named.kind == KIND_RERANKER else "retrieval.documents"
    return documents(named, prefix, otel)
