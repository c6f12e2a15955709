"""The figures of `ragtriage monitor` that look inside logged requests: rank shift, candidate
coverage@N of confirmed cases, first-day recall of new documents. Pure functions over bodies."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import msgspec
import orjson

from ragtriage.logs.schema import STAGE_NAMES, map_flat_form


class _Item(msgspec.Struct):
    chunk_id: str | None = None
    id: str | None = None
    doc_id: str | None = None


_Stage = Union[list[Union[str, _Item]], None]


class _Stages(msgspec.Struct):
    bm25: _Stage = None
    dense: _Stage = None
    fused: _Stage = None
    reranked: _Stage = None
    final_context: _Stage = None


class _Lists(msgspec.Struct):
    """Only the lists of a v1 body (msgspec skips every other field in C)."""

    stages: _Stages | None = None
    citations: _Stage = None


_DECODER = msgspec.json.Decoder(_Lists)
_FLAT_MARKERS = (b'"bm25_results"', b'"vector_results"', b'"dense_results"', b'"fused_results"')


def stage_lists(body: str | bytes) -> dict[str, list[str]]:
    """Chunk ids per logged stage (`bm25`, `dense`, `fused`, `reranked`, `final_context`) and
    `citations`, flat form mapped; a stage that was not logged is absent, a bad body gives {}."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    if not any(marker in raw for marker in _FLAT_MARKERS):
        try:
            decoded = _DECODER.decode(raw)
        except msgspec.DecodeError:
            pass  # an unusual shape (numeric ids, …): the general path below
        else:
            lists: dict[str, list[str]] = {}
            stages = decoded.stages
            for name in STAGE_NAMES:
                items = getattr(stages, name) if stages is not None else None
                if items is not None:
                    lists[name] = [_fast_id(item) for item in items]
            if decoded.citations is not None:
                lists["citations"] = [_fast_id(item) for item in decoded.citations]
            return lists
    return _general_lists(body)


def _fast_id(item: str | _Item) -> str:
    if isinstance(item, str):
        return item
    return item.chunk_id or item.id or item.doc_id or ""


def _general_lists(body: str | bytes) -> dict[str, list[str]]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(data, dict):
        return {}
    data = map_flat_form(data)
    stages = data.get("stages")
    if not isinstance(stages, dict):
        stages = {}
    lists: dict[str, list[str]] = {}
    for name, items in [*((s, stages.get(s)) for s in STAGE_NAMES), ("citations", data.get("citations"))]:
        if isinstance(items, list):
            lists[name] = [_chunk_id(item) for item in items if _chunk_id(item)]
    return lists


def _chunk_id(item: Any) -> str:
    if isinstance(item, dict):
        value = item.get("chunk_id", item.get("id", item.get("doc_id")))
        return "" if value is None else str(value)
    return "" if item is None else str(item)


@dataclass
class ShiftTally:
    """Rank shifts (fused rank − reranked rank; positive = the rerank moved the chunk up)."""

    shifts: list[int] = field(default_factory=list)
    dropped: int = 0
    """Judged chunks in the fused list but not in the reranked list."""
    requests: int = 0
    """Requests that contributed a pair or a drop."""

    def add(self, lists: dict[str, list[str]], judged: Sequence[str]) -> None:
        """Add the judged chunks of one request (gold, else its citations)."""
        fused, reranked = lists.get("fused"), lists.get("reranked")
        if not fused or not reranked:
            return
        before = _first_ranks(fused)
        after = _first_ranks(reranked)
        counted = False
        for chunk_id in dict.fromkeys(judged):
            if chunk_id not in before:
                continue
            counted = True
            if chunk_id in after:
                self.shifts.append(before[chunk_id] - after[chunk_id])
            else:
                self.dropped += 1
        self.requests += counted

    def merge(self, other: ShiftTally) -> None:
        """Pool another tally into this one."""
        self.shifts.extend(other.shifts)
        self.dropped += other.dropped
        self.requests += other.requests


def _first_ranks(ids: Sequence[str]) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for rank, chunk_id in enumerate(ids, start=1):
        ranks.setdefault(chunk_id, rank)
    return ranks


def covered_at(lists: dict[str, list[str]], gold: Iterable[str], n: int) -> bool | None:
    """Whether a gold chunk is among the first `n` fused candidates (before rerank); None when the
    request logged no fused list (then it says nothing about coverage)."""
    fused = lists.get("fused")
    if fused is None:
        return None
    first = set(list(dict.fromkeys(fused))[:n])
    return any(chunk_id in first for chunk_id in gold)


def retrieved_ids(lists: dict[str, list[str]]) -> set[str]:
    """Every chunk id a request retrieved at any logged stage (citations included)."""
    return {chunk_id for ids in lists.values() for chunk_id in ids}


def common_prefix(ids: Sequence[str]) -> str:
    """The longest common prefix of `ids` ('' for none)."""
    if not ids:
        return ""
    low, high = min(ids), max(ids)
    size = 0
    while size < min(len(low), len(high)) and low[size] == high[size]:
        size += 1
    return low[:size]
