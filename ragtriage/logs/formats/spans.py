"""The span every trace format is read into, and helpers over flattened OpenInference attributes.

Attribute keys are flattened the OpenInference way (`retrieval.documents.0.document.id`); values
are plain JSON values. The three document lists are the exception: they are grouped on reading
(`group_documents`) into one list under their prefix, each document a dict of its fields
(`{"document.id": …, "document.score": …}`), because they are most of a span's attributes.
OTLP, Phoenix and Langfuse readers all produce `Span`s, so assembly into a request is written
once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

#: OpenInference span kinds this package reads (`openinference.span.kind`).
KIND_RETRIEVER = "RETRIEVER"
KIND_RERANKER = "RERANKER"
KIND_EVALUATOR = "EVALUATOR"
KIND_EMBEDDING = "EMBEDDING"


def openinference_kind(attributes: dict[str, Any]) -> str:
    """The span's `openinference.span.kind` in upper case, "" when it has none."""
    return str(attributes.get("openinference.span.kind") or "").upper()


@dataclass(slots=True)
class Span:
    """One span (or Langfuse observation), ids as lowercase hex or the producer's own id text."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str
    """OpenInference span kind in upper case (`RETRIEVER`, `RERANKER`, …), "" when unknown."""
    start_ns: int | None
    end_ns: int | None
    attributes: dict[str, Any]
    """Flattened attributes: `key` → str, int, float, bool or a list of those."""
    source: str
    """File the span was read from (as given on the command line)."""
    line_no: int
    """Line (JSONL) or record number (whole document) of the span in `source`."""
    resource: dict[str, Any] = field(default_factory=dict)
    links: list[tuple[str, str]] = field(default_factory=list)
    """`(trace_id, span_id)` of linked spans (an EVALUATOR carrier links to the span it judges)."""
    status: str | None = None
    """`ERROR` when the span failed, else None."""
    duration_ms: float | None = field(init=False, repr=False, compare=False)
    """End minus start in milliseconds (3 decimals), None when either is missing."""

    def __post_init__(self) -> None:
        start, end = self.start_ns, self.end_ns
        self.duration_ms = None if start is None or end is None else round((end - start) / 1e6, 3)

    def _values(self) -> tuple[Any, ...]:
        """The fields in declaration order."""
        return (
            self.trace_id,
            self.span_id,
            self.parent_id,
            self.name,
            self.kind,
            self.start_ns,
            self.end_ns,
            self.attributes,
            self.source,
            self.line_no,
            self.resource,
            self.links,
            self.status,
        )

    def to_bytes(self) -> bytes:
        """Compact JSON of the span (a rejected trace's quarantined bytes)."""
        return orjson.dumps(self._values())


@dataclass(slots=True)
class Note:
    """Feedback recorded outside the span it judges: a Phoenix span or trace annotation, or a
    Langfuse score. Exactly one of `span_id` / `trace_id` may be unknown until assembly."""

    trace_id: str | None
    span_id: str | None
    name: str
    label: str | None
    score: float | None
    explanation: str | None
    annotator_kind: str | None
    source: str
    line_no: int

    def as_annotation(self) -> dict[str, Any]:
        """The OpenInference annotation fields."""
        return {
            k: v
            for k, v in (
                ("name", self.name),
                ("label", self.label),
                ("score", self.score),
                ("explanation", self.explanation),
                ("annotator_kind", self.annotator_kind),
            )
            if v is not None
        }


#: Attribute prefixes whose flattened lists are grouped into one list of documents.
DOCUMENT_LISTS = ("retrieval.documents", "reranker.input_documents", "reranker.output_documents")
DOCUMENT_KEY_PREFIXES = tuple(p + "." for p in DOCUMENT_LISTS)
#: Document field replaced on reading by its `text_fingerprint` under `CONTENT_HASH`: the knowledge
#: base holds the text; the fingerprint is enough to tell whether the KB's text is what was served.
CONTENT_FIELD = "document.content"
CONTENT_HASH = "document.content_hash"


def text_fingerprint(text: str) -> str:
    """16 hex characters (64 bits) of the sha256 of `text` with runs of whitespace made one space and
    the ends stripped: equal for the same chunk text however a producer spaced it."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]


def group_documents(attributes: dict[str, Any]) -> dict[str, Any]:
    """`attributes` with each `DOCUMENT_LISTS` list grouped under its prefix, each content replaced
    by its `text_fingerprint` (`document.content_hash`)."""
    if not any(key.startswith(DOCUMENT_KEY_PREFIXES) for key in attributes):
        return attributes
    grouped: dict[str, Any] = {}
    lists: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attributes.items():
        if key.startswith(DOCUMENT_KEY_PREFIXES):
            first, second, index, field = (key.split(".", 3) + ["", ""])[:4]
            if index.isdigit() and field:
                if field == CONTENT_FIELD:
                    if not isinstance(value, str):
                        continue
                    field, value = CONTENT_HASH, text_fingerprint(value)
                lists.setdefault(f"{first}.{second}", {}).setdefault(int(index), {})[field] = value
                continue
        grouped[key] = value
    for prefix, items in lists.items():
        grouped[prefix] = [items[i] for i in sorted(items)]
    return grouped
