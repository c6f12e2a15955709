"""Compare two stored runs case by case: metric deltas overall and per bucket, win/tie/loss,
a paired randomization test, and the cases that regressed (confirmed badcases first).

Only cases with gold in both runs are paired; every mean here is over those paired cases, so a
delta never mixes two different case sets.

Held out: nothing is fitted, so the check is whether the primary metric's delta holds beyond these
cases: its paired randomization test, and a split-half agreement (`eval.held_out.split_half`: the
paired cases split at random in two, seeded; does the delta keep its sign on both halves?). A
warning says when it does not, or when the delta is not significant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from ragtriage.eval.aggregate import aggregate_by_bucket, mean_metrics
from ragtriage.eval.held_out import SplitHalf, split_half
from ragtriage.eval.run_view import effective_status
from ragtriage.eval.significance import PairedTest, WinTieLoss, paired_randomization_test, win_tie_loss
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.eval_tables import EvalRunCaseRow, EvalRunRow
from ragtriage.wording import quoted

__all__ = [
    "DEFAULT_TEST_METRICS",
    "CaseDelta",
    "Comparison",
    "MetricDelta",
    "compare_runs",
    "confirmed_case_ids",
]

#: Metrics that get a win/tie/loss count and a significance test unless others are asked for.
DEFAULT_TEST_METRICS = ("mrr", "recall@5", "ndcg@10")


class MetricDelta(BaseModel):
    """Mean of one metric in run A and run B over the paired cases, and B − A."""

    metric: str
    a: float
    b: float
    delta: float


class MetricTest(BaseModel):
    """Win/tie/loss and the paired randomization test of one metric."""

    metric: str
    outcome: WinTieLoss
    test: PairedTest


class CaseDelta(BaseModel):
    """One case whose primary metric changed between the runs."""

    case_id: str
    a: float
    b: float
    delta: float
    confirmed: bool
    """True for a confirmed badcase (promoted from triage)."""
    request_id: str | None = None


class Comparison(BaseModel):
    """Run B against run A."""

    run_a: int
    run_b: int
    dataset_a: str
    dataset_b: str
    profile_a: str = "default"
    """Replay profile run A used (`eval run --profile`; `default`: the settings file as it is)."""
    profile_b: str = "default"
    config_hash_a: str = ""
    config_hash_b: str = ""
    warnings: list[str] = Field(default_factory=list)
    paired_cases: int
    only_in_a: list[str] = Field(default_factory=list)
    only_in_b: list[str] = Field(default_factory=list)
    primary_metric: str
    overall: list[MetricDelta] = Field(default_factory=list)
    buckets: dict[str, list[MetricDelta]] = Field(default_factory=dict)
    bucket_cases: dict[str, int] = Field(default_factory=dict)
    tests: list[MetricTest] = Field(default_factory=list)
    regressed: list[CaseDelta] = Field(default_factory=list)
    """Cases where B scores lower than A on the primary metric: confirmed badcases first, then by drop."""
    improved: int = 0
    split_half: SplitHalf | None = None
    """The primary metric's delta on two random halves of the paired cases, with the paired test
    and the warning (None with fewer than 2 paired cases)."""

    def delta_of(self, metric: str) -> MetricDelta | None:
        """The overall delta of `metric`, or None when the runs do not both have it."""
        return next((d for d in self.overall if d.metric == metric), None)


def confirmed_case_ids(engine: Engine, run: EvalRunRow) -> dict[str, str | None]:
    """Case id → source request id of the confirmed badcases (promoted cases) in a run's dataset version."""
    cases = eval_store.dataset_cases(engine, run.dataset, run.dataset_version)
    return {
        c.case.case_id: c.provenance.get("request_id")
        for c in cases
        if c.provenance.get("source") == "promote" or c.provenance.get("request_id")
    }


def _deltas(a: dict[str, float], b: dict[str, float], names: Sequence[str]) -> list[MetricDelta]:
    return [
        MetricDelta(metric=n, a=a.get(n, 0.0), b=b.get(n, 0.0), delta=b.get(n, 0.0) - a.get(n, 0.0))
        for n in names
    ]


def compare_runs(
    engine: Engine,
    run_a_ref: str | int,
    run_b_ref: str | int,
    *,
    primary_metric: str | None = None,
    test_metrics: Sequence[str] = DEFAULT_TEST_METRICS,
    permutations: int = 10_000,
    seed: int | None = 0,
) -> Comparison:
    """Compare run B with run A (B − A); `primary_metric` (default: the first test metric both have)
    orders the regressed cases.

    Raises:
        NotFoundError: an unknown run.
        ValueError: a metric neither run has.
    """
    run_a = eval_store.get_run(engine, run_a_ref)
    run_b = eval_store.get_run(engine, run_b_ref)
    # Metrics and buckets are all a comparison reads; the candidate snapshots stay on disk.
    results_a = {
        r.case_id: r for r in eval_store.run_case_results(engine, int(run_a.id or 0), snapshots=False)
    }
    results_b = {
        r.case_id: r for r in eval_store.run_case_results(engine, int(run_b.id or 0), snapshots=False)
    }
    warnings = _warnings(run_a, run_b)
    ranked_a = {k: r for k, r in results_a.items() if r.has_gold}
    ranked_b = {k: r for k, r in results_b.items() if r.has_gold}
    paired = sorted(set(ranked_a) & set(ranked_b))
    names = [n for n in _metric_names(ranked_a, paired) if any(n in ranked_b[c].metrics for c in paired)]
    tested = [m for m in test_metrics if m in names] or names[:1]
    primary = primary_metric or (tested[0] if tested else "mrr")
    if paired and primary not in names:
        raise ValueError(f"metric {quoted(primary)} is not in both runs; they have {', '.join(names)}")
    per_a = {c: ranked_a[c].metrics for c in paired}
    per_b = {c: ranked_b[c].metrics for c in paired}
    comparison = Comparison(
        run_a=int(run_a.id or 0),
        run_b=int(run_b.id or 0),
        dataset_a=f"{run_a.dataset}@{run_a.dataset_version}",
        dataset_b=f"{run_b.dataset}@{run_b.dataset_version}",
        profile_a=run_a.profile or "default",
        profile_b=run_b.profile or "default",
        config_hash_a=run_a.config_hash,
        config_hash_b=run_b.config_hash,
        warnings=warnings,
        paired_cases=len(paired),
        only_in_a=sorted(set(ranked_a) - set(ranked_b)),
        only_in_b=sorted(set(ranked_b) - set(ranked_a)),
        primary_metric=primary,
        overall=_deltas(mean_metrics(per_a.values(), names), mean_metrics(per_b.values(), names), names),
    )
    buckets = {c: list(ranked_b[c].buckets or ranked_a[c].buckets or []) for c in paired}
    by_a = aggregate_by_bucket(per_a, buckets, names)
    by_b = aggregate_by_bucket(per_b, buckets, names)
    for bucket, aggregate in by_a.items():
        comparison.buckets[bucket] = _deltas(aggregate.means, by_b[bucket].means, names)
        comparison.bucket_cases[bucket] = aggregate.cases
    for metric in tested:
        scores_a = [float(per_a[c].get(metric, 0.0)) for c in paired]
        scores_b = [float(per_b[c].get(metric, 0.0)) for c in paired]
        test = paired_randomization_test(scores_a, scores_b, permutations=permutations, seed=seed)
        comparison.tests.append(
            MetricTest(metric=metric, outcome=win_tie_loss(scores_a, scores_b), test=test)
        )
    if paired:
        primary_test = next((t.test for t in comparison.tests if t.metric == primary), None)
        comparison.split_half = split_half(
            primary,
            [float(per_a[c].get(primary, 0.0)) for c in paired],
            [float(per_b[c].get(primary, 0.0)) for c in paired],
            seed=seed or 0,
            test=primary_test,
        )
    confirmed = confirmed_case_ids(engine, run_b)
    if (run_a.dataset, run_a.dataset_version) != (run_b.dataset, run_b.dataset_version):
        confirmed |= confirmed_case_ids(engine, run_a)  # the same version would give the same cases
    comparison.regressed, comparison.improved = _case_changes(per_a, per_b, paired, primary, confirmed)
    return comparison


def _metric_names(results: dict[str, EvalRunCaseRow], paired: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(name for c in paired for name in results[c].metrics))


def _case_changes(
    per_a: dict[str, dict[str, Any]],
    per_b: dict[str, dict[str, Any]],
    paired: Sequence[str],
    metric: str,
    confirmed: dict[str, str | None],
) -> tuple[list[CaseDelta], int]:
    regressed: list[CaseDelta] = []
    improved = 0
    for case_id in paired:
        a, b = float(per_a[case_id].get(metric, 0.0)), float(per_b[case_id].get(metric, 0.0))
        if b > a + 1e-9:
            improved += 1
        elif b < a - 1e-9:
            regressed.append(
                CaseDelta(
                    case_id=case_id,
                    a=a,
                    b=b,
                    delta=b - a,
                    confirmed=case_id in confirmed,
                    request_id=confirmed.get(case_id),
                )
            )
    regressed.sort(key=lambda d: (not d.confirmed, d.delta, d.case_id))
    return regressed, improved


def _warnings(run_a: EvalRunRow, run_b: EvalRunRow) -> list[str]:
    warnings = []
    if (run_a.dataset, run_a.dataset_version) != (run_b.dataset, run_b.dataset_version):
        warnings.append(
            f"different eval sets: run {run_a.id} used {run_a.dataset}@{run_a.dataset_version}, "
            f"run {run_b.id} "
            f"{run_b.dataset}@{run_b.dataset_version}; only cases present in both are compared"
        )
    if run_a.granularity != run_b.granularity:
        warnings.append(f"granularity differs: {run_a.granularity} vs {run_b.granularity}")
    for run in (run_a, run_b):
        status = effective_status(run)
        if status != "complete":
            warnings.append(f"run {run.id} is {status} ({run.cases_done}/{run.case_count} cases)")
    if run_a.kb_revision != run_b.kb_revision:
        warnings.append(f"KB revision differs: {run_a.kb_revision} vs {run_b.kb_revision}")
    return warnings
