"""How a stored request and a later line with the same request_id combine: the one merge rule of ingest.

Feedback, annotations and scores arrive after the trace (minutes to days), and one request may be
exported twice (a flat log without scores, an OTLP export with them). So a later line is compared
with the stored request field by field, both validated as `RequestLog` (flat form mapped, times in
UTC, unset fields left out):

- a field only the later line has is added (absence is not difference): feedback, scores,
  a stage or a section the stored one lacks;
- a field only the stored one has is kept;
- a field both have must be equal (times and `*_ms` durations within `TIMING_TOLERANCE_MS`);
  lists must have the same length, item by item, a chunk id and a `{chunk_id, score}` object with
  the same id being the same item; `annotations` lists are united instead, and a trace's `spans`
  are merged by span id (a span the stored reading lacked is added);
- anything else is a true conflict: two different requests under one id.

One exception: a trace read without its root span (a part of a trace, a Langfuse export without its
traces file) took its query, time and answer from another span. Against a reading of the same trace
with its root, the rooted one wins every field both have; the other adds only what it alone has.

Pure: no I/O. Used for every format (`logs.ingest`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import orjson
from pydantic import ValidationError

from ragtriage.logs.log_line import utc
from ragtriage.logs.schema import RequestLog

TIMING_TOLERANCE_MS = 1.0
"""Times and `*_ms` values this close are the same: exporters of one trace keep different
precisions (the OpenTelemetry SDK's console JSON has microseconds, OTLP nanoseconds)."""

FIELDS_NAMED_FIRST = ("raw_query", "ts", "pipeline_version", "stages", "rewrite", "feedback", "answer")
"""The fields that tell two requests apart best, named first when they differ."""

#: Lists whose items accumulate (annotations from several runs) instead of being compared by rank.
UNITED_LISTS = frozenset(("annotations",))
#: Lists of items keyed by a field (a trace's spans): an item of a new key is added, items of the
#: same key are merged.
KEYED_LISTS = {"spans": "span_id"}

Outcome = Literal["duplicate", "merged", "conflict"]


@dataclass(frozen=True)
class Merge:
    """What a later line does to a stored request.

    `outcome`: `duplicate` (nothing new), `merged` (`body` is the stored request with `added`),
    or `conflict` (`conflicts` names the fields both have with different values; `body` is None).
    """

    outcome: Outcome
    body: bytes | None = None
    """The merged request as UTF-8 JSON (v1 form), when `outcome` is `merged`."""
    added: list[str] = field(default_factory=list)
    """Paths the later line added, list positions folded (`feedback`, `stages.bm25[].score`)."""
    conflicts: list[str] = field(default_factory=list)
    """The first differing path under each differing top-level field (`raw_query`,
    `stages.bm25[2].chunk_id`, `stages.bm25 (length 5 vs 3)`), important fields first; `body`
    when one side does not validate."""


def merge_request(stored: bytes | str, later: bytes | str) -> Merge:
    """Merge the body of a later line into a stored body of the same request_id (module rules)."""
    if stored == later:
        return Merge("duplicate")
    try:
        one, two = _normal(stored), _normal(later)
    except ValidationError:
        return Merge("conflict", conflicts=["body"])
    first_named = {name: index for index, name in enumerate(FIELDS_NAMED_FIRST)}
    keys = sorted(one.keys() | two.keys(), key=lambda k: (first_named.get(k, len(first_named)), k))
    supersedes = _same_trace(one, two) and _rootless(one) and not _rootless(two)
    if supersedes:
        one, two = two, one
    yields = _same_trace(one, two) and _rootless(two) and not _rootless(one)
    if yields:  # of the rootless reading's own trace section, only its annotations count
        notes = two["otel"].get("annotations")
        two = (
            {**two, "otel": {"annotations": notes}}
            if notes
            else {k: v for k, v in two.items() if k != "otel"}
        )
    merged: dict[str, Any] = {}
    added: list[str] = []
    conflicts: list[str] = []
    for key in keys:
        found: list[str] = []
        merged[key] = _merge(one.get(key), two.get(key), key, key.endswith("_ms"), added, found)
        if found:
            conflicts.append(found[0])
    if supersedes:
        changed = [key for key in keys if _normal_json(merged.get(key)) != _normal_json(two.get(key))]
        if not changed:
            return Merge("duplicate")
        body = orjson.dumps(merged, option=orjson.OPT_SORT_KEYS)
        return Merge("merged", body=body, added=[f"{key} (from the trace's root span)" for key in changed])
    if conflicts and not yields:
        return Merge("conflict", conflicts=conflicts)
    # The schema version a producer left out is the current one: writing it down adds nothing.
    folded = list(dict.fromkeys(re.sub(r"\[\d+\]", "[]", path) for path in added if path != "schema_version"))
    if not folded:
        return Merge("duplicate")
    return Merge("merged", body=orjson.dumps(merged, option=orjson.OPT_SORT_KEYS), added=folded)


def request_differences(body: bytes | str, other: bytes | str, *, limit: int = 3) -> list[str]:
    """Up to `limit` fields in which two bodies differ as requests (`Merge.conflicts`); empty
    when one only adds to the other."""
    return merge_request(body, other).conflicts[:limit]


def _normal_json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _same_trace(one: dict[str, Any], two: dict[str, Any]) -> bool:
    first, second = one.get("otel"), two.get("otel")
    return (
        isinstance(first, dict)
        and isinstance(second, dict)
        and first.get("trace_id") is not None
        and first.get("trace_id") == second.get("trace_id")
    )


def _rootless(request: dict[str, Any]) -> bool:
    """The request was read from a trace without its root span: the span it took as the root has a
    parent (`otel.spans`, trace ingest)."""
    otel = request.get("otel")
    if not isinstance(otel, dict) or not isinstance(otel.get("spans"), list):
        return False
    root = otel.get("root_span_id")
    return any(
        isinstance(span, dict) and span.get("span_id") == root and span.get("parent_id")
        for span in otel["spans"]
    )


def _normal(body: bytes | str) -> dict[str, Any]:
    """The body as plain values: validated, unset and null fields left out, the time in UTC."""
    record = RequestLog.model_validate_json(body)
    if record.ts is not None:
        record.ts = utc(record.ts)
    return record.model_dump(exclude_unset=True, exclude_none=True)


def _item_id(value: Any) -> Any:
    """A stage item's chunk id (a plain id, or the `chunk_id` of an object)."""
    return value.get("chunk_id") if isinstance(value, dict) else value


def _merge(old: Any, new: Any, path: str, timing: bool, added: list[str], conflicts: list[str]) -> Any:
    """`old` with what `new` adds; differing paths are appended to `conflicts`."""
    if new is None:
        return old
    if old is None:
        added.append(path)
        return new
    if isinstance(old, dict) and isinstance(new, dict):
        out = dict(old)
        for key in sorted(new, key=str):
            inner = f"{path}.{key}"
            timed = timing or str(key).endswith("_ms")
            out[key] = _merge(old.get(key), new[key], inner, timed, added, conflicts)
        return out
    if isinstance(old, list) and isinstance(new, list):
        name = path.rsplit(".", 1)[-1]
        key = KEYED_LISTS.get(name)
        if key is not None and all(isinstance(item, dict) and key in item for item in (*old, *new)):
            return _merge_keyed(old, new, key, path, timing, added, conflicts)
        if name in UNITED_LISTS:
            extra = [item for item in new if item not in old]
            if extra:
                added.append(path)
            return [*old, *extra]
        if len(old) != len(new):
            conflicts.append(f"{path} (length {len(old)} vs {len(new)})")
            return old
        pairs = enumerate(zip(old, new, strict=True))
        return [_merge(a, b, f"{path}[{i}]", timing, added, conflicts) for i, (a, b) in pairs]
    if isinstance(old, str) and isinstance(new, dict) and _item_id(new) == old:
        added.extend(f"{path}.{key}" for key in sorted(new) if key != "chunk_id")  # the id, then its score
        return new
    if isinstance(old, dict) and isinstance(new, str) and _item_id(old) == new:
        return old
    if isinstance(old, datetime) and isinstance(new, datetime):
        close = abs(utc(old) - utc(new)) <= timedelta(milliseconds=TIMING_TOLERANCE_MS)
        if not close:
            conflicts.append(path)
        return old
    if timing and _number(old) and _number(new):
        if abs(old - new) > TIMING_TOLERANCE_MS:
            conflicts.append(path)
        return old
    if old != new:
        conflicts.append(path)
    return old


def _merge_keyed(
    old: list[dict[str, Any]],
    new: list[dict[str, Any]],
    key: str,
    path: str,
    timing: bool,
    added: list[str],
    conflicts: list[str],
) -> list[dict[str, Any]]:
    """`old` with the items of `new` merged by `key` (a span id): new keys appended, in their order."""
    out = list(old)
    at = {item[key]: index for index, item in enumerate(old)}
    for item in new:
        index = at.get(item[key])
        if index is None:
            added.append(f"{path}[]")
            out.append(item)
        else:
            out[index] = _merge(old[index], item, f"{path}[{index}]", timing, added, conflicts)
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
