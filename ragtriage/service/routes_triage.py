"""The triage queue over HTTP: read the queue, a request, its triage record and its diagnosis; label,
confirm and promote with the CLI's revision rules (a stale `revision` is a 409 naming who changed what)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from ragtriage.logs.queue import QUEUE_SORTS, QueuePage, list_queue, parse_since
from ragtriage.logs.requests import RequestView, request_view
from ragtriage.service.state import ServiceState, service_state
from ragtriage.store import eval_repo as eval_store
from ragtriage.store import triage_repo
from ragtriage.store.triage_repo import TriageRecord
from ragtriage.triage import workflow
from ragtriage.triage.context import WorkspaceContext
from ragtriage.triage.diagnose import Diagnosis, diagnose_request
from ragtriage.triage.promote import PromoteResult, promote_request

router = APIRouter(prefix="/api/v1", tags=["triage"])
# Request ids are the logging system's own and may hold "/": the routes take the id as a path, and
# the plain `GET /requests/{id}` comes last so it never swallows `/triage`, `/diagnosis`, ….
State = Annotated[ServiceState, Depends(service_state)]


class LabelRequest(BaseModel):
    """Body of `POST …/label` (the options of `ragtriage label`)."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(min_length=1, description="Root-cause label from [triage] labels.")
    primary: bool = False
    gold: list[str] | None = Field(default=None, description="Gold chunk ids; replaces the gold.")
    note: str | None = None
    reopen: bool = Field(default=False, description="Label a confirmed or dismissed case again.")
    user: str | None = Field(default=None, description="Who makes the change (default: the server's user).")
    revision: int | None = Field(default=None, description="The revision you looked at (409 when stale).")


class ConfirmRequest(BaseModel):
    """Body of `POST …/confirm`."""

    model_config = ConfigDict(extra="forbid")

    user: str | None = None
    revision: int | None = Field(default=None, description="The revision you looked at (409 when stale).")


class PromoteRequest(BaseModel):
    """Body of `POST …/promote` (the options of `ragtriage promote`)."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(default=eval_store.DEFAULT_DATASET, min_length=1)
    grades: dict[str, int] = Field(default_factory=dict, description="Gold chunk id → grade (default 1).")
    must_have: list[str] = Field(default_factory=list)
    intent_type: str | None = None
    difficulty: str | None = None
    tags: list[str] = Field(default_factory=list)
    case_id: str | None = None


@router.get("/queue", response_model=QueuePage)
def queue(
    state: State,
    status: str | None = None,
    label: str | None = None,
    reason: str | None = None,
    assignee: str | None = None,
    since: Annotated[str | None, Query(description="30m, 12h, 7d, 2w or an ISO date/time.")] = None,
    text: Annotated[str | None, Query(description="Keep queries containing this text.")] = None,
    suggested: str | None = None,
    version: Annotated[
        str | None, Query(description="Keep requests logged with this pipeline_version (e.g. a canary's).")
    ] = None,
    sort: Annotated[str, Query(description=f"One of {', '.join(QUEUE_SORTS)}.")] = "newest",
    limit: Annotated[int, Query(ge=0, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> QueuePage:
    """One page of flagged requests (newest first by default) and the total matching the filters."""
    return list_queue(
        state.workspace.engine,
        status=status,
        label=label,
        reason=reason,
        assignee=assignee,
        since=parse_since(since) if since else None,
        limit=limit,
        offset=offset,
        text=text,
        suggested=suggested,
        sort=sort,
        version=version,
    )


@router.get("/requests/{request_id:path}/triage", response_model=TriageRecord)
def get_triage(request_id: str, state: State) -> TriageRecord:
    """The triage record: status, labels, gold, notes, assignee and `revision`."""
    return triage_repo.get_record(state.workspace.engine, request_id)


@router.get("/requests/{request_id:path}/diagnosis", response_model=Diagnosis)
def get_diagnosis(
    request_id: str,
    state: State,
    gold: Annotated[
        list[str] | None, Query(description="Gold chunk ids (default: the record's gold).")
    ] = None,
    counterfactuals: bool = True,
) -> Diagnosis:
    """Replay the request and diagnose it: gold journeys, suggested root cause, counterfactual replays.

    This replays through the pipeline (seconds, not milliseconds). Diagnosed with the stored gold (no
    `gold` given), its suggested root cause is stored as the queue's `suggested_label`, as the CLI and
    the TUI store it; nothing else is written.
    """
    workspace = state.fresh_workspace()
    context = WorkspaceContext(workspace)
    try:
        diagnosis, _ = diagnose_request(
            workspace, context, request_id, gold=gold, counterfactuals=counterfactuals
        )
    finally:
        context.close()
        workspace.close()
    return diagnosis


@router.post("/requests/{request_id:path}/label", response_model=TriageRecord)
def label(request_id: str, body: LabelRequest, state: State) -> TriageRecord:
    """Add a root-cause label (and gold, a note); moves the case to in_progress."""
    workspace = state.workspace
    return workflow.label_case(
        workspace.engine,
        request_id,
        body.label,
        allowed=workspace.settings.triage.labels,
        primary=body.primary,
        gold=body.gold or None,
        note=body.note,
        reopen=body.reopen,
        user=body.user,
        expected_revision=body.revision,
    )


@router.post("/requests/{request_id:path}/confirm", response_model=TriageRecord)
def confirm(request_id: str, state: State, body: ConfirmRequest | None = None) -> TriageRecord:
    """Confirm an in_progress case (it needs a primary label and gold, unless the label needs none)."""
    request = body or ConfirmRequest()
    workspace = state.workspace
    return workflow.confirm_case(
        workspace.engine,
        request_id,
        no_gold_labels=workspace.settings.triage.no_gold_labels,
        user=request.user,
        expected_revision=request.revision,
    )


@router.post("/requests/{request_id:path}/promote", response_model=PromoteResult)
def promote(request_id: str, state: State, body: PromoteRequest | None = None) -> PromoteResult:
    """Turn the confirmed case into an eval case (PII redacted, provenance kept); a duplicate is not added."""
    request = body or PromoteRequest()
    return promote_request(
        state.workspace,
        request_id,
        dataset=request.dataset,
        grades=request.grades,
        must_have=request.must_have,
        intent_type=request.intent_type,
        difficulty=request.difficulty,
        tags=request.tags,
        case_id=request.case_id,
    )


@router.get("/requests/{request_id:path}", response_model=RequestView)
def get_request(request_id: str, state: State) -> RequestView:
    """The logged request as ingested and its triage record (null when never flagged)."""
    return request_view(state.workspace.engine, request_id)
