"""Replay fidelity: how exactly a replay reproduces each stage production logged (pure).

For every logged stage (`bm25`, `dense`, `fused`, `reranked`, `final_context`) `compare_stage`
measures the replayed list against the logged one: exact match, overlap@k (k = the logged list's
length), extrapolated rank-biased overlap (p = 0.9) and the logged ids the KB does not know.
`logs.fidelity_reasons.explain_request` then gives every miss a documented reason when one is
known; `logs.fidelity_run` replays and stores; diagnosis reads `compare_traces`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from ragtriage.logs.schema import STAGE_NAMES
from ragtriage.pipeline.types import Trace
from ragtriage.replay.logged import STAGE_ROUTES, stage_diff
from ragtriage.replay.rank_agreement import DEFAULT_RBO_P, overlap_at_k, rbo_ext

#: Short stage names of the fidelity line (`bm25 3/3 · dense 3/3 · fused 3/3 · reranked 5/5 · final 2/2`).
STAGE_SHORT = {
    "bm25": "bm25",
    "dense": "dense",
    "fused": "fused",
    "reranked": "reranked",
    "final_context": "final",
}
ReasonKind = Literal["stale_index", "upstream", "rewrite", "k_differs", "route_without_counterpart"]
#: Reasons that are facts about production's data or shape, not defects of the replay.
DOCUMENTED_KINDS: frozenset[str] = frozenset({"stale_index", "upstream", "route_without_counterpart"})


class MissReason(BaseModel):
    """Why a replayed stage differs from the logged one."""

    kind: ReasonKind
    text: str


class StageFidelity(BaseModel):
    """One logged stage against its replay."""

    stage: str
    route: str | None = None
    """The replayed route compared with a logged `bm25`/`dense` list (e.g. `bm25_raw`)."""
    k: int = 0
    """Length of the logged list (overlap@k and the fidelity line count to it)."""
    replayed_count: int = 0
    overlap: int = 0
    """|logged ∩ replayed[:k]|."""
    exact: bool = True
    """The replayed list is the logged list: same chunks, same order, same length."""
    rbo: float = 1.0
    """Extrapolated rank-biased overlap, p = 0.9 (`rank_agreement.rbo_ext`)."""
    unknown: list[str] = Field(default_factory=list)
    """Logged ids that are not live chunks of the KB (deleted, older versions, or never seen)."""
    lost: list[str] = Field(default_factory=list)
    """Logged, not replayed (but for `expected_lost`)."""
    expected_lost: dict[str, list[str]] = Field(default_factory=dict)
    """Production route with no counterpart in the replay profile (`dense_2` …) → the logged ids of
    this stage only that route found and the replay lacks: expected missing, counted apart from `lost`."""
    gained: list[str] = Field(default_factory=list)
    """Replayed, not logged."""
    moved: int = 0
    """Chunks in both lists at different ranks."""
    reason: MissReason | None = None

    @property
    def overlap_share(self) -> float:
        """overlap / k (1.0 when both lists are empty, 0.0 when only the logged one is)."""
        if self.k == 0:
            return 1.0 if self.replayed_count == 0 else 0.0
        return self.overlap / self.k

    @property
    def unknown_share(self) -> float:
        """Share of the logged ids the KB does not know."""
        return len(self.unknown) / self.k if self.k else 0.0

    @property
    def cell(self) -> str:
        """`fused 2/3`; a `*` marks the same chunks in another order or count."""
        mark = "" if self.exact or self.overlap < self.k else "*"
        return f"{STAGE_SHORT.get(self.stage, self.stage)} {self.overlap}/{self.k}{mark}"

    def differs(self) -> str:
        """What differs, in one phrase (empty when exact)."""
        if self.exact:
            return ""
        parts = []
        if self.lost:
            parts.append(f"lost {', '.join(self.lost)}")
        for route, ids in self.expected_lost.items():
            parts.append(f"expected missing (only production route {route} found them) {', '.join(ids)}")
        if self.gained:
            parts.append(f"gained {', '.join(self.gained)}")
        if self.moved:
            parts.append(f"{self.moved} moved")
        if self.replayed_count != self.k and not self.lost and not self.gained:
            parts.append(f"{self.replayed_count} replayed vs {self.k} logged")
        return "; ".join(parts)


class RequestFidelity(BaseModel):
    """Every logged stage of one request against its replay, with the reasons for the misses."""

    request_id: str
    ts: datetime | None = None
    pipeline_version: str | None = None
    profile: str = "default"
    config_hash: str | None = None
    stages: list[StageFidelity] = Field(default_factory=list)
    stale_documents: dict[str, list[str]] = Field(default_factory=dict)
    """Document → logged ids of it the KB no longer has live (it has changed since)."""
    unknown_ids: list[str] = Field(default_factory=list)
    """Logged ids the KB has no row for and no document can be named for."""
    routes_without_counterpart: dict[str, int] = Field(default_factory=dict)
    """Production routes the replay profile cannot express (`dense_2` …) → chunks only they found
    that the replay lacks in some stage (expected missing; see `StageFidelity.expected_lost`)."""
    rewrite_differs: str | None = None
    """How the replayed rewrite differs from the logged one (None: same, or not logged)."""
    notes: list[str] = Field(default_factory=list)
    """Caveats of this replay, e.g. the default profile ran for lack of a mapping."""

    @property
    def line(self) -> str:
        """The fidelity line: `bm25 3/3 · dense 3/3 · fused 2/3 · reranked 5/5 · final 2/2`."""
        return " · ".join(stage.cell for stage in self.stages) or "no stage logged"

    @property
    def min_rbo(self) -> float:
        """The lowest RBO over the logged stages (1.0 when none was logged)."""
        return min((stage.rbo for stage in self.stages), default=1.0)

    @property
    def exact_stages(self) -> int:
        return sum(stage.exact for stage in self.stages)

    @property
    def unexplained(self) -> list[str]:
        """Stages that differ for no documented reason (fidelity bugs, or a profile that is wrong)."""
        return [
            s.stage
            for s in self.stages
            if not s.exact and (s.reason is None or s.reason.kind not in DOCUMENTED_KINDS)
        ]


def compare_stage(
    stage: str,
    logged: Sequence[str],
    replayed: Sequence[str],
    live_ids: Collection[str],
    *,
    route: str | None = None,
    p: float = DEFAULT_RBO_P,
) -> StageFidelity:
    """Measure one logged stage against its replay (lists de-duplicated by first occurrence)."""
    diff = stage_diff(logged, replayed, live_ids)
    k = len(diff.logged)
    return StageFidelity(
        stage=stage,
        route=route,
        k=k,
        replayed_count=len(diff.replayed),
        overlap=overlap_at_k(diff.logged, diff.replayed, k),
        exact=diff.logged == diff.replayed,
        rbo=round(rbo_ext(diff.logged, diff.replayed, p), 6),
        unknown=diff.unknown,
        lost=diff.lost,
        gained=diff.gained,
        moved=len(diff.rank_changes),
    )


def _replayed_route(trace: Trace, stage: str) -> str | None:
    preferred, kind = STAGE_ROUTES[stage]
    route = (
        trace.route(preferred)
        or next((r for r in trace.routes if r.kind == kind and r.hits), None)
        or next((r for r in trace.routes if r.kind == kind), None)
    )
    return route.name if route is not None else None


def compare_traces(logged: Trace, replayed: Trace, live_ids: Collection[str]) -> list[StageFidelity]:
    """Every stage a logged trace recorded against the replayed trace (the logged routes are the
    `bm25`/`dense` stages; an empty fused or reranked list counts as not logged; the further logged
    routes are `extra_routes`)."""
    logged_lists: dict[str, Sequence[str] | None] = {
        "bm25": _route_hits(logged, "bm25"),
        "dense": _route_hits(logged, "dense"),
        "fused": [h.chunk_id for h in logged.fused] or None,
        "reranked": [h.chunk_id for h in logged.reranked] or None,
        "final_context": list(logged.final),
    }
    first = {kind: next((r for r in logged.routes if r.kind == kind), None) for kind in ("bm25", "dense")}
    extra = {
        r.name: [h.chunk_id for h in r.hits]
        for r in logged.routes
        if r is not first.get(r.kind) and r.kind in first
    }
    return compare_request(logged_lists, replayed, live_ids, extra_routes=extra)


def _route_hits(trace: Trace, kind: str) -> list[str] | None:
    route = next((r for r in trace.routes if r.kind == kind), None)
    return None if route is None else [h.chunk_id for h in route.hits]


def compare_request(
    logged_lists: Mapping[str, Sequence[str] | None],
    replayed: Trace,
    live_ids: Collection[str],
    *,
    extra_routes: Mapping[str, Sequence[str]] | None = None,
) -> list[StageFidelity]:
    """Every logged stage of a request (`STAGE_NAMES` → logged ids, None = not logged) against its replay.

    `extra_routes`: the further routes production logged beyond the first of each kind (route name →
    hit ids, e.g. `dense_2`). Those the replay ran no route of that name for have no counterpart in
    the profile: in the fused and later stages, the chunks only they found are moved from `lost`
    to `expected_lost`."""
    from ragtriage.replay.logged import replayed_stage_ids

    stages = [
        compare_stage(
            stage,
            logged_lists[stage] or (),
            replayed_stage_ids(replayed, stage),
            live_ids,
            route=_replayed_route(replayed, stage) if stage in STAGE_ROUTES else None,
        )
        for stage in STAGE_NAMES
        if logged_lists.get(stage) is not None
    ]
    _set_expected_lost(stages, logged_lists, replayed, extra_routes or {})
    return stages


def _set_expected_lost(
    stages: Sequence[StageFidelity],
    logged_lists: Mapping[str, Sequence[str] | None],
    replayed: Trace,
    extra_routes: Mapping[str, Sequence[str]],
) -> None:
    # A chunk the first logged routes also found is the replay's to reproduce, not the extra route's.
    shown = {c for stage in STAGE_ROUTES for c in logged_lists.get(stage) or ()}
    owner: dict[str, str] = {}
    for name, ids in extra_routes.items():
        if replayed.route(name) is None:
            for chunk_id in ids:
                if chunk_id not in shown:
                    owner.setdefault(chunk_id, name)
    if not owner:
        return
    for stage in stages:
        if stage.stage in STAGE_ROUTES:
            continue
        for chunk_id in [c for c in stage.lost if c in owner]:
            stage.expected_lost.setdefault(owner[chunk_id], []).append(chunk_id)
        stage.lost = [c for c in stage.lost if c not in owner]
