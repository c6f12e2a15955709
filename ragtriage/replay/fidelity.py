"""Replay fidelity (pure): how exactly a replay reproduces each stage production logged, why it
differs where it does, and the report over many requests.

For every logged stage (`bm25`, `dense`, `fused`, `reranked`, `final_context`) `compare_stage`
measures the replayed list against the logged one: exact match, overlap@k (k = the logged list's
length), extrapolated rank-biased overlap (p = 0.9) and the logged ids the KB does not know.
`explain_request` then gives every miss a documented reason when one is known: a stale index, a
different rewrite, a k that differs, a stage upstream that already differed, or a further production
route such as `dense_2` the profile has no counterpart for; a miss without one is a fidelity bug
(`RequestFidelity.unexplained`). `summarize` aggregates per stage, per route and per
pipeline_version:
- exact share: stages whose replayed list is the logged list (same chunks, order and length);
- mean overlap@k: mean of |logged ∩ replayed[:k]| / k;
- mean RBO: mean extrapolated rank-biased overlap, p = 0.9 (Webber, Moffat & Zobel 2010; `rbo_ext`);
- unknown share: logged ids that are not live chunks of the KB / all logged ids of the group;
- misses split into explained (a documented reason) and unexplained;
- chunks only a production route without counterpart found, counted apart as expected missing.
`replay.fidelity_run` replays and stores; diagnosis reads `compare_traces`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, Field

from ragtriage.config.settings import RetrievalSettings, RouteName
from ragtriage.logs.schema import STAGE_NAMES
from ragtriage.pipeline.types import Trace
from ragtriage.replay.logged import STAGE_ROUTES, replayed_route, replayed_stage_ids, stage_diff

#: The persistence of RBO used by the fidelity report: the top 10 ranks carry about 86% of the weight.
DEFAULT_RBO_P = 0.9


def _dedup(ranked: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


def overlap_at_k(logged: Sequence[str], replayed: Sequence[str], k: int) -> int:
    """|logged[:k] ∩ replayed[:k]|: how many of the top k items both lists share (order ignored).

    Raises:
        ValueError: k < 0.
    """
    if k < 0:
        raise ValueError(f"k must be zero or more, got {k}")
    return len(set(_dedup(logged)[:k]) & set(_dedup(replayed)[:k]))


def rbo_ext(first: Sequence[str], second: Sequence[str], p: float = DEFAULT_RBO_P) -> float:
    """Extrapolated rank-biased overlap RBO_ext of two finite, possibly uneven rankings, in [0, 1].

    Webber, Moffat & Zobel (2010), "A similarity measure for indefinite rankings", ACM TOIS 28(4),
    Eq. (32). With S the shorter list (length s), L the longer (length l) and X_d the overlap of
    their prefixes of depth d (for d > s, all of S against L[:d]):

        RBO_ext = (1-p)/p · [ Σ_{d=1..l} (X_d/d)·p^d + Σ_{d=s+1..l} X_s·(d-s)/(s·d)·p^d ]
                  + [ (X_l - X_s)/l + X_s/s ] · p^l

    This is the point estimate that assumes the agreement seen at the end of the lists continues
    below them (not the lower bound RBO_min, not the residual RBO_res). Identical lists score 1.0;
    two empty lists score 1.0; one empty list against a non-empty one scores 0.0.

    Raises:
        ValueError: p outside (0, 1).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBO persistence p must be in (0, 1), got {p}")
    a, b = _dedup(first), _dedup(second)
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, l_ = len(short), len(long_)
    seen_short: set[str] = set()
    seen_long: set[str] = set()
    overlap = 0
    overlaps = [0] * (l_ + 1)
    """overlaps[d] = X_d, the overlap at depth d (1-based)."""
    for depth in range(1, l_ + 1):
        item_long = long_[depth - 1]
        if depth <= s:
            item_short = short[depth - 1]
            if item_short == item_long:
                overlap += 1
            else:
                overlap += item_short in seen_long
                overlap += item_long in seen_short
            seen_short.add(item_short)
        else:
            overlap += item_long in seen_short
        seen_long.add(item_long)
        overlaps[depth] = overlap
    x_s, x_l = overlaps[s], overlaps[l_]
    total = sum(overlaps[d] / d * p**d for d in range(1, l_ + 1))
    total += sum(x_s * (d - s) / (s * d) * p**d for d in range(s + 1, l_ + 1))
    score = (1 - p) / p * total + ((x_l - x_s) / l_ + x_s / s) * p**l_
    # Floating-point sums can land a hair outside [0, 1].
    return min(1.0, max(0.0, score))


#: Short stage names of the fidelity line (`bm25 3/3 · dense 3/3 · fused 3/3 · reranked 5/5 · final 2/2`).
STAGE_SHORT = {**{stage: stage for stage in STAGE_NAMES}, "final_context": "final"}
ReasonKind = Literal[
    "stale_index", "chunk_changed", "upstream", "rewrite", "k_differs", "route_without_counterpart"
]
#: Reasons that are facts about production's data or shape, not defects of the replay.
DOCUMENTED_KINDS: frozenset[str] = frozenset(
    {"stale_index", "chunk_changed", "upstream", "route_without_counterpart"}
)


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
    """Extrapolated rank-biased overlap, p = 0.9 (`rbo_ext`)."""
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


class ChunkChange(BaseModel):
    """A chunk the KB still holds under its logged id whose text changed after the request."""

    doc_id: str
    updated_at: datetime | None = None
    """When the KB last wrote the chunk (UTC)."""
    content_differs: bool = False
    """True: production logged a `document.content` whose fingerprint is not the KB's text now.
    False: no content was logged, but the KB holds a newer version written after the request."""

    def phrase(self, chunk_id: str) -> str:
        """`chunk c1 of document D changed after the request (updated_at 2026-12-01 08:00 UTC; the
        logged text is not the KB's)`."""
        when = f"updated_at {self.updated_at:%Y-%m-%d %H:%M} UTC" if self.updated_at else "no updated_at"
        how = "the logged text is not the KB's" if self.content_differs else "the KB holds a newer version"
        return f"chunk {chunk_id} of document {self.doc_id} changed after the request ({when}; {how})"


class RequestFidelity(BaseModel):
    """Every logged stage of one request against its replay, with the reasons for the misses."""

    request_id: str
    ts: datetime | None = None
    pipeline_version: str | None = None
    profile: str = "default"
    config_hash: str | None = None
    stages: list[StageFidelity] = Field(default_factory=list)
    stale_documents: dict[str, list[str]] = Field(default_factory=dict)
    """Document → logged ids of it the KB no longer has live (it has changed since): named by the
    KB's own history (a deleted row, a `doc_id#hash` id) or by what production logged of the chunk
    (`stale_named_by`)."""
    stale_named_by: dict[str, str] = Field(default_factory=dict)
    """Stale document → what named it when the KB's history could not: `logged document id`,
    `logged source` or `logged content` (`logged_chunks` of the stored request)."""
    changed_chunks: dict[str, ChunkChange] = Field(default_factory=dict)
    """Chunk id (logged or replayed; kept id, old text) → how it changed after the request."""
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
    stages = [
        compare_stage(
            stage,
            logged_lists[stage] or (),
            replayed_stage_ids(replayed, stage),
            live_ids,
            route=_route_name(replayed, stage),
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


def _route_name(trace: Trace, stage: str) -> str | None:
    route = replayed_route(trace, stage) if stage in STAGE_ROUTES else None
    return route.name if route is not None else None


# ---------------------------------------------------------------- reasons

#: Stages whose replayed list is computed from each stage's list (a miss there explains one here).
UPSTREAM: dict[str, tuple[str, ...]] = {
    "bm25": (),
    "dense": (),
    "fused": ("bm25", "dense"),
    "reranked": ("fused", "bm25", "dense"),
    "final_context": ("reranked", "fused", "bm25", "dense"),
}


def counterpart_text(routes: Collection[str]) -> str:
    """`production route dense_2 has no counterpart in the replay profile: its chunks are expected to
    be missing from the replay`."""
    names = ", ".join(sorted(routes))
    noun, verb, its = ("route", "has", "its") if len(routes) == 1 else ("routes", "have", "their")
    return (
        f"production {noun} {names} {verb} no counterpart in the replay profile: {its} chunks are "
        "expected to be missing from the replay"
    )


def _stale_text(docs: Sequence[str], own: bool, version: str | None, named_by: Mapping[str, str]) -> str:
    names = ", ".join(f"{d} (named by the {named_by[d]})" if d in named_by else d for d in docs)
    noun = "document" if len(docs) == 1 else "documents"
    verb = "has" if len(docs) == 1 else "have"
    where = "" if own else f" (seen in other requests of {version or 'this run'})"
    return f"production served a stale index: {noun} {names} {verb} changed since{where}"


def _changed_text(changes: Mapping[str, ChunkChange]) -> str:
    return "; ".join(change.phrase(chunk_id) for chunk_id, change in sorted(changes.items()))


def explain_request(
    fidelity: RequestFidelity,
    *,
    replayed_docs: Mapping[str, str | None],
    stale_docs_of_version: Collection[str],
    logged_scores: Mapping[str, Mapping[str, float]] | None = None,
    replayed_scores: Mapping[str, Mapping[str, float]] | None = None,
    replayed_limits: Mapping[str, int] | None = None,
    members: Mapping[str, Collection[str]] | None = None,
) -> RequestFidelity:
    """Give every stage that differs a reason when one is known (in place; returns `fidelity`).

    - `chunk_changed`: a chunk of the stage's logged or replayed list (`members`: stage → those
      ids) is in `fidelity.changed_chunks`: its text changed after the request, so its scores did;
    - `stale_index`: the stage's lists name chunks of a document that changed since production
      indexed it (its logged ids are old versions, or the replay finds the new ones); or, for BM25,
      the same chunks score differently while the index that served the version was stale or a
      chunk had changed (BM25 scores depend on corpus-wide statistics);
    - `upstream`: a stage it is computed from already differed for a documented reason;
    - `rewrite`: the replayed rewrite is not the logged one (the profile does not reproduce it);
    - `k_differs`: same chunks, but the replay keeps another number of them (the profile's k),
      or the profile runs no route of a logged route's kind. A replayed list shorter than both the
      logged one and its limit in `replayed_limits` (`stage_limits`) was not cut by the profile:
      the replay ran out of matches, which no k explains.

    `replayed_docs` maps replayed chunk ids to their document; `*_scores` map stage → chunk → score.
    """
    own_stale = set(fidelity.stale_documents)
    stale = own_stale | set(stale_docs_of_version)
    changed_docs = {c.doc_id for c in fidelity.changed_chunks.values()}
    named_by = fidelity.stale_named_by
    by_stage = {s.stage: s for s in fidelity.stages}
    for stage in fidelity.stages:
        if stage.exact:
            continue
        ids = [*stage.lost, *stage.gained, *stage.unknown]
        touched = sorted({d for c in ids if (d := _doc_of(c, fidelity, replayed_docs)) in stale})
        # A logged id no document can be named for is not explained by another document's change.
        foreign = [c for c in stage.lost if c in fidelity.unknown_ids]
        if touched and not foreign:
            own = bool(own_stale.intersection(touched))
            stage.reason = MissReason(
                kind="stale_index", text=_stale_text(touched, own, fidelity.pipeline_version, named_by)
            )
            continue
        in_stage = set(ids) | set((members or {}).get(stage.stage, ()))
        changed = {c: change for c, change in fidelity.changed_chunks.items() if c in in_stage}
        if changed and not foreign:
            stage.reason = MissReason(kind="chunk_changed", text=_changed_text(changed))
            continue
        upstream = next(
            (
                by_stage[u]
                for u in UPSTREAM[stage.stage]
                if u in by_stage
                and by_stage[u].reason is not None
                and by_stage[u].reason.kind in DOCUMENTED_KINDS  # type: ignore[union-attr]
            ),
            None,
        )
        if upstream is not None and upstream.reason is not None:
            # Name the first stage that differed, not the chain between.
            text = upstream.reason.text
            if upstream.reason.kind != "upstream":
                text = f"follows from {STAGE_SHORT[upstream.stage]}: {text}"
            stage.reason = MissReason(kind="upstream", text=text)
            continue
        if stage.expected_lost and not stage.lost:
            # Every logged chunk the replay lacks came from a route the profile cannot express; the
            # chunks that filled their places and the ranks that moved follow from that.
            stage.reason = MissReason(
                kind="route_without_counterpart", text=counterpart_text(stage.expected_lost)
            )
            continue
        if (
            stage.stage == "bm25"
            and (stale or changed_docs)
            and _scores_differ(stage, logged_scores, replayed_scores)
        ):
            where = _stale_text(sorted(stale), bool(own_stale), fidelity.pipeline_version, named_by)
            if not stale:
                where = _changed_text(fidelity.changed_chunks)
            stage.reason = MissReason(
                kind="stale_index",
                text=f"{where}: the same chunks score differently because BM25 statistics are corpus-wide",
            )
            continue
        # Fused and later stages fuse the rewritten routes; a logged route may be a rewritten one.
        on_rewrite = stage.stage not in STAGE_ROUTES or not (stage.route or "").endswith("_raw")
        if fidelity.rewrite_differs is not None and on_rewrite:
            stage.reason = MissReason(
                kind="rewrite", text=f"the replayed rewrite differs: {fidelity.rewrite_differs}"
            )
            continue
        if stage.stage in STAGE_ROUTES and stage.route is None:
            # The replay ran no route of this kind at all (e.g. a dense-only profile).
            stage.reason = MissReason(
                kind="k_differs",
                text=f"the profile runs no {stage.stage} route where production logged {stage.k}",
            )
            continue
        limit = _limit_of(stage, replayed_limits or {})
        if (
            stage.replayed_count != stage.k
            and stage.overlap == min(stage.k, stage.replayed_count)
            and not stage.moved
            and (limit is None or stage.replayed_count >= min(stage.k, limit))
        ):
            # One list is the other cut shorter: the profile keeps another number of chunks.
            text = f"the profile keeps {stage.replayed_count} where production kept {stage.k}"
            if stage.stage == "fused" and stage.replayed_count > stage.k:
                text += f" (production cut its fused list: [retrieval.fusion] keep = {stage.k})"
            stage.reason = MissReason(kind="k_differs", text=text)
    return fidelity


def stage_limits(retrieval: RetrievalSettings) -> dict[str, int]:
    """The most chunks a replay with these settings keeps where a logged list is compared: each
    route's k by route name (`[retrieval] route_k`, else `bm25_k` / `dense_k`) and `fused`
    (`[retrieval.fusion] keep`, else the candidate pool)."""
    limits = {route: retrieval.hits(route) for route in get_args(RouteName)}
    limits["fused"] = retrieval.fusion.keep or retrieval.candidate_pool
    return limits


def _limit_of(stage: StageFidelity, limits: Mapping[str, int]) -> int | None:
    if stage.stage in STAGE_ROUTES:
        route = stage.route or ""
        return limits.get("dense_sub" if route.startswith("dense_sub") else route)
    return limits.get(stage.stage)


def _doc_of(chunk_id: str, fidelity: RequestFidelity, replayed_docs: Mapping[str, str | None]) -> str | None:
    for doc_id, ids in fidelity.stale_documents.items():
        if chunk_id in ids:
            return doc_id
    return replayed_docs.get(chunk_id)


def _scores_differ(
    stage: StageFidelity,
    logged_scores: Mapping[str, Mapping[str, float]] | None,
    replayed_scores: Mapping[str, Mapping[str, float]] | None,
) -> bool:
    """True when a chunk in both lists has a logged score and a different replayed one."""
    logged = (logged_scores or {}).get(stage.stage, {})
    replayed = (replayed_scores or {}).get(stage.stage, {})
    shared = [c for c in logged if c in replayed]
    return any(abs(logged[c] - replayed[c]) > 1e-4 * max(1.0, abs(logged[c])) for c in shared)


# ---------------------------------------------------------------- report


class StageSummary(BaseModel):
    """One group's figures (a stage, optionally narrowed to a pipeline_version or a route)."""

    stage: str
    pipeline_version: str | None = None
    route: str | None = None
    stages: int = 0
    """(request, stage) pairs in the group."""
    exact_share: float = 0.0
    mean_overlap: float = 0.0
    mean_rbo: float = 0.0
    unknown_share: float = 0.0
    explained_misses: int = 0
    unexplained_misses: int = 0


class RouteWithoutCounterpart(BaseModel):
    """A production route the replay profile cannot express (`dense_2` …)."""

    requests: int = 0
    """Requests that logged it and lack some chunk only it found."""
    expected_missing: int = 0
    """Chunks only it found that the replay lacks, summed over those requests (counted apart
    from the lost chunks)."""


class FidelityReport(BaseModel):
    """`ragtriage fidelity --json`."""

    selected: int = 0
    """Requests the filters selected."""
    replayed: int = 0
    """Requests replayed and compared (fewer than selected only when stopped)."""
    stored: int = 0
    by_stage: list[StageSummary] = Field(default_factory=list)
    by_version: list[StageSummary] = Field(default_factory=list)
    by_route: list[StageSummary] = Field(default_factory=list)
    """The logged bm25/dense stages per replayed route they were compared with."""
    profiles: dict[str, int] = Field(default_factory=dict)
    """Profile → requests it replayed."""
    reasons: dict[str, int] = Field(default_factory=dict)
    """Documented reason → stages it explains."""
    routes_without_counterpart: dict[str, RouteWithoutCounterpart] = Field(default_factory=dict)
    """Production route with no counterpart in the replay profiles → its expected-missing chunks."""
    stale_documents: dict[str, int] = Field(default_factory=dict)
    """Document that changed since production indexed it → requests that name it: logged ids the KB
    no longer has live, or chunks whose text changed after the request."""
    stale_evidence: dict[str, str] = Field(default_factory=dict)
    """Stale document → how it is known, in one phrase (its ids are gone from the KB, named by the
    KB's history or by what production logged; or its chunks' text changed, and when)."""
    faithful_requests: int = 0
    """Requests with every logged stage reproduced exactly."""
    unexplained_requests: int = 0
    """Requests with at least one stage that differs for no documented reason."""
    least_faithful: list[RequestFidelity] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    replay_seconds: float = 0.0
    seconds: float = 0.0


def _summary(stage: str, items: Sequence[StageFidelity], **key: str | None) -> StageSummary:
    count = len(items)
    logged_ids = sum(s.k for s in items)
    misses = [s for s in items if not s.exact]
    explained = sum(1 for s in misses if s.reason is not None and s.reason.kind in DOCUMENTED_KINDS)
    return StageSummary(
        stage=stage,
        stages=count,
        exact_share=round(sum(s.exact for s in items) / count, 4) if count else 0.0,
        mean_overlap=round(sum(s.overlap_share for s in items) / count, 4) if count else 0.0,
        mean_rbo=round(sum(s.rbo for s in items) / count, 4) if count else 0.0,
        unknown_share=round(sum(len(s.unknown) for s in items) / logged_ids, 4) if logged_ids else 0.0,
        explained_misses=explained,
        unexplained_misses=len(misses) - explained,
        **key,
    )


def _grouped(
    results: Sequence[RequestFidelity], key: Callable[[RequestFidelity, StageFidelity], str | None]
) -> dict[tuple[str | None, str], list[StageFidelity]]:
    groups: dict[tuple[str | None, str], list[StageFidelity]] = {}
    for result in results:
        for stage in result.stages:
            groups.setdefault((key(result, stage), stage.stage), []).append(stage)
    return groups


def _stage_order(stage: str) -> int:
    return STAGE_NAMES.index(stage) if stage in STAGE_NAMES else len(STAGE_NAMES)


def least_faithful(results: Sequence[RequestFidelity], limit: int) -> list[RequestFidelity]:
    """Requests with a miss: unexplained misses first, then the lowest RBO, then request_id."""
    missed = [r for r in results if r.exact_stages < len(r.stages)]
    return sorted(missed, key=lambda r: (-len(r.unexplained), r.min_rbo, r.request_id))[:limit]


def summarize(results: Sequence[RequestFidelity], *, least: int = 10) -> FidelityReport:
    """Aggregate per-request results into the report."""
    by_stage = _grouped(results, lambda _r, _s: None)
    by_version = _grouped(results, lambda r, _s: r.pipeline_version or "-")
    by_route = _grouped(results, lambda _r, s: s.route)
    reasons: Counter[str] = Counter()
    stale: Counter[str] = Counter()
    without: dict[str, RouteWithoutCounterpart] = {}
    evidence: dict[str, str] = {}
    for result in results:
        changed_docs = {c.doc_id for c in result.changed_chunks.values()}
        stale.update(set(result.stale_documents) | changed_docs)
        for doc_id in result.stale_documents:
            by = result.stale_named_by.get(doc_id, "KB's history")
            evidence.setdefault(
                doc_id, f"served in an older version: logged ids gone from the KB, named by the {by}"
            )
        for chunk_id, change in sorted(result.changed_chunks.items()):
            evidence.setdefault(change.doc_id, change.phrase(chunk_id))
        for route, count in result.routes_without_counterpart.items():
            entry = without.setdefault(route, RouteWithoutCounterpart())
            entry.requests += 1
            entry.expected_missing += count
        for stage in result.stages:
            if not stage.exact and stage.reason is not None:
                reasons[stage.reason.text] += 1
    report = FidelityReport(
        replayed=len(results),
        by_stage=[
            _summary(stage, items)
            for (_, stage), items in sorted(by_stage.items(), key=lambda kv: _stage_order(kv[0][1]))
        ],
        by_version=[
            _summary(stage, items, pipeline_version=version)
            for (version, stage), items in sorted(
                by_version.items(), key=lambda kv: (kv[0][0] or "", _stage_order(kv[0][1]))
            )
        ],
        by_route=[
            _summary(stage, items, route=route)
            for (route, stage), items in sorted(
                by_route.items(), key=lambda kv: (_stage_order(kv[0][1]), kv[0][0] or "")
            )
            if route is not None
        ],
        profiles=dict(Counter(r.profile for r in results).most_common()),
        reasons=dict(reasons.most_common()),
        routes_without_counterpart=dict(sorted(without.items())),
        stale_documents=dict(stale.most_common()),
        stale_evidence={doc_id: evidence[doc_id] for doc_id, _ in stale.most_common()},
        faithful_requests=sum(1 for r in results if r.exact_stages == len(r.stages)),
        unexplained_requests=sum(1 for r in results if r.unexplained),
        least_faithful=least_faithful(results, least),
    )
    for route, entry in report.routes_without_counterpart.items():
        report.notes.append(
            f"{counterpart_text([route])} ({entry.expected_missing:,} chunks in "
            f"{entry.requests:,} requests, counted apart as expected missing, not as lost)"
        )
    if not results:
        report.notes.append(
            "no logged request matched: widen --since, check --version against `ragtriage monitor --by "
            "version`, "
            "or ingest logs with `ragtriage logs ingest`"
        )
    return report
