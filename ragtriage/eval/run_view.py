"""Stored runs as plain data for the faces: the run list, one run with its per-case results (paged),
each case's candidate snapshot and its gold journey; a run's effective status (a `running` run whose
process died is `incomplete`), its aggregates recomputed from the stored per-case results, and which
run a command works on (the one named, else the newest complete run of a dataset).

`eval runs`, `eval show`, the REST API and the HTML report all read runs through these functions,
so a run looks the same everywhere. Nothing here replays anything: it reads what the runner stored.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from ragtriage.config.profiles import DEFAULT_PROFILE
from ragtriage.errors import InputError, NotFoundError
from ragtriage.eval.aggregate import aggregate_by_bucket, overall
from ragtriage.eval.metrics import refusal_accuracy
from ragtriage.eval.specs import COVERAGE, headline_labels
from ragtriage.pipeline.types import LexicalSupport
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.eval_tables import EvalRunCaseRow, EvalRunRow
from ragtriage.triage.journey import STAGE_ORDER, GoldStages, place_drop
from ragtriage.wording import quoted

__all__ = [
    "HEADLINE_METRICS",
    "CandidateView",
    "CasePage",
    "CaseResult",
    "RunDetail",
    "RunListItem",
    "RunSummary",
    "case_results",
    "effective_status",
    "list_run_items",
    "run_detail",
    "run_kb",
    "run_or_newest",
    "run_summary",
    "summarize_run",
]


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


def run_or_newest(engine: Engine, run_ref: str | None, dataset: str) -> EvalRunRow:
    """Run `run_ref` (id or name), or the newest complete run of `dataset`.

    Raises:
        NotFoundError: no such run, or `dataset` has no complete run.
    """
    if run_ref is not None:
        return eval_store.get_run(engine, run_ref)
    complete = [run for run in eval_store.list_runs(engine, dataset) if run.status == "complete"]
    if not complete:
        raise NotFoundError(
            f"eval set {quoted(dataset)} has no complete run; run `ragtriage eval run` first, or name one with --run"
        )
    return complete[0]


#: Metrics shown for each run in a list (every metric is in the run's aggregates).
HEADLINE_METRICS = ("recall@5", "recall@10", "mrr", "ndcg@10", "hit@5", COVERAGE)

#: Largest page of case results one call returns.
MAX_PAGE = 500


class RunListItem(BaseModel):
    """One run in a list: identity, status, progress and the headline means."""

    run_id: int
    name: str | None
    kb: str
    dataset: str
    dataset_version: int
    granularity: str
    status: str
    cases_done: int
    case_count: int
    config_hash: str
    profile: str = "default"
    """Replay profile of the run's pipeline (`default`: the settings file as it is)."""
    kb_revision: int | None
    started_at: str
    means: dict[str, float | None] = Field(default_factory=dict)


class CandidateView(BaseModel):
    """One candidate of a case's snapshot: ranks and scores at every stage, relevance, selection."""

    chunk_id: str
    doc_id: str | None = None
    rank: int | None
    """Rank in the last stage that ranked it: reranked if the reranker saw it, else fused."""
    route_ranks: dict[str, int] = Field(default_factory=dict)
    route_scores: dict[str, float | None] = Field(default_factory=dict)
    """Route name → the route's own score (BM25 score, cosine similarity)."""
    fused_rank: int | None = None
    fused_score: float | None = None
    """RRF score: sum over routes of 1 / (k + rank)."""
    rerank_score: float | None = None
    final_score: float | None
    """Rerank score when reranked, else the fused score."""
    final_rank: int | None = None
    """Position in the final context (None: not selected)."""
    is_relevant: bool
    is_selected: bool


class CaseResult(BaseModel):
    """One case of a run: what was retrieved, what is relevant, the metrics and the candidates."""

    case_id: str
    case_version: int
    query: str | None = None
    has_gold: bool
    refused: bool
    refusal_reason: str | None = None
    """Why the pipeline refused (None: not refused, or a run stored before reasons were kept)."""
    lexical_support: LexicalSupport | None = None
    """Which query terms the final candidates lack, when the case was refused or lexical support is
    the refusal score (`Trace.refusal_support`)."""
    buckets: list[str] = Field(default_factory=list)
    retrieved_chunk_ids: list[str] = Field(default_factory=list)
    """The final context in rank order (doc ids at `doc` granularity are still chunk ids here)."""
    relevant_chunk_ids: list[str] = Field(default_factory=list)
    """Gold ids with a grade above 0 (document ids for a `doc` granularity case)."""
    gold_granularity: str = "chunk"
    metrics: dict[str, float] = Field(default_factory=dict)
    candidates: list[CandidateView] = Field(default_factory=list)
    gold_journey: list[GoldStages] = Field(default_factory=list)
    """Each relevant id's rank at every route and stage, and where it dropped out."""
    rank_shift: list[dict[str, Any]] = Field(default_factory=list)
    """Gold ranks before and after rerank: `{"id", "before", "after", "shift"}`."""
    error: str | None = None
    """Why the pipeline rejected the case (it then scores 0)."""
    ms: float = 0.0


class CasePage(BaseModel):
    """A page of case results and how many there are in all."""

    total: int
    offset: int
    limit: int
    items: list[CaseResult] = Field(default_factory=list)


class RunDetail(RunSummary):
    """One run: the summary, its settings, provenance and a page of its case results."""

    kb: str
    config: dict[str, Any] = Field(default_factory=dict)
    run_options: dict[str, Any] = Field(default_factory=dict)
    index_manifest: dict[str, Any] = Field(default_factory=dict)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    cases: CasePage


def run_kb(run: EvalRunRow) -> str:
    """The knowledge base a run evaluated (its settings snapshot's `kb.name`)."""
    return str(((run.config or {}).get("kb") or {}).get("name") or "default")


def list_run_items(engine: Engine, dataset: str | None = None, kb: str | None = None) -> list[RunListItem]:
    """Stored runs, newest first, optionally of one dataset and one knowledge base."""
    items = []
    for run in eval_store.list_runs(engine, dataset):
        if kb is not None and run_kb(run) != kb:
            continue
        means = (run.aggregates or {}).get("means", {})
        items.append(
            RunListItem(
                run_id=int(run.id or 0),
                name=run.name,
                kb=run_kb(run),
                dataset=run.dataset,
                dataset_version=run.dataset_version,
                granularity=run.granularity,
                status=effective_status(run),
                cases_done=run.cases_done,
                case_count=run.case_count,
                config_hash=run.config_hash,
                profile=run.profile or "default",
                kb_revision=run.kb_revision,
                started_at=run.started_at.isoformat(timespec="seconds"),
                means={m: means.get(m) for m in headline_labels(HEADLINE_METRICS, means)},
            )
        )
    return items


def _pair(value: Any) -> tuple[int | None, float | None]:
    if not value:
        return None, None
    rank, score = value[0], value[1] if len(value) > 1 else None
    return (None if rank is None else int(rank)), (None if score is None else float(score))


def _candidate(item: dict[str, Any]) -> CandidateView:
    fused_rank, fused_score = _pair(item.get("fused"))
    reranked_rank, rerank_score = _pair(item.get("reranked"))
    routes = {name: _pair(value) for name, value in (item.get("routes") or {}).items()}
    # The runner wrote these values with these types; skip re-validating 30 candidates per case.
    return CandidateView.model_construct(
        chunk_id=str(item["chunk_id"]),
        doc_id=item.get("doc_id"),
        rank=reranked_rank if reranked_rank is not None else fused_rank,
        route_ranks={name: rank for name, (rank, _) in routes.items() if rank is not None},
        route_scores={name: score for name, (_, score) in routes.items()},
        fused_rank=fused_rank,
        fused_score=fused_score,
        rerank_score=rerank_score,
        final_score=rerank_score if rerank_score is not None else fused_score,
        final_rank=None if item.get("final_rank") is None else int(item["final_rank"]),
        is_relevant=bool(item.get("is_relevant")),
        is_selected=bool(item.get("is_selected")),
    )


def snapshot_journey(
    candidates: Sequence[CandidateView], relevant: Sequence[str], *, by_doc: bool = False
) -> list[GoldStages]:
    """The gold journey through a stored snapshot (routes → fused → reranked → final).

    The snapshot does not keep the reranker's input list, so `rerank_input` stays None; a relevant id
    no candidate carries dropped out before any route found it. With `by_doc`, the best-placed chunk
    of the relevant document stands for it at every stage.
    """
    stages = [s for s in STAGE_ORDER if s != "rerank_input"]
    has_rerank = any(c.rerank_score is not None for c in candidates)
    if not has_rerank:
        stages.remove("reranked")
    route_names = sorted({name for c in candidates for name in c.route_ranks})

    def best(values: list[int | None]) -> int | None:
        present = [v for v in values if v is not None]
        return min(present) if present else None

    journey = []
    for gold_id in dict.fromkeys(relevant):
        mine = [c for c in candidates if (c.doc_id if by_doc else c.chunk_id) == gold_id]
        record = GoldStages(
            chunk_id=gold_id,
            routes={name: best([c.route_ranks.get(name) for c in mine]) for name in route_names},
            fused=best([c.fused_rank for c in mine]),
            reranked=best([c.rank if c.rerank_score is not None else None for c in mine]),
            final=best([c.final_rank for c in mine]),
        )
        # The same placement as a trace's journey: the snapshot's stages always end at `final`.
        place_drop(record, stages)
        journey.append(record)
    return journey


def _case_result(row: EvalRunCaseRow, case: eval_store.StoredCase | None, detail: bool = True) -> CaseResult:
    snapshot = row.snapshot or {}
    candidates = [_candidate(item) for item in snapshot.get("candidates", [])] if detail else []
    relevant = list(case.case.relevant_ids) if case is not None else []
    if case is not None and case.case.gold_refs:
        # Refs were mapped onto the KB of the run: the snapshot marks the chunks they mapped to.
        marked = [
            str(item.get("chunk_id")) for item in snapshot.get("candidates", []) if item.get("is_relevant")
        ]
        relevant = list(dict.fromkeys([*relevant, *marked]))
    granularity = case.case.gold_granularity if case is not None else "chunk"
    return CaseResult(
        case_id=row.case_id,
        case_version=row.case_version,
        query=case.case.query if case is not None else None,
        has_gold=row.has_gold,
        refused=row.refused,
        refusal_reason=snapshot.get("refusal_reason"),
        lexical_support=LexicalSupport.model_validate(support)
        if (support := snapshot.get("lexical_support"))
        else None,
        buckets=list(row.buckets or []),
        retrieved_chunk_ids=[str(c) for c in snapshot.get("final", [])],
        relevant_chunk_ids=relevant,
        gold_granularity=granularity,
        metrics={k: float(v) for k, v in (row.metrics or {}).items()},
        candidates=candidates,
        gold_journey=snapshot_journey(candidates, relevant, by_doc=granularity == "doc")
        if relevant and detail
        else [],
        rank_shift=list(snapshot.get("rank_shift", [])),
        error=snapshot.get("error"),
        ms=row.ms,
    )


def _cases_at(
    engine: Engine, run: EvalRunRow, case_ids: Sequence[str] | None = None
) -> dict[str, eval_store.StoredCase]:
    """The run's dataset version's cases (only `case_ids` when given) by id ({} when the dataset is gone)."""
    try:
        cases = eval_store.dataset_cases(engine, run.dataset, run.dataset_version, case_ids=case_ids)
    except NotFoundError:
        return {}
    return {c.case.case_id: c for c in cases}


def case_results(
    engine: Engine, run: EvalRunRow, *, case_ids: Sequence[str] | None = None, detail: bool = True
) -> list[CaseResult]:
    """The stored case results of `run` (all, or `case_ids`) in case id order, with the query and gold
    of their case version; without `detail`, no candidates and no gold journey (a summary is faster)."""
    rows = eval_store.run_case_results(engine, int(run.id or 0), case_ids=case_ids)
    cases = _cases_at(engine, run, case_ids)
    return [_case_result(row, cases.get(row.case_id), detail) for row in rows]


def run_detail(engine: Engine, run_ref: str | int, *, offset: int = 0, limit: int = 50) -> RunDetail:
    """Run `run_ref` (id, `#id` or name) with the case results `offset … offset + limit` (case id order).

    Raises:
        NotFoundError: no such run.
        InputError: a negative offset, or a limit outside 1..500.
    """
    if offset < 0:
        raise InputError(f"offset must be zero or more, got {offset}")
    if not 1 <= limit <= MAX_PAGE:
        raise InputError(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
    run = eval_store.get_run(engine, run_ref)
    rows = eval_store.run_case_results(engine, int(run.id or 0), offset=offset, limit=limit)
    cases = _cases_at(engine, run, [row.case_id for row in rows])
    page = [_case_result(row, cases.get(row.case_id)) for row in rows]
    summary = run_summary(run)
    return RunDetail(
        **summary.model_dump(),
        kb=run_kb(run),
        config=dict(run.config or {}),
        run_options=dict(run.run_options or {}),
        index_manifest=dict(run.index_manifest or {}),
        started_at=run.started_at,
        finished_at=run.finished_at,
        cases=CasePage(
            total=eval_store.run_case_count(engine, int(run.id or 0)), offset=offset, limit=limit, items=page
        ),
    )
