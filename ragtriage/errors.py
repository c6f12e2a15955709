"""Expected, explainable failures. The CLI turns them into one stderr line and exit code 2."""

from __future__ import annotations


class RagtriageError(Exception):
    """Base of every error a user can fix; `title` prefixes the one-line message."""

    title = "error"

    def __init__(self, message: str, *, title: str | None = None) -> None:
        super().__init__(message)
        if title is not None:
            self.title = title


class ConfigError(RagtriageError):
    """Bad settings file, key or value."""

    title = "config error"


class InputError(RagtriageError):
    """Bad user input: a file, a query, an alias file, an import."""

    title = "input error"


class LogFormatError(RagtriageError):
    """A request-log line that cannot be read (strict mode)."""

    title = "log format error"


class StoreError(RagtriageError):
    """The triage store cannot be opened or written."""

    title = "store error"


class IndexStateError(RagtriageError):
    """An index is missing, locked by another process, or built by another embedder."""

    title = "index error"


class IndexLockedError(IndexStateError):
    """An index folder held by another process (Qdrant local mode allows one client per folder)."""


class PipelineError(RagtriageError):
    """A pipeline stage cannot run (missing extra, unreachable service, bad model)."""

    title = "pipeline error"


class NotFoundError(RagtriageError):
    """A request_id, chunk id, run or case that does not exist."""

    title = "not found"
