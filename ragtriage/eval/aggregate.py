"""Means of per-case metrics, overall and per bucket (tag, intent type, difficulty, root cause, …)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field

__all__ = ["Aggregate", "aggregate_by_bucket", "mean_metrics", "overall"]


class Aggregate(BaseModel):
    """The mean of every metric over `cases` cases (a case missing a metric counts as 0)."""

    cases: int
    means: dict[str, float] = Field(default_factory=dict)


def mean_metrics(
    per_case: Iterable[Mapping[str, float]], metric_names: Sequence[str] | None = None
) -> dict[str, float]:
    """Arithmetic mean of each metric over the cases; empty rankings scored 0 count like any other case.

    `metric_names` fixes the metrics (and their order); by default it is every name seen, in first-seen order.
    """
    rows = list(per_case)
    names = (
        list(metric_names)
        if metric_names is not None
        else list(dict.fromkeys(n for row in rows for n in row))
    )
    if not rows:
        return {name: 0.0 for name in names}
    return {name: sum(float(row.get(name, 0.0)) for row in rows) / len(rows) for name in names}


def overall(
    per_case: Mapping[str, Mapping[str, float]], metric_names: Sequence[str] | None = None
) -> Aggregate:
    """The aggregate over every case of `{case_id: {metric: value}}`."""
    return Aggregate(cases=len(per_case), means=mean_metrics(per_case.values(), metric_names))


def aggregate_by_bucket(
    per_case: Mapping[str, Mapping[str, float]],
    buckets: Mapping[str, Iterable[str]],
    metric_names: Sequence[str] | None = None,
) -> dict[str, Aggregate]:
    """Per-bucket aggregates: a case counts in every bucket it is listed under, once per bucket.

    `buckets` maps case id → bucket names (e.g. `["tag:billing", "intent:howto", "difficulty:hard"]`);
    cases without metrics are ignored, cases without buckets only count overall. Buckets come back sorted.
    """
    names = (
        list(metric_names)
        if metric_names is not None
        else list(dict.fromkeys(n for row in per_case.values() for n in row))
    )
    members: dict[str, list[str]] = {}
    for case_id, bucket_names in buckets.items():
        if case_id not in per_case:
            continue
        for bucket in dict.fromkeys(bucket_names):
            members.setdefault(bucket, []).append(case_id)
    return {
        bucket: Aggregate(cases=len(case_ids), means=mean_metrics((per_case[c] for c in case_ids), names))
        for bucket, case_ids in sorted(members.items())
    }
