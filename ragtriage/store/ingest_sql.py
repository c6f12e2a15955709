"""The SQL statements of ingest, as functions of an open connection (SQLite or PostgreSQL).

SQLite takes plain driver SQL with tuples (SQLAlchemy's compile and per-row type processing cost
more than the work itself); PostgreSQL takes SQLAlchemy Core with dict rows.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any

import orjson
from sqlalchemy import Table, and_, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from ragtriage.errors import StoreError
from ragtriage.logs.batches import REQUEST_COLUMNS, ROW_BODY, ROW_REQUEST_ID, ROW_SOURCE_LINE, sqlite_time
from ragtriage.logs.flagging import REASON_FOLLOW_UP
from ragtriage.logs.log_line import EPOCH, ONE_US, BadLine
from ragtriage.logs.prepared_batch import PreparedBatch, by_request_id, chunks
from ragtriage.store.log_tables import (
    LogConflictRow,
    QuarantinedLineRow,
    RequestLogRow,
    TriageAuditRow,
    TriageRow,
)

INGEST_USER = "ingest"

_TRIAGE_INSERT_COLUMNS = (
    "request_id",
    "status",
    "reasons",
    "labels",
    "gold_chunk_ids",
    "notes",
    "request_ts",
    "created_at",
    "updated_at",
    "updated_by",
    "revision",
)
_SQLITE_INSERT_TRIAGE = (
    f"INSERT INTO triage_record ({', '.join(_TRIAGE_INSERT_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(_TRIAGE_INSERT_COLUMNS))}) ON CONFLICT DO NOTHING"
)
# Bodies come back as bytes, to compare with the parsed rows' bytes without decoding.
_SQLITE_SELECT_BODIES = "SELECT request_id, CAST(body AS BLOB) FROM request_log WHERE request_id IN ({})"
_SQLITE_SELECT_WINDOW = (
    "SELECT session_hash, request_id, ts FROM request_log WHERE ts >= ? AND ts <= ? AND session_hash IN ({})"
)
# The body arrives as UTF-8 bytes; CAST stores it as TEXT (what the column and every reader expect).
_SQLITE_INSERT_REQUESTS = (
    f"INSERT INTO request_log ({', '.join(REQUEST_COLUMNS)}) VALUES ("
    + ", ".join("CAST(? AS TEXT)" if column == "body" else "?" for column in REQUEST_COLUMNS)
    + ") ON CONFLICT DO NOTHING"
)


Neighbours = tuple[list[tuple[str, str, int]], dict[str, str | None]]
"""`([(session, request_id, ts µs)], {request_id: ts as naive-UTC text})` of stored requests."""


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _time_us(value: datetime | str) -> int:
    """Epoch microseconds of a stored time (SQLite text or a datetime; naive means UTC)."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - EPOCH) // ONE_US


def _text_time(value: str | None) -> datetime | None:
    """The aware UTC time of a naive-UTC SQLite text (for the PostgreSQL path)."""
    return None if value is None else datetime.fromisoformat(value).replace(tzinfo=timezone.utc)


def _stored_time_text(value: datetime | str | None) -> str | None:
    """A stored time as naive-UTC SQLite text."""
    return value if value is None or isinstance(value, str) else sqlite_time(value)


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


def insert_all_new(connection: Connection, sorted_rows: list[tuple[Any, ...]]) -> bool:
    """SQLite: insert every row (ids unique within the batch, in request_id order) inside a
    savepoint; False, with nothing inserted, when some request_id was already stored."""
    driver = connection.connection.driver_connection
    connection.exec_driver_sql("SAVEPOINT ingest_batch")
    before = driver.total_changes  # type: ignore[union-attr]
    connection.exec_driver_sql(_SQLITE_INSERT_REQUESTS, sorted_rows)
    if driver.total_changes - before == len(sorted_rows):  # type: ignore[union-attr]
        connection.exec_driver_sql("RELEASE ingest_batch")
        return True
    connection.exec_driver_sql("ROLLBACK TO ingest_batch")
    connection.exec_driver_sql("RELEASE ingest_batch")
    return False


def stored_bodies(connection: Connection, ids: list[str]) -> dict[str, bytes]:
    """The stored bodies (UTF-8 bytes) of those of `ids` that are stored."""
    stored: dict[str, bytes] = {}
    table = RequestLogRow.__table__  # type: ignore[attr-defined]
    sqlite = connection.dialect.name == "sqlite"
    for chunk in chunks(ids):
        if sqlite:
            # Plain driver SQL: SQLAlchemy's compile and result processing cost more than the lookup.
            cursor = connection.exec_driver_sql(
                _SQLITE_SELECT_BODIES.format(_marks(len(chunk))), tuple(chunk)
            )
            stored.update(cursor.all())
        else:
            for request_id, body in connection.execute(
                select(table.c.request_id, table.c.body).where(table.c.request_id.in_(chunk))
            ):
                stored[request_id] = body.encode("utf-8")
    return stored


def insert_requests(connection: Connection, rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    if connection.dialect.name == "sqlite":
        # Plain tuples straight to the driver (no per-row type processing).
        connection.exec_driver_sql(_SQLITE_INSERT_REQUESTS, by_request_id(rows))
        return
    dict_rows = []
    for row in rows:
        item = dict(zip(REQUEST_COLUMNS, row, strict=True))
        item.update(
            ts=_text_time(item["ts"]),
            escalated=bool(item["escalated"]),
            body=item["body"].decode("utf-8"),
            recovered=bool(item["recovered"]),
            ingested_at=_text_time(item["ingested_at"]),
            rewrite_fired=None if item["rewrite_fired"] is None else bool(item["rewrite_fired"]),
        )
        dict_rows.append(item)
    insert_ignoring_existing(connection, RequestLogRow.__table__, dict_rows)  # type: ignore[attr-defined]


def insert_triage(
    connection: Connection, flags: list[tuple[str, list[str], str | None]], now: datetime
) -> None:
    """New triage records (`new`, with their reasons) for flagged requests.

    `flags` are `(request_id, reasons, request time as naive-UTC text, or None for the ingest time)`.
    """
    if not flags:
        return
    if connection.dialect.name == "sqlite":
        created = sqlite_time(now)
        rows = [
            (
                rid,
                "new",
                orjson.dumps(reasons).decode(),
                "[]",
                "[]",
                "[]",
                created if ts is None else ts,
                created,
                created,
                INGEST_USER,
                1,
            )
            for rid, reasons, ts in flags
        ]
        connection.exec_driver_sql(_SQLITE_INSERT_TRIAGE, rows)
        return
    dict_rows = [
        dict(
            request_id=rid,
            status="new",
            reasons=reasons,
            labels=[],
            gold_chunk_ids=[],
            notes=[],
            request_ts=now if ts is None else _text_time(ts),
            created_at=now,
            updated_at=now,
            updated_by=INGEST_USER,
            revision=1,
        )
        for rid, reasons, ts in flags
    ]
    insert_ignoring_existing(connection, TriageRow.__table__, dict_rows)  # type: ignore[attr-defined]


def stored_neighbours(connection: Connection, prepared: PreparedBatch) -> Neighbours:
    """Stored requests of the batch's sessions within the follow-up window of one of its
    times: `([(session, request_id, ts µs)], {request_id: ts as naive-UTC text})`.

    Reads the (ts, session, request_id) index once per stretch of overlapping windows: logs
    come in time order, so a batch is one or a few stretches and the index grows at its end.
    """
    found: list[tuple[str, str, int]] = []
    found_ts: dict[str, str | None] = {}
    if not prepared.windows:
        return found, found_ts
    table = RequestLogRow.__table__  # type: ignore[attr-defined]
    driver = connection.connection.driver_connection if connection.dialect.name == "sqlite" else None
    for low, high in prepared.windows:
        for chunk in prepared.session_chunks:
            if driver is not None:
                # The driver's own cursor: SQLAlchemy's row processing costs more than the read.
                rows: Any = driver.execute(
                    _SQLITE_SELECT_WINDOW.format(_marks(len(chunk))), (low, high, *chunk)
                )
            else:
                rows = connection.execute(
                    select(table.c.session_hash, table.c.request_id, table.c.ts).where(
                        and_(
                            table.c.ts >= _text_time(low),
                            table.c.ts <= _text_time(high),
                            table.c.session_hash.in_(chunk),
                        )
                    )
                )
            for session, request_id, ts in rows:
                found.append((session, request_id, _time_us(ts)))
                found_ts[request_id] = _stored_time_text(ts)
    return found, found_ts


def flag_earlier(
    connection: Connection, earlier: dict[str, str | None], now: datetime
) -> list[tuple[str, list[str], str | None]]:
    """Add `follow_up` to stored requests; returns triage rows to create for those not yet flagged."""
    table = TriageRow.__table__  # type: ignore[attr-defined]
    existing: dict[str, tuple[list[str], int]] = {}
    for chunk in chunks(list(earlier)):
        for request_id, reasons, revision in connection.execute(
            select(table.c.request_id, table.c.reasons, table.c.revision).where(table.c.request_id.in_(chunk))
        ):
            existing[request_id] = (list(reasons or []), revision)
    audit = []
    for request_id, (reasons, revision) in existing.items():
        if REASON_FOLLOW_UP in reasons:
            continue
        connection.execute(
            update(table)
            .where(table.c.request_id == request_id)
            .values(
                reasons=[*reasons, REASON_FOLLOW_UP],
                revision=revision + 1,
                updated_at=now,
                updated_by=INGEST_USER,
            )
        )
        change = {"before": reasons, "after": [*reasons, REASON_FOLLOW_UP]}
        audit.append(
            dict(
                request_id=request_id,
                at=now,
                user=INGEST_USER,
                action="flag",
                change=change,
                revision=revision + 1,
            )
        )
    if audit:
        connection.execute(TriageAuditRow.__table__.insert(), audit)  # type: ignore[attr-defined]
    return [(rid, [REASON_FOLLOW_UP], ts) for rid, ts in earlier.items() if rid not in existing]


def insert_conflicts(
    connection: Connection, source: str, conflicts: list[tuple[Any, ...]], now: datetime
) -> None:
    """Store conflicting bodies in `log_conflict` (once per request_id and body)."""
    rows = [
        dict(
            request_id=row[ROW_REQUEST_ID],
            source_file=source,
            line_no=row[ROW_SOURCE_LINE],
            body=row[ROW_BODY].decode("utf-8"),
            body_hash=hashlib.sha256(row[ROW_BODY]).hexdigest(),
            detected_at=now,
        )
        for row in conflicts
    ]
    insert_ignoring_existing(connection, LogConflictRow.__table__, rows)  # type: ignore[attr-defined]


def insert_quarantine(connection: Connection, source: str, bad: list[BadLine], now: datetime) -> None:
    """Store bad lines with their file, line, kind, reason and bytes (once per line and bytes)."""
    rows = [
        dict(
            source_file=source,
            line_no=b.line_no,
            kind=b.kind,
            reason=f"{b.message} — {b.fix}",
            raw=b.raw,
            raw_hash=hashlib.sha256(b.raw).hexdigest(),
            quarantined_at=now,
        )
        for b in bad
    ]
    insert_ignoring_existing(connection, QuarantinedLineRow.__table__, rows)  # type: ignore[attr-defined]
