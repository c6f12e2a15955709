"""Gold journey: where each gold chunk stood at every route and stage of a trace, and where it dropped out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from ragtriage.pipeline.types import Trace

Stage = Literal["routes", "fused", "rerank_input", "reranked", "final"]
#: Stages in pipeline order; a gold chunk that is absent from a stage and every later one dropped out there.
STAGE_ORDER: tuple[Stage, ...] = ("routes", "fused", "rerank_input", "reranked", "final")


class GoldStages(BaseModel):
    """One gold chunk's rank (from 1, None = absent) at every route and stage of one trace."""

    chunk_id: str
    routes: dict[str, int | None] = Field(default_factory=dict)
    """Route name → rank of the gold chunk in that route's hits."""
    fused: int | None = None
    rerank_input: int | None = None
    """Position in the list handed to the reranker."""
    reranked: int | None = None
    final: int | None = None
    dropped_at: Stage | None = None
    """First recorded stage the chunk is absent from, never to come back; None when it reached the
    final context, or when it is in the last recorded stage of a request that logged no final context."""
    last_seen: Stage | None = None
    """Last stage the chunk was present at; None when no recorded stage had it."""

    def stage_rank(self, stage: Stage) -> int | None:
        """The chunk's rank at `stage` (for `routes`: the best rank over all routes)."""
        if stage == "routes":
            ranks = [rank for rank in self.routes.values() if rank is not None]
            return min(ranks) if ranks else None
        rank: int | None = getattr(self, stage)
        return rank


class GoldJourney(BaseModel):
    """The journeys of all gold chunks through one trace (the logged request or a replay)."""

    source: Literal["logged", "replay"]
    stages: list[Stage] = Field(default_factory=list)
    """Stages this trace recorded (a logged request may lack, e.g., the rerank input or the final context)."""
    not_logged: list[Stage] = Field(default_factory=list)
    """Stages production did not log at all (`Trace.not_logged`): their ranks say nothing, unlike a
    stage logged empty (a final context logged as [] is a real drop or refusal)."""
    route_names: list[str] = Field(default_factory=list)
    gold: list[GoldStages] = Field(default_factory=list)

    @property
    def reached_final(self) -> bool:
        """True when at least one gold chunk is in the final context."""
        return any(g.final is not None for g in self.gold)

    @property
    def final_logged(self) -> bool:
        """False when production logged no final context (e.g. no reranker span): where gold ended is unknown."""
        return "final" in self.stages

    @property
    def first_drop(self) -> Stage | None:
        """The furthest any gold chunk got decides: the drop stage of the best-travelled gold chunk
        (None when one reached the final context or the last stage a final-less log recorded)."""
        if not self.gold or any(g.dropped_at is None for g in self.gold):
            return None
        order = {stage: i for i, stage in enumerate(STAGE_ORDER)}
        drops = [g.dropped_at for g in self.gold if g.dropped_at is not None]
        if not drops:
            return None
        return max(drops, key=lambda stage: order[stage])

    def for_chunk(self, chunk_id: str) -> GoldStages | None:
        """The journey of one gold chunk, or None when it is not gold here."""
        return next((g for g in self.gold if g.chunk_id == chunk_id), None)


def unlogged_stages(trace: Trace) -> list[Stage]:
    """Stages the trace says production did not log (`Trace.not_logged`; an unlogged fused list
    also means no logged rerank input)."""
    names = set(trace.not_logged)
    if "fused" in names:
        names.add("rerank_input")
    return [stage for stage in STAGE_ORDER if stage in names]


def recorded_stages(trace: Trace) -> list[Stage]:
    """Stages the trace recorded: a stage counts when its list is non-empty or every later list is empty.

    An empty list followed by a non-empty later one means the stage was not logged (a real run
    cannot lose everything and then recover). The final context counts unless the trace marks it
    not logged (`Trace.not_logged`): logged empty, it is a real drop or refusal.
    """
    unlogged = set(unlogged_stages(trace))
    lists: dict[Stage, bool] = {
        "routes": bool(trace.routes),
        "fused": bool(trace.fused),
        "rerank_input": bool(trace.rerank_input),
        "reranked": bool(trace.reranked),
        "final": True,
    }
    filled: dict[Stage, bool] = {
        **lists,
        "routes": any(route.hits for route in trace.routes),
        "final": bool(trace.final),
    }
    stages: list[Stage] = []
    for i, stage in enumerate(STAGE_ORDER):
        later_filled = any(filled[later] for later in STAGE_ORDER[i + 1 :])
        if stage not in unlogged and lists[stage] and (filled[stage] or not later_filled):
            stages.append(stage)
    return stages


def _position(ids: Sequence[str], chunk_id: str) -> int | None:
    try:
        return list(ids).index(chunk_id) + 1
    except ValueError:
        return None


def gold_stages(trace: Trace, chunk_id: str, stages: Sequence[Stage]) -> GoldStages:
    """The ranks of one chunk in `trace` and the stage where it dropped out (only `stages` count)."""
    routes = {
        route.name: next((hit.rank for hit in route.hits if hit.chunk_id == chunk_id), None)
        for route in trace.routes
    }
    record = GoldStages(
        chunk_id=chunk_id,
        routes=routes,
        fused=next((hit.rank for hit in trace.fused if hit.chunk_id == chunk_id), None),
        rerank_input=_position(trace.rerank_input, chunk_id),
        reranked=next((hit.rank for hit in trace.reranked if hit.chunk_id == chunk_id), None),
        final=_position(trace.final, chunk_id),
    )
    place_drop(record, stages)
    return record


def place_drop(record: GoldStages, stages: Sequence[Stage]) -> None:
    """Set `record.last_seen` and `record.dropped_at` from its ranks at `stages` (the recorded
    stages, in `STAGE_ORDER`): the first stage after the last one it was present at, or the first
    stage when none had it; nothing dropped when it reached the final context."""
    present = [stage for stage in stages if record.stage_rank(stage) is not None]
    record.last_seen = present[-1] if present else None
    if record.final is None:
        if record.last_seen is None:
            record.dropped_at = stages[0] if stages else "routes"
        else:
            after = list(stages)[list(stages).index(record.last_seen) + 1 :]
            # Present at the last stage a final-less log recorded: not a drop, just not logged further.
            record.dropped_at = after[0] if after else None


def gold_journey(trace: Trace, gold: Sequence[str], source: Literal["logged", "replay"]) -> GoldJourney:
    """The gold journey through one trace: every gold chunk's ranks and the stage it dropped out at."""
    stages = recorded_stages(trace)
    return GoldJourney(
        source=source,
        stages=stages,
        not_logged=unlogged_stages(trace),
        route_names=[route.name for route in trace.routes],
        gold=[gold_stages(trace, chunk_id, stages) for chunk_id in dict.fromkeys(gold)],
    )
