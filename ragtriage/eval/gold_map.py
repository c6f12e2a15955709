"""Gold that survives re-chunking: map (doc_id, anchor) and (doc_id, span) refs onto current chunks.

A ref maps, at evaluation time, to the live chunks of its document that
- overlap its character span by at least one character (`char_start < end and char_end > start`),
  kept only if they also carry the ref's anchor when it has one; when the document's chunks have no
  offsets (imported with `kb import`) or none is left, to
- the chunks whose `anchor` equals the ref's anchor.
A ref taken from a chunk (`promote` records its `chunk_id`) maps to that chunk alone while it is
live: the triager marked that chunk, and its section's other chunks or the neighbours sharing its
overlap window are not gold. A chunk's grade is the highest grade of the refs that map to it. A case
with refs is scored on the mapped chunks plus those of its stored chunk ids that are still live; a
case without refs is left as it is. A smaller chunking can map one span to several chunks: each
counts as relevant, which raises the recall denominator but leaves Hit@K and MRR as they are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from ragtriage.eval.cases import EvalCase, GoldRef
from ragtriage.store import eval_repo

__all__ = [
    "ChunkPlace",
    "GoldMapping",
    "load_places",
    "map_ref",
    "refs_for_chunks",
    "resolve_case",
    "resolve_cases",
]


@dataclass(frozen=True)
class ChunkPlace:
    """Where one live chunk sits in its document."""

    chunk_id: str
    doc_id: str
    anchor: str | None
    char_start: int | None
    char_end: int | None


@dataclass(frozen=True)
class GoldMapping:
    """One case after mapping: the case with its effective gold, and the refs that mapped to nothing."""

    case: EvalCase
    unmapped: tuple[GoldRef, ...] = ()


def map_ref(ref: GoldRef, places: Sequence[ChunkPlace]) -> list[str]:
    """Chunk ids of `places` (the live chunks of `ref.doc_id`) that `ref` maps to, in the given order."""
    if ref.start is not None and ref.end is not None:
        overlapping = [
            p
            for p in places
            if p.char_start is not None
            and p.char_end is not None
            and p.char_start < ref.end
            and p.char_end > ref.start
        ]
        if ref.anchor is not None:
            overlapping = [p for p in overlapping if p.anchor == ref.anchor]
        if overlapping:
            return [p.chunk_id for p in overlapping]
    if ref.anchor is not None:
        return [p.chunk_id for p in places if p.anchor == ref.anchor]
    return []


def resolve_case(case: EvalCase, places_by_doc: dict[str, list[ChunkPlace]]) -> GoldMapping:
    """`case` with `gold` = chunks its refs map to + its still-live gold chunk ids (refs kept as they are);
    a ref whose `chunk_id` is still live maps to that chunk only."""
    if not case.gold_refs or case.gold_granularity != "chunk":
        return GoldMapping(case=case)
    live = {p.chunk_id for places in places_by_doc.values() for p in places}
    gold = {chunk_id: grade for chunk_id, grade in case.gold.items() if chunk_id in live}
    unmapped: list[GoldRef] = []
    for ref in case.gold_refs:
        if ref.chunk_id is not None and ref.chunk_id in live:
            mapped = [ref.chunk_id]
        else:
            mapped = map_ref(ref, places_by_doc.get(ref.doc_id, []))
        if not mapped:
            unmapped.append(ref)
        for chunk_id in mapped:
            gold[chunk_id] = max(gold.get(chunk_id, ref.grade), ref.grade)
    return GoldMapping(case=case.model_copy(update={"gold": gold}), unmapped=tuple(unmapped))


def load_places(engine: Engine, doc_ids: Iterable[str]) -> dict[str, list[ChunkPlace]]:
    """Live chunks of `doc_ids` by document, in reading order (ordinal)."""
    places: dict[str, list[ChunkPlace]] = defaultdict(list)
    for row in eval_repo.live_chunk_places(engine, doc_ids):
        places[row[1]].append(ChunkPlace(*row))
    return dict(places)


def resolve_cases(engine: Engine, cases: Sequence[EvalCase]) -> list[GoldMapping]:
    """Map every case's refs onto the KB in `engine` (one query per 500 documents)."""
    doc_ids = {ref.doc_id for case in cases for ref in case.gold_refs}
    places = load_places(engine, doc_ids) if doc_ids else {}
    return [resolve_case(case, places) for case in cases]


def refs_for_chunks(engine: Engine, gold: dict[str, int]) -> list[GoldRef]:
    """A ref (doc_id, anchor, span, grade, chunk_id) for each relevant gold chunk id that is in the KB.

    A chunk with neither an anchor nor offsets (an imported chunk of a document without sections)
    gets no ref; unknown ids are skipped (the chunk ids stay the case's gold either way).
    """
    wanted = [chunk_id for chunk_id, grade in gold.items() if grade > 0]
    if not wanted:
        return []
    rows, _ = eval_repo.gold_rows(engine, wanted)
    refs: list[GoldRef] = []
    for chunk_id in wanted:
        row = rows.get(chunk_id)
        if row is None or (row.anchor is None and row.char_start is None):
            continue
        has_span = row.char_start is not None and row.char_end is not None and row.char_end > row.char_start
        refs.append(
            GoldRef(
                doc_id=row.doc_id,
                anchor=row.anchor,
                start=row.char_start if has_span else None,
                end=row.char_end if has_span else None,
                grade=gold[chunk_id],
                chunk_id=chunk_id,
            )
        )
    return refs
