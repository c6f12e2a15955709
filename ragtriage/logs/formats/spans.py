"""The span every trace format is read into, and helpers over flattened OpenInference attributes.

Attribute keys are flattened the OpenInference way (`retrieval.documents.0.document.id`); values
are plain JSON values. OTLP, Phoenix and Langfuse readers all produce `Span`s, so assembly into
a request is written once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

#: OpenInference span kinds this package reads (`openinference.span.kind`).
KIND_RETRIEVER = "RETRIEVER"
KIND_RERANKER = "RERANKER"
KIND_EVALUATOR = "EVALUATOR"
KIND_LLM = "LLM"


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

    def to_bytes(self) -> bytes:
        """Compact JSON of the span (spill storage and quarantine bodies)."""
        return orjson.dumps(
            [
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
            ]
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Span:
        """The span `to_bytes` wrote."""
        values = orjson.loads(data)
        values[11] = [tuple(link) for link in values[11]]
        return cls(*values)

    @property
    def duration_ms(self) -> float | None:
        """End minus start in milliseconds, None when either is missing."""
        if self.start_ns is None or self.end_ns is None:
            return None
        return round((self.end_ns - self.start_ns) / 1e6, 3)


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

    def to_bytes(self) -> bytes:
        """Compact JSON of the note (spill storage)."""
        return orjson.dumps(
            [
                self.trace_id,
                self.span_id,
                self.name,
                self.label,
                self.score,
                self.explanation,
                self.annotator_kind,
                self.source,
                self.line_no,
            ]
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Note:
        """The note `to_bytes` wrote."""
        return cls(*orjson.loads(data))


_INDEXED = re.compile(r"(\d+)\.(.+)")


def indexed(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The list flattened under `prefix` (`prefix.0.x`, `prefix.1.x` → `[{x}, {x}]`), in index order.

    Gaps in the indices are skipped.
    """
    items: dict[int, dict[str, Any]] = {}
    start = prefix + "."
    for key, value in attributes.items():
        if not key.startswith(start):
            continue
        match = _INDEXED.match(key, len(start))
        if match is None:
            continue
        items.setdefault(int(match.group(1)), {})[match.group(2)] = value
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
