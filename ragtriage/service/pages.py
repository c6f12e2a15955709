"""HTML pages of the service: the run list and each run's report (self-contained, no network)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import HTMLResponse

from ragtriage.eval.run_view import list_run_items
from ragtriage.service.report import render_index, render_report
from ragtriage.service.state import ServiceState, service_state

router = APIRouter(include_in_schema=False)
State = Annotated[ServiceState, Depends(service_state)]


@router.get("/", response_class=HTMLResponse)
def index(state: State) -> str:
    """The runs of this home, newest first, each linking to its report."""
    workspace = state.workspace
    return render_index(list_run_items(workspace.engine), kb=workspace.settings.kb.name)


@router.get("/runs/{run_id}/report", response_class=HTMLResponse)
def report(
    run_id: str,
    state: State,
    compare: Annotated[str | None, Query(description="Run B to compare with.")] = None,
) -> str:
    """The HTML report of one run (with `?compare=RUN_B`, run B against it)."""
    return render_report(state.workspace.engine, run_id, compare=compare)
