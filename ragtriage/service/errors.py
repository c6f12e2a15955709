"""JSON errors: the same title and message the CLI prints, with the HTTP status that fits.

Every body is `{"title", "message", "detail"}` where `detail` is the CLI's stderr line
(`title: message`); a validation error adds `field` (e.g. `body.workers`) and `errors` (one per field).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ragtriage.errors import (
    ConfigError,
    IndexStateError,
    InputError,
    LogFormatError,
    NotFoundError,
    PipelineError,
    RagtriageError,
    StoreError,
)
from ragtriage.store.triage_repo import ConflictError

#: Error class → HTTP status; the first match in this order wins (subclasses come first).
STATUS_OF: tuple[tuple[type[RagtriageError], int], ...] = (
    (NotFoundError, 404),
    (ConflictError, 409),
    (IndexStateError, 409),
    (InputError, 422),
    (LogFormatError, 422),
    (PipelineError, 503),
    (StoreError, 503),
    (ConfigError, 500),
)


def status_of(error: RagtriageError) -> int:
    """The HTTP status of an expected error (400 for one this table does not know)."""
    return next((status for kind, status in STATUS_OF if isinstance(error, kind)), 400)


def error_body(title: str, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON body of every error response."""
    return {"title": title, "message": message, "detail": f"{title}: {message}", **extra}


def _field(location: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in location)


async def _ragtriage_error(_request: Request, error: RagtriageError) -> JSONResponse:
    return JSONResponse(error_body(error.title, str(error)), status_code=status_of(error))


async def _validation_error(_request: Request, error: RequestValidationError) -> JSONResponse:
    errors = [{"field": _field(e.get("loc", ())), "message": str(e.get("msg", ""))} for e in error.errors()]
    first = errors[0] if errors else {"field": "", "message": "invalid request"}
    message = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return JSONResponse(
        error_body("input error", message, field=first["field"], errors=errors), status_code=422
    )


async def _http_error(_request: Request, error: StarletteHTTPException) -> JSONResponse:
    titles = {401: "unauthorized", 403: "forbidden", 404: "not found", 405: "method not allowed"}
    return JSONResponse(
        error_body(titles.get(error.status_code, "error"), str(error.detail)),
        status_code=error.status_code,
        headers=getattr(error, "headers", None),
    )


def install_error_handlers(app: FastAPI) -> None:
    """Map ragtriage errors, validation errors and HTTP errors to the JSON body above."""
    # Starlette types handlers as taking any Exception; each is registered for its own class only.
    app.add_exception_handler(RagtriageError, _ragtriage_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
