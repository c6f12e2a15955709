"""Ablation: the standard pipeline configurations on one dataset, as stored runs and one table.

| config | routes                                      | rerank |
|--------|---------------------------------------------|--------|
| A      | raw BM25                                    | off    |
| B      | raw dense                                   | off    |
| C      | raw BM25 + raw dense, RRF                   | off    |
| D      | rewritten BM25 + rewritten dense, RRF       | off    |
| E      | raw + rewritten (+ sub-queries), RRF        | off    |
| F      | E + rerank                                  | as configured |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ragtriage.eval.runner import BatchPipeline, run_eval
from ragtriage.pipeline.types import (
    ROUTE_BM25_RAW,
    ROUTE_BM25_REWRITTEN,
    ROUTE_DENSE_RAW,
    ROUTE_DENSE_REWRITTEN,
    RunOptions,
)
from ragtriage.store import eval_repo as eval_store

if TYPE_CHECKING:
    from ragtriage.workspace import Workspace

__all__ = ["ABLATION_CONFIGS", "ABLATION_METRICS", "AblationRow", "AblationTable", "run_ablation"]

_ALL_ROUTES = [ROUTE_BM25_RAW, ROUTE_DENSE_RAW, ROUTE_BM25_REWRITTEN, ROUTE_DENSE_REWRITTEN, "dense_sub"]

#: Config letter → (description, options).
ABLATION_CONFIGS: dict[str, tuple[str, RunOptions]] = {
    "A": ("raw BM25", RunOptions(routes=[ROUTE_BM25_RAW], rerank="off")),
    "B": ("raw dense", RunOptions(routes=[ROUTE_DENSE_RAW], rerank="off")),
    "C": ("raw BM25 + dense, RRF", RunOptions(routes=[ROUTE_BM25_RAW, ROUTE_DENSE_RAW], rerank="off")),
    "D": ("rewritten only", RunOptions(routes=[ROUTE_BM25_REWRITTEN, ROUTE_DENSE_REWRITTEN], rerank="off")),
    "E": ("raw + rewritten, RRF", RunOptions(routes=list(_ALL_ROUTES), rerank="off")),
    "F": ("E + rerank", RunOptions(routes=list(_ALL_ROUTES))),
}

ABLATION_METRICS = ("recall@5", "recall@10", "recall@20", "mrr")


class AblationRow(BaseModel):
    """One configuration's run and its metrics, with deltas against the reference configuration."""

    config: str
    description: str
    run_id: int
    cases: int
    metrics: dict[str, float] = Field(default_factory=dict)
    deltas: dict[str, float] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class AblationTable(BaseModel):
    """All configurations on one dataset version."""

    dataset: str
    dataset_version: int
    reference: str
    """The config the deltas are against (A, or C when asked)."""
    rows: list[AblationRow] = Field(default_factory=list)


def _skipped_rewritten_routes(engine: Any, run_id: int) -> int:
    """Cases where the rewrite equalled the raw query, so the pipeline skipped the rewritten routes."""
    results = eval_store.run_case_results(engine, run_id)
    return sum(1 for r in results if (r.snapshot or {}).get("skipped_routes"))


def run_ablation(
    workspace: Workspace,
    dataset: str = eval_store.DEFAULT_DATASET,
    *,
    configs: Sequence[str] = tuple(ABLATION_CONFIGS),
    reference: str = "A",
    workers: int = 1,
    on_progress: Callable[[str, int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    pipeline: BatchPipeline | None = None,
) -> AblationTable:
    """Run each configuration as a stored run named `ablate:<letter>` and tabulate Recall@5/10/20 and MRR.

    Raises:
        ValueError: an unknown config letter, or a reference that is not among `configs`.
    """
    unknown = [c for c in configs if c not in ABLATION_CONFIGS]
    if unknown or reference not in configs:
        raise ValueError(
            f"configs must be among {', '.join(ABLATION_CONFIGS)} and include the reference {reference}"
        )
    version = eval_store.dataset_version(workspace.engine, dataset)
    table = AblationTable(dataset=dataset, dataset_version=version, reference=reference)
    for letter in configs:
        description, options = ABLATION_CONFIGS[letter]

        def progress(done: int, total: int, letter: str = letter) -> None:
            if on_progress is not None:
                on_progress(letter, done, total)

        summary = run_eval(
            workspace,
            dataset,
            name=f"ablate:{letter}",
            options=options,
            workers=workers,
            on_progress=progress,
            should_stop=should_stop,
            pipeline=pipeline,
        )
        means = (summary.aggregates or {}).get("means", {})
        row = AblationRow(
            config=letter,
            description=description,
            run_id=summary.run_id,
            cases=int((summary.aggregates or {}).get("cases", 0)),
            metrics={m: float(means.get(m, 0.0)) for m in ABLATION_METRICS},
        )
        if summary.status != "complete":
            row.notes.append(f"run {summary.run_id} is {summary.status}")
        if letter == "D":
            # The pipeline skips a rewritten route whose text equals the raw query (it would only
            # duplicate the raw route); with the raw routes off such a case retrieves nothing.
            skipped = _skipped_rewritten_routes(workspace.engine, summary.run_id)
            if skipped:
                row.notes.append(
                    f"{skipped} cases: rewrite left the query unchanged, rewritten routes skipped"
                )
        table.rows.append(row)
        if should_stop is not None and should_stop():
            break
    base = next((r for r in table.rows if r.config == reference), None)
    for row in table.rows:
        if base is not None:
            row.deltas = {m: row.metrics[m] - base.metrics[m] for m in ABLATION_METRICS}
    return table
