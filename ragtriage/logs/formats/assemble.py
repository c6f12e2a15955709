"""One trace's spans → one schema-v1 request body, or the reason it cannot be one.

The mapping (OpenInference conventions; every default is a `[logs.otel]` setting):
- the root span is the request: `input.value` the query, `output.value` the answer, `session.id`
  and `user.id` the session and user, its start the request time, its duration `latency_ms`;
- a private twin span (`X._retrieve` under or beside `X.retrieve`) is the same step as its public
  span: its children are the public span's, and it is never a route of its own;
- a RETRIEVER span that parents RETRIEVER spans is a fusion: the outermost one's documents are
  `stages.fused`; but a retriever that wraps a single retriever (LangChain's
  ContextualCompressionRetriever over an EnsembleRetriever, or over one route) is a selection
  step, whose documents are `stages.reranked` and the final context. Each leaf RETRIEVER span is a route (named by
  `routes`; else lexical `bm25` by name, dense `dense` when it has an EMBEDDING child or no
  lexical name), its `retrieval.documents.N.document.{id,score}` the route's hits;
- a JSON `input.value` (LlamaIndex's QueryBundle `{"query_str": …}`, also one level down) gives
  its query text; the retrievers' query, when it differs from the root's, is the rewritten query;
- a root span that is a retriever has no answer (its output is its documents);
- the first RERANKER span's input documents are `stages.fused` when no fusion span gave them,
  its output `stages.reranked`, and the output cut at `reranker.top_k` the final context;
- annotations and evaluations on the root span, on EVALUATOR spans linked to it, and notes
  (Phoenix annotations, Langfuse scores) give the feedback (the linked EVALUATOR spans themselves are
  not kept: feedback that comes with the trace and feedback that comes later are stored alike);
- span durations become `stage_latency_ms`; attributes the mapping does not read are kept under
  `otel.spans[].attributes`, unread root `metadata` keys under `otel.metadata`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Any

import orjson

from ragtriage.config.settings import OtelSettings
from ragtriage.logs.formats.spans import (
    CONTENT_HASH,
    DOCUMENT_LISTS,
    KIND_EMBEDDING,
    KIND_EVALUATOR,
    KIND_RERANKER,
    KIND_RETRIEVER,
    Note,
    Span,
)
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


@dataclass(slots=True)
class Late:
    """Feedback for a trace none of whose spans is in this ingest (annotations, scores, EVALUATOR
    carrier spans, arriving after the trace): ingest merges it into the stored request it names."""

    keys: tuple[str, ...]
    """`trace:ID` / `span:ID` it names, as the store keys requests (`RequestTraceRow`)."""
    feedback: dict[str, Any]
    """The v1 `feedback` section the annotations give (`feedback_of`); may be empty."""
    annotations: list[dict[str, Any]]
    """The annotations, each with the `span_id` it was on when known."""
    orphan: Rejected
    """The quarantine entry when no stored request has one of `keys`."""

    @property
    def source(self) -> str:
        return self.orphan.source

    @property
    def line_no(self) -> int:
        return self.orphan.line_no


def late_feedback(trace_id: str, carriers: list[Span], notes: list[Note], otel: OtelSettings) -> Late:
    """The feedback of a trace whose spans are not in this ingest: the annotations of EVALUATOR
    `carriers` linked to it and the `notes` naming it (`trace_id`, or `span:ID` for notes that name
    only a span)."""
    annotations = [a for span in carriers for a in span_annotations(span)]
    annotations += [
        {**note.as_annotation(), **({"span_id": note.span_id} if note.span_id else {})} for note in notes
    ]
    keys = [trace_id if trace_id.startswith("span:") else f"trace:{trace_id}"]
    for span in carriers:
        keys += [f"span:{span.links[0][1]}", f"trace:{span.links[0][0]}"]
    keys += [f"span:{note.span_id}" for note in notes if note.span_id]
    keys += [f"trace:{note.trace_id}" for note in notes if note.trace_id]
    first = carriers[0] if carriers else notes[0]
    raw = (
        b"["
        + b",".join([*(s.to_bytes() for s in carriers), *(orjson.dumps(n.as_annotation()) for n in notes)])
        + b"]"
    )
    named = f"span {trace_id[5:]}" if trace_id.startswith("span:") else f"trace {trace_id}"
    count = len(annotations)
    orphan = Rejected(
        "orphan_feedback",
        f"{count} {'annotation or score' if count == 1 else 'annotations or scores'} for {named} "
        f"({quoted(annotations[0].get('name', '')) if annotations else 'no name'}), which is neither in "
        "this ingest nor stored",
        "ingest the trace's spans first (or together with its feedback)",
        first.source,
        first.line_no,
        raw,
    )
    return Late(tuple(dict.fromkeys(keys)), feedback_of(annotations, otel), annotations, orphan)


class Reject(Exception):
    """A trace that cannot be a request: quarantine kind, message, fix, and the span it names."""

    def __init__(self, kind: str, message: str, fix: str, span: Span | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.fix, self.span = kind, message, fix, span


def assemble(
    trace_id: str, spans: Iterable[Span], notes: Iterable[Note], otel: OtelSettings
) -> Assembled | Rejected | Late:
    """The request one trace describes (spans of any order; a span seen twice counts once, with the
    attributes either copy has), or
    its late feedback when its only spans are EVALUATOR carriers."""
    unique: dict[str, Span] = {}
    for span in spans:
        seen = unique.setdefault(span.span_id, span)
        if seen is not span and not span.attributes.keys() <= seen.attributes.keys():
            # The same span exported again with more (feedback added on it later): absence is not
            # difference, so the first copy's attributes stay and the later one's new keys join.
            unique[span.span_id] = replace(seen, attributes={**span.attributes, **seen.attributes})
    ordered = sorted(unique.values(), key=lambda s: (s.start_ns or 0, s.span_id))
    note_list = list(notes)
    if ordered and all(s.kind == KIND_EVALUATOR and s.links for s in ordered):
        return late_feedback(trace_id, ordered, note_list, otel)
    try:
        return _assemble(trace_id, ordered, note_list, otel)
    except Reject as reject:
        where = reject.span or (ordered[0] if ordered else None)
        raw = b"[" + b",".join(s.to_bytes() for s in ordered) + b"]"
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
    answer = None if root.kind == KIND_RETRIEVER else text_value(attrs, "output", _ANSWER_KEYS)
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
    tree = retriever_tree(spans)
    route_list = routes(tree.leaves, otel, latencies, tree.embedding)
    for kind in ("bm25", "dense"):
        first = next((r for r in route_list if r["kind"] == kind), None)
        if first is not None:
            stages[kind] = first["hits"]
            first["stage"] = kind
    if tree.fusion is not None:
        stages["fused"] = documents(tree.fusion, "retrieval.documents", otel)
        if (duration := tree.fusion.duration_ms) is not None:
            latencies["fusion"] = duration
    rerankers = [s for s in spans if s.kind == KIND_RERANKER]
    reranker = rerankers[0] if rerankers else None
    if reranker is not None:
        if tree.fusion is None:
            stages["fused"] = documents(reranker, "reranker.input_documents", otel)
        stages["reranked"] = documents(reranker, "reranker.output_documents", otel)
        if (duration := reranker.duration_ms) is not None:
            latencies["rerank"] = duration
    elif tree.selection is not None:
        stages["reranked"] = documents(tree.selection, "retrieval.documents", otel)
        if (duration := tree.selection.duration_ms) is not None:
            latencies["rerank"] = duration
    final = final_context(spans, reranker, stages, metadata, consumed_metadata, otel)
    if final is not None:
        stages["final_context"] = final
    body["stages"] = stages
    chunks = logged_chunks(spans, otel)
    if chunks:
        body["logged_chunks"] = chunks
    body["routes"] = [{k: v for k, v in r.items() if k != "hits" or "stage" not in r} for r in route_list]
    rewrite = _rewrite(spans, body, otel, latencies, tree)
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
    # A feedback carrier is not part of the request's run: its annotations (with its span id) are
    # kept, not the span, so feedback read with the trace or after it is stored alike.
    judged = {c.span_id for c in carriers if any(sid == root.span_id for _, sid in c.links)}
    ran = [s for s in spans if s.span_id not in judged]
    body["otel"] = _kept(trace_id, root, ran, metadata, consumed_metadata, annotations)
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
    spans: list[Span],
    body: dict[str, Any],
    otel: OtelSettings,
    latencies: dict[str, float],
    tree: RetrieverTree,
) -> dict[str, Any]:
    """The rewrite: logged in the root metadata, else a rewrite span's output, else the query the
    retrievers searched when it is not the raw query (a query transform ran between them)."""
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
    searched = tree.fusion or (tree.leaves[0] if tree.leaves else None)
    if "rewritten_query" not in rewrite and searched is not None:
        query = text_value(searched.attributes, "input", QUERY_KEYS)
        if query is not None and query.strip() != str(body["raw_query"]).strip():
            rewrite["rewritten_query"] = query
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


# Stage lists from spans: a route per RETRIEVER span, documents as stage items, the final context.


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


def logged_chunks(spans: Iterable[Span], otel: OtelSettings) -> dict[str, dict[str, str]]:
    """Chunk id → what production logged of each document beyond its id and score, for fidelity to
    explain a chunk the KB lacks or holds other text for: `doc_id` (the first `document.metadata`
    key of `document_doc_keys`), `source` (of `document_source_keys`) and `content_hash` (the
    `text_fingerprint` of `document.content`). Chunks with none of the three are left out; the
    first list a chunk appears in with a field gives it (about 60 bytes per chunk)."""
    found: dict[str, dict[str, str]] = {}
    parsed: dict[str, dict[str, Any]] = {}
    for span in spans:
        if span.kind not in (KIND_RETRIEVER, KIND_RERANKER):
            continue
        for prefix in DOCUMENT_LISTS:
            docs = span.attributes.get(prefix)
            for doc in docs if isinstance(docs, list) else ():
                raw = doc.get("document.metadata")
                if isinstance(raw, str):
                    metadata = parsed.get(raw)
                    if metadata is None:
                        metadata = parsed[raw] = json_object(raw) or {}
                else:
                    metadata = nested(doc, "document.metadata") or {}
                chunk_id = doc.get("document.id")
                if chunk_id in (None, ""):
                    chunk_id = next((metadata[k] for k in otel.document_id_keys if metadata.get(k)), None)
                if chunk_id in (None, ""):
                    continue
                entry = found.setdefault(str(chunk_id), {})
                for field, keys in (
                    ("doc_id", otel.document_doc_keys),
                    ("source", otel.document_source_keys),
                ):
                    if field not in entry:
                        value = next((metadata[k] for k in keys if metadata.get(k) not in (None, "")), None)
                        if isinstance(value, (str, int)):
                            entry[field] = str(value)
                content_hash = doc.get(CONTENT_HASH)
                if "content_hash" not in entry and isinstance(content_hash, str):
                    entry["content_hash"] = content_hash
    return {chunk_id: entry for chunk_id, entry in found.items() if entry}


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


@dataclass(slots=True)
class RetrieverTree:
    """A trace's RETRIEVER spans by role, private twins left out."""

    fusion: Span | None
    """The outermost retriever span that parents two or more retriever spans, below any selection
    (its documents are the fused list)."""
    selection: Span | None
    """The outermost retriever span that wraps a single retriever span (a LangChain
    ContextualCompressionRetriever): its documents are the selected (final) list."""
    leaves: list[Span]
    """Retriever spans that parent none: the routes, in start order."""
    embedding: set[str]
    """Span ids of the leaves with an EMBEDDING span below them (they embed the query: dense)."""


def _public_of(spans: list[Span]) -> dict[str, str]:
    """Private twin span id → its public span's id: `X._m` whose parent, or a sibling, is `X.m`."""
    by_id = {s.span_id: s for s in spans}
    named = {(s.parent_id, s.name): s.span_id for s in spans}
    twins: dict[str, str] = {}
    for span in spans:
        component, dot, method = span.name.rpartition(".")
        if not dot or not method.startswith("_") or method.startswith("__") or not component:
            continue
        public = f"{component}.{method.lstrip('_')}"
        parent = by_id.get(span.parent_id or "")
        if parent is not None and parent.name == public:
            twins[span.span_id] = parent.span_id
        elif (sibling := named.get((span.parent_id, public))) is not None:
            twins[span.span_id] = sibling
    return twins


def retriever_tree(spans: list[Span]) -> RetrieverTree:
    """The roles of a trace's retriever spans (`spans` in start order)."""
    twins = _public_of(spans)
    by_id = {s.span_id: s for s in spans}
    owner: dict[str, str | None] = {}
    """Span id → id of the nearest public RETRIEVER span at or above it (None: none), memoised."""

    def retriever_above(span: Span) -> str | None:
        chain: list[str] = []
        found: str | None = None
        parent_id = span.parent_id
        while parent_id is not None and parent_id in by_id and len(chain) <= len(by_id):
            if parent_id in owner:
                found = owner[parent_id]
                break
            chain.append(parent_id)
            parent = by_id[parent_id]
            if parent_id in twins:  # a twin's children are its public span's
                parent_id = twins[parent_id]
                continue
            if parent.kind == KIND_RETRIEVER:
                found = parent_id
                break
            parent_id = parent.parent_id
        for visited in chain:  # each span walked has `found` above it, or is that retriever
            owner[visited] = (
                visited if by_id[visited].kind == KIND_RETRIEVER and visited not in twins else found
            )
        return found

    public = [s for s in spans if s.kind == KIND_RETRIEVER and s.span_id not in twins]
    children: dict[str, list[Span]] = {}
    above: dict[str, str | None] = {}
    embedding: set[str] = set()
    for span in spans:
        if span.kind == KIND_RETRIEVER and span.span_id not in twins:
            above[span.span_id] = owner_id = retriever_above(span)
            if owner_id is not None:
                children.setdefault(owner_id, []).append(span)
        elif span.kind == KIND_EMBEDDING and (owner_id := retriever_above(span)) is not None:
            embedding.add(owner_id)
    fusions = [s for s in public if s.span_id in children and above[s.span_id] is None]
    fusion = fusions[0] if fusions else None
    selection = None
    # A retriever that wraps a single retriever selects from its output: what it wraps is the
    # fusion, or a lone route (then there is no fusion).
    while fusion is not None and len(inner := children[fusion.span_id]) == 1:
        selection = selection or fusion
        fusion = inner[0] if inner[0].span_id in children else None
    return RetrieverTree(
        fusion=fusion,
        selection=selection,
        leaves=[s for s in public if s.span_id not in children],
        embedding=embedding,
    )


def routes(
    retrievers: list[Span],
    otel: OtelSettings,
    latencies: dict[str, float],
    embedding: AbstractSet[str] = frozenset(),
) -> list[dict[str, Any]]:
    """One route per retriever span: name from `[logs.otel] routes`, else kind by the span (lexical
    by name unless it embeds the query: `embedding` holds the ids of those that do); query,
    latency, hits."""
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
            lexical_name = span.span_id not in embedding and any(k in lower for k in lexical)
            name = "bm25" if lexical_name else "dense"
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
    `reranker.top_k` (without a RERANKER span, the nodes a LlamaIndex query engine answered
    from: `served_nodes`, else a selecting retriever's documents: `stages.reranked`), a
    chunk-id list in the root metadata, or a named span's documents;
    None when the rule finds nothing (the stage was not logged)."""
    rule = otel.final_context
    if rule == "reranker":
        if reranker is None:
            served = served_nodes(spans)
            return served if served is not None else stages.get("reranked")
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


#: How openinference-instrumentation-llama-index writes a node in a JSON output (`_show_repr_str`).
_NODE_REPR = re.compile(r"<\w+\(node=\w+\(id_=(?P<id>.+)\), score=(?P<score>[^()]*)\)>", re.S)


def served_nodes(spans: list[Span]) -> list[Any] | None:
    """The `source_nodes` of the first span (in start order: the outermost query engine) whose
    JSON `output.value` lists them, as stage items; these are the nodes the synthesizer answered
    from, after every postprocessor. None when no span has them in the instrumentor's form."""
    for span in spans:
        value = span.attributes.get("output.value")
        if not isinstance(value, str) or '"source_nodes"' not in value:
            continue
        nodes = (json_object(value) or {}).get("source_nodes")
        if not isinstance(nodes, list):
            continue
        hits: list[Any] = []
        for node in nodes:
            match = _NODE_REPR.fullmatch(node) if isinstance(node, str) else None
            if match is None:
                return None
            score = match["score"]
            hits.append(
                {"chunk_id": match["id"], "score": float(score)} if _is_number(score) else match["id"]
            )
        return hits
    return None


# Feedback from annotations, evaluations and scores: which are user feedback, which are bad, which
# escalate (the `[logs.otel]` names and labels decide).

_TRUE_LABELS = frozenset(("true", "yes", "1", "escalated"))
#: Flattened lists of feedback on a span: prefix, and the prefix of each item's fields.
_LISTS = (
    ("annotations", "annotation."),
    ("evaluations", "evaluation."),
    ("trace.annotations", "annotation."),
    ("trace.evaluations", "evaluation."),
)
_LIST_STARTS = tuple(prefix + "." for prefix, _ in _LISTS)


def root_annotations(root: Span, carriers: list[Span], notes: list[Note]) -> list[dict[str, Any]]:
    """Feedback on the request: annotations and evaluations on the root span, on EVALUATOR
    carrier spans linked to it, and notes on the root span or the whole trace."""
    found: list[dict[str, Any]] = []
    for span in [root, *(c for c in carriers if any(sid == root.span_id for _, sid in c.links))]:
        found += span_annotations(span)
    for note in notes:
        if note.span_id is None or note.span_id == root.span_id:
            found.append({**note.as_annotation(), "span_id": root.span_id})
    return found


def span_annotations(span: Span) -> list[dict[str, Any]]:
    """The annotations and evaluations flattened on one span, each with the span's id."""
    found: list[dict[str, Any]] = []
    listed = {k: v for k, v in span.attributes.items() if k.startswith(_LIST_STARTS)}
    if not listed:
        return found
    for prefix, suffix in _LISTS:
        for item in indexed(listed, prefix):
            fields = {k[len(suffix) :]: v for k, v in item.items() if k.startswith(suffix)}
            if "name" in fields:
                fields.pop("metadata", None)
                found.append({**fields, "span_id": span.span_id})
    return found


def _matches(name: Any, needles: list[str]) -> bool:
    lower = str(name).lower()
    return any(n.lower() in lower for n in needles if n)


def _is_bad(annotation: dict[str, Any], otel: OtelSettings) -> bool:
    label = annotation.get("label")
    if label not in (None, ""):
        return str(label).strip().lower() in {b.lower() for b in otel.bad_labels}
    score = annotation.get("score")
    return (
        otel.bad_score_at_most is not None
        and isinstance(score, (int, float))
        and not isinstance(score, bool)
        and score <= otel.bad_score_at_most
    )


def feedback_of(annotations: list[dict[str, Any]], otel: OtelSettings) -> dict[str, Any]:
    """The v1 `feedback` section: `rating` `down` when any user-feedback annotation is bad
    (`bad_labels`, or a score at most `bad_score_at_most`), else `up`; the chosen annotation's
    name, label and score; `escalated` from an escalation annotation. Empty when none applies."""
    feedback: dict[str, Any] = {}
    user = [a for a in annotations if _matches(a.get("name"), otel.feedback_names)]
    if user:
        bad = [a for a in user if _is_bad(a, otel)]
        chosen = bad[0] if bad else user[0]
        feedback["rating"] = "down" if bad else "up"
        feedback["name"] = chosen.get("name")
        for key in ("label", "score"):
            if chosen.get(key) is not None:
                feedback[key] = chosen[key]
        if chosen.get("explanation"):
            feedback["reason"] = chosen["explanation"]
    for annotation in annotations:
        if not _matches(annotation.get("name"), otel.escalation_names):
            continue
        label, score = annotation.get("label"), annotation.get("score")
        if str(label).strip().lower() in _TRUE_LABELS or (
            isinstance(score, (int, float)) and not isinstance(score, bool) and score > 0
        ):
            feedback["escalated"] = True
    return feedback


# Reading flattened attributes: lists, JSON-string objects, nested keys, input and output text.


def indexed(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The list flattened under `prefix` (`prefix.0.x`, `prefix.1.x` → `[{x}, {x}]`), in index order.

    Gaps in the indices are skipped.
    """
    items: dict[int, dict[str, Any]] = {}
    start = prefix + "."
    size = len(start)
    for key, value in attributes.items():
        if key.startswith(start):
            index, dot, rest = key[size:].partition(".")
            if dot and index.isdigit():
                items.setdefault(int(index), {})[rest] = value
    return [items[i] for i in sorted(items)]


def json_object(value: Any) -> dict[str, Any] | None:
    """A JSON-string attribute (OpenInference `metadata`) as a dict; None when it is not one."""
    if isinstance(value, dict):
        return value
    if isinstance(value, (str, bytes)) and value[:1] in ("{", b"{"):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def nested(attributes: dict[str, Any], prefix: str) -> dict[str, Any] | None:
    """The object under `prefix`: a JSON string (OTLP), or keys flattened below it (Phoenix
    flattens `metadata` into `metadata.a.b`), rebuilt as nested dicts. None when absent."""
    value = attributes.get(prefix)
    if value is not None:
        return json_object(value)
    start = prefix + "."
    found: dict[str, Any] | None = None
    for key, item in attributes.items():
        if key.startswith(start):
            found = {} if found is None else found
            _put(found, key[len(start) :].split("."), item)
    return None if found is None else _lists(found)


def _put(tree: dict[str, Any], path: list[str], value: Any) -> None:
    for part in path[:-1]:
        child = tree.get(part)
        if not isinstance(child, dict):
            child = tree[part] = {}
        tree = child
    tree[path[-1]] = value


def _lists(tree: Any) -> Any:
    """Dicts whose keys are all 0…n-1 become lists (how Phoenix flattens lists of objects)."""
    if not isinstance(tree, dict):
        return tree
    converted = {k: _lists(v) for k, v in tree.items()}
    if converted and all(k.isdigit() for k in converted):
        keys = sorted(converted, key=int)
        if [int(k) for k in keys] == list(range(len(keys))):
            return [converted[k] for k in keys]
    return converted


#: Keys of a JSON-object `input.value` that hold the query.
QUERY_KEYS = ("query", "question", "query_str", "input")


def text_value(attrs: dict[str, Any], prefix: str, keys: tuple[str, ...]) -> str | None:
    """`input.value` / `output.value` as text; a JSON object value gives its query/answer key."""
    value = attrs.get(f"{prefix}.value")
    if value is None:
        return None
    if isinstance(value, str) and value[:1] == "{":
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        if isinstance(parsed, dict):
            # LlamaIndex nests its QueryBundle: `{"query_bundle": {"query_str": …}}`.
            for candidate in (parsed, *(v for v in parsed.values() if isinstance(v, dict))):
                for key in keys:
                    text = candidate.get(key)
                    if isinstance(text, str):
                        return text
    return str(value)
