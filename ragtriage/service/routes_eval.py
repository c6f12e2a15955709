"""Retrieval evaluation over HTTP: start a run, list runs, read one run with its per-case results."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from ragtriage.errors import NotFoundError
from ragtriage.eval.run_view import (
    MAX_PAGE,
    RunDetail,
    RunListItem,
    effective_status,
    list_run_items,
    run_detail,
)
from ragtriage.service.state import ServiceState, service_state
from ragtriage.store import eval_repo as eval_store
from ragtriage.wording import quoted

router = APIRouter(prefix="/api/v1", tags=["retrieval evaluation"])
State = Annotated[ServiceState, Depends(service_state)]


class EvaluateRequest(BaseModel):
    """Body of `POST …/retrieval/evaluate` (the options of `ragtriage eval run`)."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(default=eval_store.DEFAULT_DATASET, min_length=1, description="Eval set name.")
    name: str | None = Field(default=None, description="A name for the run (compare and gate accept it).")
    workers: int = Field(default=1, ge=1, le=16, description="Threads over batches of queries.")
    batch_size: int = Field(default=32, ge=1, le=1024, description="Queries per embedding batch.")
    profile: str | None = Field(
        default=None,
        min_length=1,
        description="Replay profile to run (`ragtriage profiles`); default: the settings.",
    )


class Progress(BaseModel):
    """How far a run is: stored cases out of the dataset version's cases."""

    cases_done: int
    case_count: int
    fraction: float
    running_here: bool
    """True while a thread of this server works on the run."""
    error: str | None = None
    """The error that stopped a run this server started (`title: message`, as the CLI prints it)."""


class EvaluationStarted(BaseModel):
    """The answer to a started evaluation: its id and where to follow it."""

    run_id: int
    kb: str
    dataset: str
    status: str
    progress: Progress
    href: str
    """`GET` this for progress and, when complete, the results."""


class RunList(BaseModel):
    """The runs of one knowledge base, newest first."""

    kb: str
    runs: list[RunListItem]


class Evaluation(RunDetail):
    """One run: summary, settings, aggregates, per-bucket figures, a page of case results, progress."""

    progress: Progress


def _check_kb(state: ServiceState, kb: str, runs: list[RunListItem] | None = None) -> None:
    configured = state.workspace.settings.kb.name
    if kb != configured and not runs:
        raise NotFoundError(
            f"no knowledge base {quoted(kb)} here; this server's knowledge base is {quoted(configured)} "
            "(settings: [kb] name)"
        )


def _progress(state: ServiceState, run_id: int, cases_done: int, case_count: int) -> Progress:
    job = state.jobs.get(run_id)
    return Progress(
        cases_done=cases_done,
        case_count=case_count,
        fraction=round(cases_done / case_count, 4) if case_count else 1.0,
        running_here=job is not None and job.alive,
        error=job.error if job is not None else None,
    )


@router.post("/knowledge-bases/{kb}/retrieval/evaluate", status_code=202, response_model=EvaluationStarted)
def evaluate(kb: str, state: State, body: EvaluateRequest | None = None) -> EvaluationStarted:
    """Start evaluating an eval set against the knowledge base; answers at once with the run id.

    The run goes on in the background; follow it with `GET /api/v1/retrieval/evaluations/{run_id}`.
    409 when the indexes are held by another process (use a Qdrant server for concurrent access).
    """
    _check_kb(state, kb)
    request = body or EvaluateRequest()
    job = state.jobs.start(
        request.dataset,
        name=request.name,
        workers=request.workers,
        batch_size=request.batch_size,
        profile=request.profile,
    )
    run_id = int(job.run_id or 0)
    run = eval_store.get_run(state.workspace.engine, run_id)
    return EvaluationStarted(
        run_id=run_id,
        kb=kb,
        dataset=run.dataset,
        status=effective_status(run),
        progress=_progress(state, run_id, run.cases_done, run.case_count),
        href=f"/api/v1/retrieval/evaluations/{run_id}",
    )


@router.get("/knowledge-bases/{kb}/retrieval/runs", response_model=RunList)
def list_runs(
    kb: str, state: State, dataset: Annotated[str | None, Query(description="Only this eval set.")] = None
) -> RunList:
    """The knowledge base's runs, newest first, with status, progress and headline means."""
    runs = list_run_items(state.workspace.engine, dataset, kb=kb)
    _check_kb(state, kb, runs)
    return RunList(kb=kb, runs=runs)


@router.get("/retrieval/evaluations/{run_id}", response_model=Evaluation)
def get_evaluation(
    run_id: str,
    state: State,
    offset: Annotated[int, Query(ge=0, description="First case result (case id order).")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Case results per page.")] = 50,
) -> Response:
    """One run (by id or name): aggregates, per-bucket figures and a page of per-case results with
    `retrieved_chunk_ids`, `relevant_chunk_ids`, `metrics` and `candidates`."""
    detail = run_detail(state.workspace.engine, run_id, offset=offset, limit=limit)
    progress = _progress(state, detail.run_id, detail.cases_done, detail.case_count)
    evaluation = Evaluation.model_construct(**dict(detail), progress=progress)
    # Serialized once here: FastAPI would validate the page again against `response_model`, which
    # documents the shape; thousands of candidates make that the slowest part of the request.
    return Response(evaluation.model_dump_json(), media_type="application/json")
