"""Read and change triage records, with optimistic concurrency and an audit trail.

Every change runs in one short write transaction that also writes its `triage_audit` row. Pass
the `revision` you displayed as `expected_revision`: if someone else changed the record since,
`ConflictError` says who and when, and nothing is written. Functions return plain pydantic
records (never ORM rows), safe to hand to another thread or the UI.
"""

from __future__ import annotations

import getpass
import os
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy import Text, and_, cast, func, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import col

from ragtriage.errors import InputError, NotFoundError, StoreError
from ragtriage.store.db import read_session, write_session
from ragtriage.store.gold import clean_gold
from ragtriage.store.log_tables import TRIAGE_STATUSES, RequestLogRow, TriageAuditRow, TriageRow
from ragtriage.wording import quoted

USER_ENV = "RAGTRIAGE_USER"
MANUAL_REASON = "manual"
"""Reason of a triage record opened by hand for a request no rule flagged."""


class ConflictError(StoreError):
    """Someone else changed the triage record since it was read (optimistic concurrency)."""

    title = "conflict"


class TriageNote(BaseModel):
    """One note on a triage record."""

    at: datetime
    user: str
    text: str


class TriageRecord(BaseModel):
    """The triage state of one request, as plain data."""

    request_id: str
    status: str
    reasons: list[str] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list)
    primary_label: str | None = None
    gold_chunk_ids: list[str | dict[str, Any]] = Field(default_factory=list)
    """Plain chunk ids, or `{"chunk_id": …, "grade": n}` for graded gold."""
    notes: list[TriageNote] = Field(default_factory=list)
    assignee: str | None = None
    request_ts: datetime | None = None
    created_at: datetime
    updated_at: datetime
    updated_by: str | None = None
    revision: int


class AuditEntry(BaseModel):
    """One recorded change."""

    at: datetime
    user: str
    action: str
    change: dict[str, Any]
    revision: int


#: Stratum of requests without a time (by day) or without a logged pipeline_version (by version).
UNKNOWN_STRATUM = "-"
StratifyBy = Literal["day", "version"]


def resolve_user(cli_user: str | None = None) -> str:
    """Who is making a change: `--user`, else $RAGTRIAGE_USER, else the OS login name."""
    if cli_user:
        return cli_user
    if os.environ.get(USER_ENV):
        return os.environ[USER_ENV]
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in some containers
        return "unknown"


def _to_record(row: TriageRow) -> TriageRecord:
    return TriageRecord(
        request_id=row.request_id,
        status=row.status,
        reasons=list(row.reasons or []),
        labels=list(row.labels or []),
        primary_label=row.primary_label,
        gold_chunk_ids=[dict(c) if isinstance(c, dict) else str(c) for c in row.gold_chunk_ids or []],
        notes=[TriageNote.model_validate(dict(n)) for n in row.notes or []],
        assignee=row.assignee,
        request_ts=row.request_ts,
        created_at=row.created_at,
        updated_at=row.updated_at,
        updated_by=row.updated_by,
        revision=row.revision,
    )


def find_record(engine: Engine, request_id: str) -> TriageRecord | None:
    """The triage record of `request_id`, or None when the request was never flagged or opened."""
    with read_session(engine) as session:
        row = session.get(TriageRow, request_id)
        return None if row is None else _to_record(row)


def request_logged(engine: Engine, request_id: str) -> bool:
    """True when the store holds a logged request with this id."""
    with read_session(engine) as session:
        return session.get(RequestLogRow, request_id) is not None


def get_record(engine: Engine, request_id: str) -> TriageRecord:
    """The triage record of `request_id`.

    Raises:
        NotFoundError: no triage record for that id.
    """
    record = find_record(engine, request_id)
    if record is None:
        raise NotFoundError(
            f"no triage record for request_id {quoted(request_id)}; run `ragtriage queue` to list them"
        )
    return record


def triage_filters(
    *,
    status: str | None = None,
    label: str | None = None,
    reason: str | None = None,
    assignee: str | None = None,
    since: datetime | None = None,
) -> list[ColumnElement[bool]]:
    """SQL conditions on `triage_record` for the queue filters (shared by `list_records` and the queue).

    Raises:
        InputError: an unknown status.
    """
    table = TriageRow.__table__  # type: ignore[attr-defined]
    conditions: list[ColumnElement[bool]] = []
    if status is not None:
        if status not in TRIAGE_STATUSES:
            raise InputError(f"unknown status {quoted(status)}; use one of {', '.join(TRIAGE_STATUSES)}")
        conditions.append(table.c.status == status)
    # JSON arrays are matched on their text form, which works on SQLite and PostgreSQL alike.
    if label is not None:
        conditions.append(cast(table.c.labels, Text).like(f'%"{_like_escape(label)}"%', escape="\\"))
    if reason is not None:
        conditions.append(cast(table.c.reasons, Text).like(f'%"{_like_escape(reason)}"%', escape="\\"))
    if assignee is not None:
        conditions.append(table.c.assignee == assignee)
    if since is not None:
        conditions.append(table.c.request_ts >= since)
    return conditions


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace('"', '\\\\"')


def list_records(
    engine: Engine,
    *,
    status: str | None = None,
    label: str | None = None,
    reason: str | None = None,
    assignee: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[int, list[TriageRecord]]:
    """`(total matching, one page of records newest first)`."""
    conditions = triage_filters(status=status, label=label, reason=reason, assignee=assignee, since=since)
    table = TriageRow.__table__  # type: ignore[attr-defined]
    with read_session(engine) as session:
        total = session.execute(select(func.count()).select_from(table).where(*conditions)).scalar_one()
        rows = session.scalars(
            select(TriageRow)
            .where(*conditions)
            .order_by(TriageRow.request_ts.desc(), TriageRow.request_id.desc())  # type: ignore[union-attr, attr-defined]
            .limit(limit)
            .offset(offset)
        ).all()
        return total, [_to_record(row) for row in rows]


def audit_log(engine: Engine, request_id: str) -> list[AuditEntry]:
    """Every recorded change of one triage record, oldest first."""
    with read_session(engine) as session:
        rows = session.scalars(
            select(TriageAuditRow)
            .where(col(TriageAuditRow.request_id) == request_id)
            .order_by(col(TriageAuditRow.id))
        ).all()
        return [
            AuditEntry(at=r.at, user=r.user, action=r.action, change=dict(r.change), revision=r.revision)
            for r in rows
        ]


Mutation = Callable[[TriageRow, str, datetime], tuple[Any, Any]]


def _change(
    engine: Engine,
    request_id: str,
    action: str,
    mutate: Mutation,
    *,
    expected_revision: int | None,
    user: str | None,
) -> TriageRecord:
    """Apply `mutate(row, user, now) -> (before, after)` in one transaction with its audit row."""
    who = resolve_user(user)
    now = datetime.now(timezone.utc)
    with write_session(engine) as session:
        row = session.get(TriageRow, request_id, with_for_update=True)
        if row is None:
            request = session.get(RequestLogRow, request_id)
            if request is None:
                raise NotFoundError(
                    f"no logged request with request_id {quoted(request_id)}; ingest its log first"
                )
            # A triager may open any logged request, not only flagged ones.
            row = TriageRow(
                request_id=request_id,
                status="new",
                reasons=[MANUAL_REASON],
                request_ts=request.ts or now,
                created_at=now,
                updated_at=now,
                updated_by=who,
                revision=0,
            )
            session.add(row)
        elif expected_revision is not None and row.revision != expected_revision:
            raise ConflictError(
                f"triage record {quoted(request_id)} was changed by {row.updated_by or 'someone'} at "
                f"{row.updated_at:%Y-%m-%d %H:%M:%S} UTC (revision {row.revision}; you had revision "
                f"{expected_revision}); reload it and apply your change again"
            )
        before, after = mutate(row, who, now)
        row.revision += 1
        row.updated_at = now
        row.updated_by = who
        session.add(
            TriageAuditRow(
                request_id=request_id,
                at=now,
                user=who,
                action=action,
                change={"before": before, "after": after},
                revision=row.revision,
            )
        )
        session.flush()
        return _to_record(row)


def set_status(
    engine: Engine,
    request_id: str,
    status: str,
    *,
    expected_revision: int | None = None,
    user: str | None = None,
) -> TriageRecord:
    """Move a record to `new`, `in_progress`, `confirmed` or `dismissed`.

    Raises:
        InputError: an unknown status. ConflictError: the record changed since `expected_revision`.
        NotFoundError: no such logged request.
    """
    if status not in TRIAGE_STATUSES:
        raise InputError(f"unknown status {quoted(status)}; use one of {', '.join(TRIAGE_STATUSES)}")

    def mutate(row: TriageRow, _user: str, _now: datetime) -> tuple[Any, Any]:
        before, row.status = row.status, status
        return before, status

    return _change(engine, request_id, "status", mutate, expected_revision=expected_revision, user=user)


def _clean_ids(values: Sequence[str], what: str) -> list[str]:
    cleaned: list[str] = []
    for value in values:
        text = str(value).strip()
        if not text:
            raise InputError(f"empty {what} given; drop it or give a name")
        if text not in cleaned:
            cleaned.append(text)
    return cleaned


def set_labels(
    engine: Engine,
    request_id: str,
    labels: Sequence[str],
    *,
    primary: str | None = None,
    expected_revision: int | None = None,
    user: str | None = None,
) -> TriageRecord:
    """Replace the labels; the primary label is `primary` (added if missing) or else the first."""
    cleaned = _clean_ids(labels, "label")
    if primary is not None:
        primary = primary.strip()
        cleaned = [primary, *[label for label in cleaned if label != primary]]

    def mutate(row: TriageRow, _user: str, _now: datetime) -> tuple[Any, Any]:
        before = {"labels": list(row.labels or []), "primary": row.primary_label}
        row.labels = list(cleaned)
        row.primary_label = cleaned[0] if cleaned else None
        return before, {"labels": cleaned, "primary": row.primary_label}

    return _change(engine, request_id, "labels", mutate, expected_revision=expected_revision, user=user)


def set_gold(
    engine: Engine,
    request_id: str,
    chunk_ids: Sequence[str | Mapping[str, Any]],
    *,
    expected_revision: int | None = None,
    user: str | None = None,
) -> TriageRecord:
    """Replace the gold: chunk ids or `{chunk_id, grade}` (an empty list means: the KB has no answer)."""
    cleaned = clean_gold(chunk_ids)

    def mutate(row: TriageRow, _user: str, _now: datetime) -> tuple[Any, Any]:
        before = list(row.gold_chunk_ids or [])
        row.gold_chunk_ids = list(cleaned)
        return before, cleaned

    return _change(engine, request_id, "gold", mutate, expected_revision=expected_revision, user=user)


def add_note(
    engine: Engine,
    request_id: str,
    text: str,
    *,
    expected_revision: int | None = None,
    user: str | None = None,
) -> TriageRecord:
    """Append a note signed with the user and the time."""
    if not text.strip():
        raise InputError("empty note; write some text")

    def mutate(row: TriageRow, who: str, now: datetime) -> tuple[Any, Any]:
        note = {"at": now.isoformat(), "user": who, "text": text}
        row.notes.append(note)
        return None, note

    return _change(engine, request_id, "note", mutate, expected_revision=expected_revision, user=user)


def assign(
    engine: Engine,
    request_id: str,
    assignee: str | None,
    *,
    expected_revision: int | None = None,
    user: str | None = None,
) -> TriageRecord:
    """Assign the record to someone (None: unassign)."""

    def mutate(row: TriageRow, _user: str, _now: datetime) -> tuple[Any, Any]:
        before, row.assignee = row.assignee, assignee
        return before, assignee

    return _change(engine, request_id, "assign", mutate, expected_revision=expected_revision, user=user)


def diagnosable_cases(
    engine: Engine, no_gold_labels: Sequence[str]
) -> list[tuple[str, list[str], str | None]]:
    """`(request_id, gold ids, confirmed primary label)` of records with gold, or confirmed with a
    label that needs none, oldest request first."""
    statement = select(TriageRow).order_by(col(TriageRow.request_ts), col(TriageRow.request_id))
    picked = []
    with read_session(engine) as session:
        for row in session.scalars(statement):
            confirmed = row.primary_label if row.status == "confirmed" else None
            gold = [g if isinstance(g, str) else str(g.get("chunk_id")) for g in row.gold_chunk_ids or []]
            if gold or (confirmed is not None and confirmed in no_gold_labels):
                picked.append((row.request_id, gold, confirmed))
    return picked


def unflagged_requests(engine: Engine, since: datetime | None, by: StratifyBy) -> dict[str, list[str]]:
    """Request ids without a triage record (time ≥ `since`) per day or pipeline_version (read from the
    monitor index, never the request bodies)."""
    requests = RequestLogRow.__table__  # type: ignore[attr-defined]
    triage = TriageRow.__table__  # type: ignore[attr-defined]
    key = requests.c.ts if by == "day" else requests.c.pipeline_version
    statement = (
        select(requests.c.request_id, key)
        .select_from(requests.outerjoin(triage, triage.c.request_id == requests.c.request_id))
        .where(and_(triage.c.request_id.is_(None), *([requests.c.ts >= since] if since is not None else [])))
    )
    strata: dict[str, list[str]] = defaultdict(list)
    with read_session(engine) as session:
        for request_id, value in session.execute(statement):
            if value is None:
                name = UNKNOWN_STRATUM
            elif by == "day":
                name = (value if isinstance(value, str) else value.isoformat())[:10]
            else:
                name = str(value)
            strata[name].append(request_id)
    return strata


def flag_requests(
    engine: Engine, request_ids: Sequence[str], reason: str, user: str, audit: Mapping[str, Any]
) -> None:
    """Create `new` triage records flagged for `reason` (skipping any a concurrent writer created
    meanwhile), each with an audit row carrying `audit`."""
    if not request_ids:
        return
    now = datetime.now(timezone.utc)
    with write_session(engine) as session:
        triage = TriageRow.__table__  # type: ignore[attr-defined]
        requests = RequestLogRow.__table__  # type: ignore[attr-defined]
        taken: set[str] = set()
        request_ts: dict[str, datetime | None] = {}
        for start in range(0, len(request_ids), 500):
            chunk = request_ids[start : start + 500]
            taken.update(
                session.execute(select(triage.c.request_id).where(triage.c.request_id.in_(chunk))).scalars()
            )
            for request_id, ts in session.execute(
                select(requests.c.request_id, requests.c.ts).where(requests.c.request_id.in_(chunk))
            ):
                request_ts[request_id] = ts
        for request_id in request_ids:
            if request_id in taken:
                continue
            session.add(
                TriageRow(
                    request_id=request_id,
                    status="new",
                    reasons=[reason],
                    request_ts=request_ts.get(request_id) or now,
                    created_at=now,
                    updated_at=now,
                    updated_by=user,
                    revision=1,
                )
            )
            session.add(
                TriageAuditRow(
                    request_id=request_id,
                    at=now,
                    user=user,
                    action="flag",
                    change={"before": [], "after": [reason], **audit},
                    revision=1,
                )
            )


def save_suggested_labels(engine: Engine, suggestions: Mapping[str, str | None]) -> int:
    """Set `suggested_label` (the root cause diagnosis suggested) of each request id, None clears it;
    machine-made, so without a revision bump or an audit row: it never conflicts with a triager's
    change. Returns how many records exist and changed."""
    table = TriageRow.__table__  # type: ignore[attr-defined]
    changed = 0
    with write_session(engine) as session:
        for request_id, label in suggestions.items():
            result = session.execute(
                update(table).where(table.c.request_id == request_id).values(suggested_label=label)
            )
            changed += int(getattr(result, "rowcount", 0) or 0)
    return changed


def undiagnosed_request_ids(engine: Engine, limit: int | None = None) -> list[str]:
    """Flagged request ids without a suggested label, oldest first."""
    table = TriageRow.__table__  # type: ignore[attr-defined]
    statement = (
        select(table.c.request_id)
        .where(table.c.suggested_label.is_(None))
        .order_by(table.c.request_ts, table.c.request_id)
    )
    if limit is not None:
        statement = statement.limit(limit)
    with read_session(engine) as session:
        return [row[0] for row in session.execute(statement)]
