"""The fidelity report: per-request results aggregated per stage, per route and per pipeline_version (pure).

Figures of one group of (request, stage) pairs:
- exact share: stages whose replayed list is the logged list (same chunks, order and length);
- mean overlap@k: mean of |logged ∩ replayed[:k]| / k, k = the logged list's length;
- mean RBO: mean extrapolated rank-biased overlap, p = 0.9 (Webber, Moffat & Zobel 2010);
- unknown share: logged ids that are not live chunks of the KB / all logged ids of the group;
- misses split into explained (a documented reason: a stale index, a stage upstream, or a further
  production route the profile has no counterpart for) and unexplained (a fidelity bug, or a
  profile that does not match production);
- chunks only a production route without counterpart found (`dense_2` …), counted apart as
  expected missing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from ragtriage.logs.schema import STAGE_NAMES
from ragtriage.replay.fidelity import DOCUMENTED_KINDS, RequestFidelity, StageFidelity
from ragtriage.replay.fidelity_reasons import counterpart_text


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
    """Document that changed since production indexed it → requests whose logged ids name it."""
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
    for result in results:
        stale.update(list(result.stale_documents))
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
