"""`create_app(home, config_file, token)`: the ASGI app `ragtriage serve` hands to uvicorn.

Routes: the REST API under `/api/v1` (retrieval evaluation, triage), HTML pages (`/` lists the
runs, `/runs/{run_id}/report` renders the same report as `ragtriage report`), and the OpenAPI docs
at `/docs` with Swagger UI served from the package (no CDN).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi_offline import FastAPIOffline

from ragtriage import __version__
from ragtriage.service import pages, routes_eval, routes_triage
from ragtriage.service.auth import BearerToken
from ragtriage.service.errors import install_error_handlers
from ragtriage.service.state import ServiceState


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
    app.include_router(pages.router, dependencies=guard)
    return app
