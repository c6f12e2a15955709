"""Read logged requests back from the store (for `show`, replay and the TUI)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import func, select, true
from sqlalchemy.engine import Engine
from sqlmodel import col

from ragtriage.errors import NotFoundError, StoreError
from ragtriage.logs.merge import request_differences
from ragtriage.logs.schema import RequestLog
from ragtriage.store.db import read_session
from ragtriage.store.log_tables import LogConflictRow, LogMergeRow, QuarantinedLineRow, RequestLogRow
from ragtriage.store.triage_repo import TriageRecord, find_record
from ragtriage.wording import quoted

IN_CHUNK = 500


class StoredRequest(BaseModel):
    """A logged request with where it came from."""

    record: RequestLog
    source_file: str | None = None
    source_line: int | None = None
    recovered: bool = False
    ingested_at: datetime | None = None
    conflicts: int = 0
    """Lines seen later with the same request_id and a different body (kept in `log_conflict`)."""
    merges: list[str] = []
    """Lines that added to it later, oldest first: `file:line: paths added`."""


class RequestView(BaseModel):
    """What `show REQUEST_ID` prints: the logged request and its triage record (if any)."""

    request: StoredRequest
    triage: TriageRecord | None = None


def _parse(row_body: str, request_id: str) -> RequestLog:
    try:
        return RequestLog.model_validate_json(row_body)
    except ValueError as error:
        raise StoreError(
            f"stored request {quoted(request_id)} no longer matches the log schema: {error}"
        ) from None


def find_request(engine: Engine, request_id: str) -> StoredRequest | None:
    """The stored request, or None."""
    with read_session(engine) as session:
        row = session.get(RequestLogRow, request_id)
        if row is None:
            return None
        conflicts = session.execute(
            select(func.count())
            .select_from(LogConflictRow)
            .where(col(LogConflictRow.request_id) == request_id)
        ).scalar_one()
        merges = session.execute(
            select(col(LogMergeRow.source_file), col(LogMergeRow.line_no), col(LogMergeRow.added))
            .where(col(LogMergeRow.request_id) == request_id)
            .order_by(col(LogMergeRow.id))
        ).all()
        return StoredRequest(
            record=_parse(row.body, request_id),
            source_file=row.source_file,
            source_line=row.source_line,
            recovered=row.recovered,
            ingested_at=row.ingested_at,
            conflicts=conflicts,
            merges=[f"{source or '(no file)'}:{line_no}: {added}" for source, line_no, added in merges],
        )


def _stored(engine: Engine, request_id: str) -> StoredRequest:
    stored = find_request(engine, request_id)
    if stored is None:
        raise NotFoundError(
            f"no logged request with request_id {quoted(request_id)}; check the id or ingest its log"
        )
    return stored


def get_request(engine: Engine, request_id: str) -> RequestLog:
    """The logged request (schema v1 model; `to_trace` turns it into a Trace).

    Raises:
        NotFoundError: no such request_id in the store.
    """
    return _stored(engine, request_id).record


def get_requests(engine: Engine, request_ids: Sequence[str]) -> dict[str, RequestLog]:
    """The stored requests among `request_ids` (missing ids are simply absent)."""
    found: dict[str, RequestLog] = {}
    table = RequestLogRow.__table__  # type: ignore[attr-defined]
    with read_session(engine) as session:
        for start in range(0, len(request_ids), IN_CHUNK):
            chunk = list(request_ids[start : start + IN_CHUNK])
            for request_id, body in session.execute(
                select(table.c.request_id, table.c.body).where(table.c.request_id.in_(chunk))
            ):
                found[request_id] = _parse(body, request_id)
    return found


def iter_requests(engine: Engine, *, batch_size: int = 1000) -> Iterator[RequestLog]:
    """Every stored request in request_id order, read in pages (constant memory)."""
    table = RequestLogRow.__table__  # type: ignore[attr-defined]
    after = ""
    while True:
        with read_session(engine) as session:
            rows = session.execute(
                select(table.c.request_id, table.c.body)
                .where(table.c.request_id > after)
                .order_by(table.c.request_id)
                .limit(batch_size)
            ).all()
        if not rows:
            return
        for request_id, body in rows:
            yield _parse(body, request_id)
        after = rows[-1][0]


def request_view(engine: Engine, request_id: str) -> RequestView:
    """The logged request and its triage record.

    Raises:
        NotFoundError: no such request_id in the store.
    """
    return RequestView(request=_stored(engine, request_id), triage=find_record(engine, request_id))


def logged_versions(engine: Engine) -> dict[str, int]:
    """`pipeline_version` → stored requests, most first (`none logged` for requests without one)."""
    version = col(RequestLogRow.pipeline_version)
    with read_session(engine) as session:
        rows = session.execute(select(version, func.count()).group_by(version)).all()
    counts = {name or "none logged": int(count) for name, count in rows}
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


class ConflictLine(BaseModel):
    """A line set aside because its request_id is stored with a different request."""

    request_id: str
    source_file: str | None
    line_no: int | None
    fields: list[str]
    """Fields in which it differs from the stored request (`request_differences`)."""


def _of_files(column: Any, files: Sequence[str] | None) -> Any:
    """A filter on `column` for the lines of `files` (every line without files).

    Ingest records each file by its resolved path; the names as given are kept too.
    """
    if not files:
        return true()
    return column.in_(sorted({str(Path(name).resolve()) for name in files} | set(files)))


def conflicting_lines(
    engine: Engine, files: Sequence[str] | None = None, *, limit: int = 3
) -> tuple[int, list[ConflictLine]]:
    """The number of conflicting lines (of `files`, or of every file) and the first `limit` in file
    and line order, each with the field that differs from the stored request."""
    where = _of_files(col(LogConflictRow.source_file), files)
    with read_session(engine) as session:
        total = session.scalar(select(func.count()).select_from(LogConflictRow).where(where))
        rows = session.execute(
            select(
                col(LogConflictRow.request_id),
                col(LogConflictRow.source_file),
                col(LogConflictRow.line_no),
                col(LogConflictRow.body),
                col(RequestLogRow.body),
            )
            .join(RequestLogRow, col(RequestLogRow.request_id) == col(LogConflictRow.request_id))
            .where(where)
            .order_by(col(LogConflictRow.source_file), col(LogConflictRow.line_no))
            .limit(limit)
        ).all()
    return int(total or 0), [
        ConflictLine(
            request_id=request_id,
            source_file=source,
            line_no=line_no,
            fields=request_differences(stored, body),
        )
        for request_id, source, line_no, body, stored in rows
    ]


class QuarantinedLine(BaseModel):
    """One quarantined log line, without its raw bytes (they stay in the store)."""

    source_file: str
    line_no: int
    kind: str
    reason: str


def quarantined_lines(
    engine: Engine, files: Sequence[str] | None = None, *, limit: int = 50
) -> tuple[int, list[QuarantinedLine]]:
    """The total number of quarantined lines (of `files`, or of every file) and the first `limit`
    in file and line order."""
    where = _of_files(col(QuarantinedLineRow.source_file), files)
    with read_session(engine) as session:
        total = session.scalar(select(func.count()).select_from(QuarantinedLineRow).where(where))
        rows = session.execute(
            select(
                col(QuarantinedLineRow.source_file),
                col(QuarantinedLineRow.line_no),
                col(QuarantinedLineRow.kind),
                col(QuarantinedLineRow.reason),
            )
            .where(where)
            .order_by(col(QuarantinedLineRow.source_file), col(QuarantinedLineRow.line_no))
            .limit(limit)
        ).all()
    return int(total or 0), [
        QuarantinedLine(source_file=f, line_no=n, kind=k, reason=r) for f, n, k, r in rows
    ]


def stored_request_span(engine: Engine) -> tuple[datetime, datetime] | None:
    """Time (UTC) of the oldest and the newest stored request, or None when no request has a time.

    Two index lookups on `ts`; used to tell a user whose window holds nothing where the data is.
    """
    with read_session(engine) as session:
        first, last = session.execute(
            select(func.min(col(RequestLogRow.ts)), func.max(col(RequestLogRow.ts)))
        ).one()
    if first is None or last is None:
        return None
    return first, last


def span_days(span: tuple[datetime, datetime]) -> str:
    """`2026-11-02 to 2026-11-05`, or one day when both ends fall on it (UTC dates)."""
    first, last = span
    return f"{first:%Y-%m-%d}" if first.date() == last.date() else f"{first:%Y-%m-%d} to {last:%Y-%m-%d}"


def empty_window_hint(engine: Engine, since: datetime, what: str = "stored request") -> str:
    """One line for a `--since` window that holds nothing: where the stored requests are, and what to try.

    `what` names the thing the window lacked (`stored request`, `unflagged request`).
    """
    span = stored_request_span(engine)
    head = f"no {what} since {since:%Y-%m-%d %H:%M} UTC"
    if span is None:
        return f"{head}; the store holds no request yet: ingest logs with `ragtriage logs ingest FILE`"
    first, last = (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc) for stamp in span)
    days = span_days(span)
    since_utc = since if since.tzinfo else since.replace(tzinfo=timezone.utc)
    if last < since_utc:
        return f"{head}; the stored requests are from {days}: try --since {first:%Y-%m-%d}"
    # Requests are stored in the window, yet none qualified (e.g. all already flagged or drawn).
    longer = (
        f", or an earlier --since (the stored requests start {first:%Y-%m-%d})" if first < since_utc else ""
    )
    return (
        f"{head}: every stored request from {span_days((max(first, since_utc), last))} is taken (flagged "
        f"or drawn before); ingest newer logs with `ragtriage logs ingest FILE`{longer}"
    )
