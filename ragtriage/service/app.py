"""`create_app(home, config_file, token)`: the ASGI app `ragtriage serve` hands to uvicorn.

Routes: the REST API under `/api/v1` (retrieval evaluation, triage), HTML pages (`/` lists the
runs, `/runs/{run_id}/report` renders the same report as `ragtriage report`), and the OpenAPI docs
at `/docs` with Swagger UI served from the package (no CDN).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Query
from fastapi.responses import HTMLResponse
from fastapi_offline import FastAPIOffline

from ragtriage import __version__
from ragtriage.eval.run_view import list_run_items
from ragtriage.service import routes_eval, routes_triage
from ragtriage.service.auth import BearerToken
from ragtriage.service.errors import install_error_handlers
from ragtriage.service.report import render_index, render_report
from ragtriage.service.state import ServiceState, service_state

#: The HTML pages: the run list and each run's report (outside the OpenAPI schema).
pages = APIRouter(include_in_schema=False)
State = Annotated[ServiceState, Depends(service_state)]


@pages.get("/", response_class=HTMLResponse)
def index(state: State) -> str:
    """The runs of this home, newest first, each linking to its report."""
    workspace = state.workspace
    return render_index(list_run_items(workspace.engine), kb=workspace.settings.kb.name)


@pages.get("/runs/{run_id}/report", response_class=HTMLResponse)
def report(
    run_id: str,
    state: State,
    compare: Annotated[str | None, Query(description="Run B to compare with.")] = None,
) -> str:
    """The HTML report of one run (with `?compare=RUN_B`, run B against it)."""
    return render_report(state.workspace.engine, run_id, compare=compare)


def create_app(
    home: Path | None = None, config_file: Path | None = None, *, token: str | None = None
) -> FastAPI:
    """The service over the home `home` with settings `config_file`; `token` turns on bearer auth.

    Raises:
        ConfigError: the settings file is invalid (before anything listens).
    """
    state = ServiceState.open(home, config_file)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        state.close()

    app = FastAPIOffline(
        title="ragtriage",
        version=__version__,
        description="Retrieval evaluation and badcase triage over the ragtriage store. "
        "Errors are JSON `{title, message, detail}` with the CLI's message.",
        lifespan=lifespan,
    )
    app.state.service = state
    install_error_handlers(app)
    guard = [Depends(BearerToken(token))]
    app.include_router(routes_eval.router, dependencies=guard)
    app.include_router(routes_triage.router, dependencies=guard)
    app.include_router(pages, dependencies=guard)
    return app
