"""A stored run as the faces see it: its effective status (a `running` run whose process died is
`incomplete`), its aggregates recomputed from the stored per-case results, and its summary.

Reads only what the runner stored; `ragtriage.eval.runner` writes it (and re-exports these names).
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, Field

from ragtriage.config.profiles import DEFAULT_PROFILE
from ragtriage.eval.aggregate import aggregate_by_bucket, overall
from ragtriage.eval.metrics import refusal_accuracy
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.eval_tables import EvalRunRow

__all__ = ["RunSummary", "effective_status", "run_summary", "summarize_run"]


class RunSummary(BaseModel):
    """One run as the CLI reports it."""

    run_id: int
    name: str | None
    dataset: str
    dataset_version: int
    granularity: str
    status: str
    case_count: int
    cases_done: int
    cases_this_attempt: int = 0
    config_hash: str
    profile: str = "default"
    """Replay profile of the pipeline (`default`: the settings file as it is)."""
    kb_revision: int | None = None
    aggregates: dict[str, Any] = Field(default_factory=dict)
    bucket_aggregates: dict[str, Any] = Field(default_factory=dict)
    timings: dict[str, Any] = Field(default_factory=dict)
    workers: int = 1


def effective_status(run: EvalRunRow) -> str:
    """`running` only while its process is alive; a `running` run whose process died reads `incomplete`."""
    if run.status != "running":
        return run.status
    pid = (run.timings or {}).get("pid")
    if pid == os.getpid():
        return "running"
    try:
        if pid is not None:
            os.kill(int(pid), 0)
            return "running"
    except (OSError, ValueError):
        pass
    return "incomplete"


def summarize_run(workspace_engine: Any, run: EvalRunRow) -> dict[str, Any]:
    """Aggregates of a run from its stored results: ranking metrics, no-gold refusal, rank shift, buckets."""
    results = eval_store.run_case_results(workspace_engine, int(run.id or 0))
    ranking = {r.case_id: r.metrics for r in results if r.has_gold}
    no_gold = [r.refused for r in results if not r.has_gold]
    shifts = [s for r in results for s in (r.snapshot or {}).get("rank_shift", [])]
    moved = [s["shift"] for s in shifts if s.get("shift") is not None]
    aggregate = overall(ranking).model_dump()
    aggregate["no_gold"] = {
        "cases": len(no_gold),
        "refused": sum(no_gold),
        "refusal_accuracy": refusal_accuracy(no_gold),
    }
    aggregate["rank_shift"] = {
        "gold_pairs": len(moved),
        "mean_shift": sum(moved) / len(moved) if moved else None,
        "dropped_by_rerank": sum(1 for s in shifts if s.get("before") is not None and s.get("after") is None),
    }
    buckets = {r.case_id: r.buckets for r in results}
    by_bucket = {name: agg.model_dump() for name, agg in aggregate_by_bucket(ranking, buckets).items()}
    return {"aggregates": aggregate, "bucket_aggregates": by_bucket}


def run_summary(run: EvalRunRow, this_attempt: int = 0) -> RunSummary:
    """The stored run as the CLI and the API report it (status read through `effective_status`)."""
    return RunSummary(
        run_id=int(run.id or 0),
        name=run.name,
        dataset=run.dataset,
        dataset_version=run.dataset_version,
        granularity=run.granularity,
        status=effective_status(run),
        case_count=run.case_count,
        cases_done=run.cases_done,
        cases_this_attempt=this_attempt,
        config_hash=run.config_hash,
        profile=run.profile or DEFAULT_PROFILE,
        kb_revision=run.kb_revision,
        aggregates=run.aggregates,
        bucket_aggregates=run.bucket_aggregates,
        timings=run.timings,
        workers=run.workers,
    )
