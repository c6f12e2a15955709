"""The span every trace format is read into, and helpers over flattened OpenInference attributes.

Attribute keys are flattened the OpenInference way (`retrieval.documents.0.document.id`); values
are plain JSON values. The three document lists are the exception: they are grouped on reading
(`group_documents`) into one list under their prefix, each document a dict of its fields
(`{"document.id": …, "document.score": …}`), because they are most of a span's attributes.
OTLP, Phoenix and Langfuse readers all produce `Span`s, so assembly into a request is written
once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

#: OpenInference span kinds this package reads (`openinference.span.kind`).
KIND_RETRIEVER = "RETRIEVER"
KIND_RERANKER = "RERANKER"
KIND_EVALUATOR = "EVALUATOR"
KIND_LLM = "LLM"


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
#: Document fields dropped on reading: the knowledge base holds the text.
DROPPED_DOCUMENT_FIELDS = frozenset(("document.content",))


def group_documents(attributes: dict[str, Any]) -> dict[str, Any]:
    """`attributes` with each `DOCUMENT_LISTS` list grouped under its prefix, contents dropped."""
    if not any(key.startswith(DOCUMENT_KEY_PREFIXES) for key in attributes):
        return attributes
    grouped: dict[str, Any] = {}
    lists: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attributes.items():
        if key.startswith(DOCUMENT_KEY_PREFIXES):
            first, second, index, field = (key.split(".", 3) + ["", ""])[:4]
            if index.isdigit() and field:
                if field not in DROPPED_DOCUMENT_FIELDS:
                    lists.setdefault(f"{first}.{second}", {}).setdefault(int(index), {})[field] = value
                continue
        grouped[key] = value
    for prefix, items in lists.items():
        grouped[prefix] = [items[i] for i in sorted(items)]
    return grouped


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


def under(attributes: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The attributes whose key is `prefix` or starts with `prefix.`."""
    start = prefix + "."
    return {k: v for k, v in attributes.items() if k == prefix or k.startswith(start)}


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
            for key in keys:
                text = parsed.get(key)
                if isinstance(text, str):
                    return text
    return str(value)
