"""The SQL of log ingest, as functions of an open connection (SQLite or PostgreSQL, SQLAlchemy Core).

`stored_for_batch` reads what the store already holds that a batch touches (the bodies of its
request ids, the requests of its sessions near its times), `requests_of_traces` which stored
requests later feedback names; `write_batch` stores the batch's new requests, the merged bodies of
stored ones, triage flags, conflicts and quarantined lines, in the caller's transaction. Rows are
plain values: the rules that decide them live in `logs.ingest` and `logs.merge`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Table, and_, bindparam, delete, inspect, literal, select, text, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine

from ragtriage.errors import StoreError
from ragtriage.store.db import write_session
from ragtriage.store.log_tables import (
    OLD_REQUEST_LOG_SESSION_INDEX,
    REQUEST_LOG_TS_INDEX,
    LogConflictRow,
    LogMergeRow,
    QuarantinedLineRow,
    RequestLogRow,
    RequestTraceRow,
    TriageAuditRow,
    TriageRow,
)

INGEST_USER = "ingest"
FOLLOW_UP = "follow_up"
"""The reason `write_batch` adds to stored requests a new one follows up (`logs.flagging`)."""
#: Ids per `IN (…)` list: far below every backend's bound-parameter limit.
IN_CHUNK = 500

_REQUESTS: Table = RequestLogRow.__table__  # type: ignore[attr-defined]
_TRIAGE: Table = TriageRow.__table__  # type: ignore[attr-defined]
_AUDIT: Table = TriageAuditRow.__table__  # type: ignore[attr-defined]
_CONFLICTS: Table = LogConflictRow.__table__  # type: ignore[attr-defined]
_QUARANTINE: Table = QuarantinedLineRow.__table__  # type: ignore[attr-defined]
_MERGES: Table = LogMergeRow.__table__  # type: ignore[attr-defined]
_TRACES: Table = RequestTraceRow.__table__  # type: ignore[attr-defined]

Flag = tuple[str, list[str], datetime | None]
"""`(request_id, reasons, request time or None for the ingest time)` of a new triage record."""


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), IN_CHUNK):
        yield items[start : start + IN_CHUNK]


def ensure_ingest_indexes(engine: Engine) -> None:
    """Give a store created by an earlier version the follow-up index ingest reads (and drop the
    one it replaced, which only slowed inserts). Idempotent; instant when already done."""
    with write_session(engine) as session:
        connection = session.connection()
        names = {index["name"] for index in inspect(connection).get_indexes("request_log")}
        if REQUEST_LOG_TS_INDEX in names and OLD_REQUEST_LOG_SESSION_INDEX not in names:
            return
        if OLD_REQUEST_LOG_SESSION_INDEX in names:
            connection.execute(text(f"DROP INDEX {OLD_REQUEST_LOG_SESSION_INDEX}"))
        if REQUEST_LOG_TS_INDEX not in names:
            next(i for i in _REQUESTS.indexes if i.name == REQUEST_LOG_TS_INDEX).create(connection)


@contextmanager
def ingest_transaction(engine: Engine) -> Iterator[Connection]:
    """One batch's short write transaction (`BEGIN IMMEDIATE` on SQLite), committed on success and
    rolled back on any error or Ctrl-C. On SQLite with a page cache for the random-key index
    inserts, and rare WAL checkpoints cut back after (a checkpoint copies each page once however
    often commits rewrote it)."""
    with write_session(engine) as session:
        connection = session.connection()
        if connection.dialect.name == "sqlite":
            connection.execute(text("PRAGMA cache_size=-16384"))
            connection.execute(text("PRAGMA wal_autocheckpoint=16384"))
            connection.execute(text("PRAGMA journal_size_limit=67108864"))
        yield connection


def insert_ignoring_existing(connection: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """`INSERT … ON CONFLICT DO NOTHING` executemany, in the dialect of `connection` (SQLite or PostgreSQL).

    Raises:
        StoreError: another database backend.
    """
    if not rows:
        return
    dialect = connection.dialect.name
    if dialect == "sqlite":
        connection.execute(sqlite_insert(table).on_conflict_do_nothing(), rows)
    elif dialect == "postgresql":
        connection.execute(postgresql_insert(table).on_conflict_do_nothing(), rows)
    else:
        raise StoreError(
            f"request-log ingest supports SQLite and PostgreSQL, not {dialect}; change store.url"
        )


def stored_for_batch(
    connection: Connection,
    ids: Sequence[str],
    sessions: Sequence[str],
    windows: Sequence[tuple[datetime, datetime]],
) -> tuple[dict[str, str], list[tuple[str, str, datetime]]]:
    """What the store holds that a batch touches: the stored bodies of those of `ids` that are
    stored, and `(session, request_id, ts)` of the stored requests of `sessions` within one of the
    time `windows` (read from the (ts, session, request_id) index, never the rows)."""
    bodies: dict[str, str] = {}
    for chunk in _chunks(ids):
        query = select(_REQUESTS.c.request_id, _REQUESTS.c.body).where(_REQUESTS.c.request_id.in_(chunk))
        bodies.update((row[0], row[1]) for row in connection.execute(query))
    neighbours: list[tuple[str, str, datetime]] = []
    for low, high in windows:
        for chunk in _chunks(sessions):
            near = select(_REQUESTS.c.session_hash, _REQUESTS.c.request_id, _REQUESTS.c.ts).where(
                and_(_REQUESTS.c.ts >= low, _REQUESTS.c.ts <= high, _REQUESTS.c.session_hash.in_(chunk))
            )
            neighbours.extend((row[0], row[1], row[2]) for row in connection.execute(near))
    return bodies, neighbours


def requests_of_traces(connection: Connection, keys: Sequence[str]) -> dict[str, str]:
    """`trace:ID` / `span:ID` keys → the stored request they belong to (unknown keys are absent)."""
    found: dict[str, str] = {}
    for chunk in _chunks(keys):
        query = select(_TRACES.c.key, _TRACES.c.request_id).where(_TRACES.c.key.in_(chunk))
        found.update((row[0], row[1]) for row in connection.execute(query))
    return found


def rename_requests(connection: Connection, renames: Sequence[tuple[str, str, str]]) -> None:
    """Store each request `(old id, new id, new body)` under the new id instead, with the body
    given, and move every row that names it (triage record and audit, conflicts, merges, trace
    keys, fidelity). For a trace stored under its trace id before its own request id was known (a
    Langfuse export without its traces file); the new id is not stored yet."""
    if not renames:
        return
    rest = [column for column in _REQUESTS.c if column.name not in ("request_id", "body")]
    naming = [_TRIAGE, _AUDIT, _CONFLICTS, _MERGES, _TRACES]
    naming += [
        table
        for table in _REQUESTS.metadata.sorted_tables
        if table not in naming and any(fk.column is _REQUESTS.c.request_id for fk in table.foreign_keys)
    ]
    for old, new, body in renames:
        connection.execute(
            _REQUESTS.insert().from_select(
                ["request_id", "body", *(column.name for column in rest)],
                select(literal(new), literal(body), *rest).where(_REQUESTS.c.request_id == old),
            )
        )
        for table in naming:
            connection.execute(update(table).where(table.c.request_id == old).values(request_id=new))
        connection.execute(delete(_REQUESTS).where(_REQUESTS.c.request_id == old))


Merged = tuple[dict[str, Any], str | None, int, list[str]]
"""`(request_log columns to set incl. request_id, file, line, paths added)` of a merged request."""


def write_batch(
    connection: Connection,
    *,
    requests: list[dict[str, Any]],
    flags: list[Flag],
    followed_up: dict[str, datetime | None],
    conflicts: list[tuple[str, str | None, int, bytes]],
    quarantine: list[tuple[str, int, str, str, bytes]],
    now: datetime,
    merged: Sequence[Merged] = (),
    reflagged: Sequence[Flag] = (),
    trace_keys: Sequence[tuple[str, str]] = (),
    renames: Sequence[tuple[str, str, str]] = (),
) -> list[list[str]]:
    """Store one batch; returns the reasons of every triage record it created.

    `requests` are `request_log` rows; `flags` new triage records; `followed_up` stored requests
    (with their time) a new one follows up: `follow_up` is added to their triage record, made when
    they have none. `merged` stored requests a later line added to: their columns are updated and
    a `log_merge` row says which line added what; `reflagged` the reasons of merged requests,
    added to their triage record (with an audit row), or a record made when they have none.
    `trace_keys` are `(trace:ID or span:ID, request_id)`; `renames` `(old id, new id, body)`
    (`rename_requests`), done before the merges. `conflicts` are
    `(request_id, file, line, body)`, `quarantine` `(file, line, kind, reason, raw bytes)`; both
    are stored once per file, line and bytes.
    """
    insert_ignoring_existing(connection, _REQUESTS, requests)
    rename_requests(connection, renames)
    if merged:
        columns = [name for name in merged[0][0] if name != "request_id"]
        connection.execute(
            update(_REQUESTS)
            .where(_REQUESTS.c.request_id == bindparam("merged_id"))
            .values({name: bindparam(f"new_{name}") for name in columns}),
            [
                {"merged_id": row["request_id"], **{f"new_{name}": row[name] for name in columns}}
                for row, _, _, _ in merged
            ],
        )
        connection.execute(
            _MERGES.insert(),
            [
                dict(request_id=row["request_id"], source_file=source, line_no=line_no, added=", ".join(added),
                     merged_at=now)
                for row, source, line_no, added in merged
            ],
        )  # fmt: skip
    insert_ignoring_existing(connection, _TRACES, [dict(key=key, request_id=rid) for key, rid in trace_keys])
    created = list(flags)
    wanted: dict[str, list[str]] = {request_id: [FOLLOW_UP] for request_id in followed_up}
    times = dict(followed_up)
    for request_id, reasons, ts in reflagged:
        wanted[request_id] = list(dict.fromkeys([*reasons, *wanted.get(request_id, [])]))
        times[request_id] = ts
    if wanted:
        unflagged = _flag_stored(connection, wanted, now)
        created += [(request_id, wanted[request_id], times[request_id]) for request_id in unflagged]
    triage = [
        dict(
            request_id=request_id,
            status="new",
            reasons=reasons,
            labels=[],
            gold_chunk_ids=[],
            notes=[],
            request_ts=now if ts is None else ts,
            created_at=now,
            updated_at=now,
            updated_by=INGEST_USER,
            revision=1,
        )
        for request_id, reasons, ts in created
    ]
    insert_ignoring_existing(connection, _TRIAGE, triage)
    conflict_rows = [
        dict(
            request_id=request_id,
            source_file=source,
            line_no=line_no,
            body=body.decode("utf-8"),
            body_hash=hashlib.sha256(body).hexdigest(),
            detected_at=now,
        )
        for request_id, source, line_no, body in conflicts
    ]
    insert_ignoring_existing(connection, _CONFLICTS, conflict_rows)
    quarantine_rows = [
        dict(
            source_file=source,
            line_no=line_no,
            kind=kind,
            reason=reason,
            raw=raw,
            raw_hash=hashlib.sha256(raw).hexdigest(),
            quarantined_at=now,
        )
        for source, line_no, kind, reason, raw in quarantine
    ]
    insert_ignoring_existing(connection, _QUARANTINE, quarantine_rows)
    return [reasons for _, reasons, _ in created]


def _flag_stored(connection: Connection, wanted: dict[str, list[str]], now: datetime) -> list[str]:
    """Add the reasons `wanted` by request id to their triage records (with an audit row) when
    missing; the ids that have no record."""
    ids = list(wanted)
    existing: dict[str, tuple[list[str], int]] = {}
    for chunk in _chunks(ids):
        query = select(_TRIAGE.c.request_id, _TRIAGE.c.reasons, _TRIAGE.c.revision).where(
            _TRIAGE.c.request_id.in_(chunk)
        )
        for request_id, reasons, revision in connection.execute(query):
            existing[request_id] = (list(reasons or []), revision)
    audit = []
    for request_id, (reasons, revision) in existing.items():
        missing = [reason for reason in wanted[request_id] if reason not in reasons]
        if not missing:
            continue
        after = [*reasons, *missing]
        connection.execute(
            update(_TRIAGE)
            .where(_TRIAGE.c.request_id == request_id)
            .values(reasons=after, revision=revision + 1, updated_at=now, updated_by=INGEST_USER)
        )
        audit.append(
            dict(
                request_id=request_id,
                at=now,
                user=INGEST_USER,
                action="flag",
                change={"before": reasons, "after": after},
                revision=revision + 1,
            )
        )
    if audit:
        connection.execute(_AUDIT.insert(), audit)
    return [request_id for request_id in ids if request_id not in existing]
