"""The SQL side of ingest: one batch of parsed lines per short write transaction.

Classifies lines as new, duplicate or conflicting by request_id, inserts new requests (plain
driver executemany on SQLite, `INSERT … ON CONFLICT DO NOTHING` on PostgreSQL), applies the
flagging rules including the session follow-up rule, and stores quarantined lines and conflicts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Table, and_, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine

from ragtriage.config import FlaggingSettings
from ragtriage.errors import StoreError
from ragtriage.logs.flagging import REASON_FOLLOW_UP, LineRules, followed_up
from ragtriage.logs.reader import BadLine, LogLine
from ragtriage.store.db import write_session
from ragtriage.store.log_tables import (
    LogConflictRow,
    QuarantinedLineRow,
    RequestLogRow,
    TriageAuditRow,
    TriageRow,
)

if TYPE_CHECKING:
    from ragtriage.logs.ingest import IngestReport

#: Ids per `IN (…)` list: far below every backend's bound-parameter limit.
IN_CHUNK = 500
INGEST_USER = "ingest"
SQLITE_CACHE_KIB = 65536
SQLITE_AUTOCHECKPOINT_PAGES = 16384
_REQUEST_COLUMNS = (
    "request_id",
    "ts",
    "kb",
    "session_hash",
    "user_hash",
    "raw_query",
    "rating",
    "escalated",
    "body",
    "source_file",
    "source_line",
    "recovered",
    "ingested_at",
)
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
_SQLITE_SELECT_BODIES = "SELECT request_id, body FROM request_log WHERE request_id IN ({})"
_SQLITE_SELECT_SESSIONS = (
    "SELECT session_hash, request_id, ts FROM request_log WHERE session_hash IN ({}) AND ts >= ? AND ts <= ?"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)
_SQLITE_INSERT_REQUESTS = (
    f"INSERT INTO request_log ({', '.join(_REQUEST_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(_REQUEST_COLUMNS))}) ON CONFLICT DO NOTHING"
)


def _chunks(items: Sequence[Any], size: int = IN_CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _sqlite_time(moment: datetime) -> str:
    # The text SQLAlchemy's SQLite DateTime type stores, compares and parses back (naive UTC).
    if moment.utcoffset():
        moment = moment.astimezone(timezone.utc)
    return moment.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _time_us(value: datetime | str) -> int:
    """Epoch microseconds of a stored time (SQLite text or a datetime; naive means UTC)."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // _ONE_US


def _us_time(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def insert_ignoring_existing(connection: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """`INSERT … ON CONFLICT DO NOTHING` executemany, in the dialect of `connection` (SQLite or PostgreSQL).

    Raises:
        StoreError: another database backend.
    """
    if not rows:
        return
    dialect = connection.dialect.name
    if dialect == "sqlite":
        statement = sqlite_insert(table).on_conflict_do_nothing()
    elif dialect == "postgresql":
        statement = postgresql_insert(table).on_conflict_do_nothing()
    else:
        raise StoreError(
            f"request-log ingest supports SQLite and PostgreSQL, not {dialect}; change store.url"
        )
    connection.execute(statement, rows)


class BatchWriter:
    """Writes one batch per transaction: requests, flags, quarantine, conflicts; counts into `report`."""

    def __init__(self, engine: Engine, flagging: FlaggingSettings, report: IngestReport) -> None:
        self.engine = engine
        self.rules = LineRules(flagging)
        self.follow_up_minutes = flagging.follow_up_minutes
        self.report = report

    def write(self, source: str, good: list[LogLine], bad: list[BadLine]) -> None:
        """Store one batch and update the report."""
        if not good and not bad:
            return
        report = self.report
        now = datetime.now(timezone.utc)
        first: dict[str, LogLine] = {}
        repeats: list[LogLine] = []
        for line in good:
            if line.request_id in first:
                repeats.append(line)
            else:
                first[line.request_id] = line
        conflicts: list[LogLine] = []
        with write_session(self.engine) as session:
            connection = session.connection()
            sqlite = connection.dialect.name == "sqlite"
            if sqlite:
                # A bigger page cache for the random-key index inserts, and fewer (fsyncing)
                # checkpoints; both are per connection and harmless for later users of it.
                connection.exec_driver_sql(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
                connection.exec_driver_sql(f"PRAGMA wal_autocheckpoint={SQLITE_AUTOCHECKPOINT_PAGES}")
            request_table = RequestLogRow.__table__  # type: ignore[attr-defined]
            stored_bodies: dict[str, str] = {}
            for ids in _chunks(list(first)):
                if sqlite:
                    # Plain driver SQL: SQLAlchemy's compile and result processing cost more than the lookup.
                    cursor = connection.exec_driver_sql(
                        _SQLITE_SELECT_BODIES.format(_marks(len(ids))), tuple(ids)
                    )
                else:
                    cursor = connection.execute(
                        select(request_table.c.request_id, request_table.c.body).where(
                            request_table.c.request_id.in_(ids)
                        )
                    )
                stored_bodies.update(cursor.all())
            new_lines = []
            for request_id, line in first.items():
                stored_body = stored_bodies.get(request_id)
                if stored_body is None:
                    new_lines.append(line)
                elif stored_body == line.body:
                    report.duplicates += 1
                else:
                    conflicts.append(line)
            for line in repeats:
                if line.body == stored_bodies.get(line.request_id, first[line.request_id].body):
                    report.duplicates += 1
                else:
                    conflicts.append(line)
            # Look for stored session neighbours before inserting, so the query returns only old rows.
            followed = self._followed_up(connection, new_lines)
            self._insert_requests(connection, source, new_lines, now)
            report.ingested += len(new_lines)
            report.recovered += sum(1 for line in new_lines if line.recovered)
            self._flag(connection, new_lines, followed, now)
            self._insert_conflicts(connection, source, conflicts, now)
            self._insert_quarantine(connection, source, bad, now)

    def _insert_requests(
        self, connection: Connection, source: str, lines: list[LogLine], now: datetime
    ) -> None:
        if not lines:
            return
        if connection.dialect.name == "sqlite":
            # The hot path: plain tuples straight to the driver (no per-row type processing).
            ingested_at = _sqlite_time(now)
            rows = [
                (
                    ln.request_id,
                    ln.ts_text,
                    ln.kb,
                    ln.session,
                    ln.user,
                    ln.raw_query,
                    ln.rating,
                    int(ln.escalated),
                    ln.body,
                    source,
                    ln.line_no,
                    int(ln.recovered),
                    ingested_at,
                )
                for ln in lines
            ]
            connection.exec_driver_sql(_SQLITE_INSERT_REQUESTS, rows)  # type: ignore[arg-type]
            return
        dict_rows = [
            dict(
                request_id=ln.request_id,
                ts=ln.ts,
                kb=ln.kb,
                session_hash=ln.session,
                user_hash=ln.user,
                raw_query=ln.raw_query,
                rating=ln.rating,
                escalated=ln.escalated,
                body=ln.body,
                source_file=source,
                source_line=ln.line_no,
                recovered=ln.recovered,
                ingested_at=now,
            )
            for ln in lines
        ]
        insert_ignoring_existing(connection, RequestLogRow.__table__, dict_rows)  # type: ignore[attr-defined]

    def _flag(
        self,
        connection: Connection,
        new_lines: list[LogLine],
        followed: dict[str, int | None],
        now: datetime,
    ) -> None:
        reasons: dict[str, list[str]] = {}
        rules = self.rules
        for line in new_lines:
            line_reasons = rules.reasons(line) if line.reasons is None else list(line.reasons)
            if line_reasons:
                reasons[line.request_id] = line_reasons
        request_ts = {line.request_id: line.ts_us for line in new_lines}
        earlier: dict[str, int | None] = {}
        for request_id, ts in followed.items():
            if request_id in request_ts:
                line_reasons = reasons.setdefault(request_id, [])
                if REASON_FOLLOW_UP not in line_reasons:
                    line_reasons.append(REASON_FOLLOW_UP)
            else:
                earlier[request_id] = ts
        flags = [(rid, r, request_ts[rid]) for rid, r in reasons.items()]
        if earlier:
            flags.extend(self._flag_earlier(connection, earlier, now))
        self._insert_triage(connection, flags, now)
        self.report.flagged += len(flags)

    def _insert_triage(
        self, connection: Connection, flags: list[tuple[str, list[str], int | None]], now: datetime
    ) -> None:
        """New triage records (`new`, with their reasons) for flagged requests.

        `flags` are `(request_id, reasons, request time in epoch µs or None for the ingest time)`.
        """
        if not flags:
            return
        if connection.dialect.name == "sqlite":
            created = _sqlite_time(now)
            rows = [
                (
                    rid,
                    "new",
                    orjson.dumps(reasons).decode(),
                    "[]",
                    "[]",
                    "[]",
                    created if ts is None else _sqlite_time(_us_time(ts)),
                    created,
                    created,
                    INGEST_USER,
                    1,
                )
                for rid, reasons, ts in flags
            ]
            connection.exec_driver_sql(_SQLITE_INSERT_TRIAGE, rows)  # type: ignore[arg-type]
            return
        dict_rows = [
            dict(
                request_id=rid,
                status="new",
                reasons=reasons,
                labels=[],
                gold_chunk_ids=[],
                notes=[],
                request_ts=now if ts is None else _us_time(ts),
                created_at=now,
                updated_at=now,
                updated_by=INGEST_USER,
                revision=1,
            )
            for rid, reasons, ts in flags
        ]
        insert_ignoring_existing(connection, TriageRow.__table__, dict_rows)  # type: ignore[attr-defined]

    def _followed_up(self, connection: Connection, new_lines: list[LogLine]) -> dict[str, int | None]:
        """Ids (new or stored) followed up within the window by a request of the same session,
        with their request time in epoch µs.

        Called before the new lines are inserted: the query fetches only stored neighbours.
        """
        timed = [line for line in new_lines if line.session is not None and line.ts_us is not None]
        if not timed or self.follow_up_minutes <= 0:
            return {}
        window_us = timedelta(minutes=self.follow_up_minutes) // _ONE_US
        low = _us_time(min(line.ts_us for line in timed) - window_us)  # type: ignore[type-var]
        high = _us_time(max(line.ts_us for line in timed) + window_us)  # type: ignore[type-var]
        table = RequestLogRow.__table__  # type: ignore[attr-defined]
        sessions = sorted({line.session for line in timed})  # type: ignore[type-var]
        neighbours: list[tuple[str, str, int]] = [
            (line.session, line.request_id, line.ts_us) for line in timed
        ]  # type: ignore[misc]
        sqlite = connection.dialect.name == "sqlite"
        for chunk in _chunks(sessions):
            if sqlite:
                cursor = connection.exec_driver_sql(
                    _SQLITE_SELECT_SESSIONS.format(_marks(len(chunk))),
                    (*chunk, _sqlite_time(low), _sqlite_time(high)),
                )
            else:
                cursor = connection.execute(
                    select(table.c.session_hash, table.c.request_id, table.c.ts).where(
                        and_(table.c.session_hash.in_(chunk), table.c.ts >= low, table.c.ts <= high)
                    )
                )
            neighbours.extend((session, rid, _time_us(ts)) for session, rid, ts in cursor)
        flagged = followed_up(
            neighbours, self.follow_up_minutes, involving={line.request_id for line in timed}
        )
        ts_by_id = {request_id: ts for _session, request_id, ts in neighbours}
        return {request_id: ts_by_id.get(request_id) for request_id in flagged}

    def _flag_earlier(
        self, connection: Connection, earlier: dict[str, int | None], now: datetime
    ) -> list[tuple[str, list[str], int | None]]:
        """Add `follow_up` to stored requests; returns triage rows to create for those not yet flagged."""
        table = TriageRow.__table__  # type: ignore[attr-defined]
        existing: dict[str, tuple[list[str], int]] = {}
        for chunk in _chunks(list(earlier)):
            for request_id, reasons, revision in connection.execute(
                select(table.c.request_id, table.c.reasons, table.c.revision).where(
                    table.c.request_id.in_(chunk)
                )
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

    def _insert_conflicts(
        self, connection: Connection, source: str, lines: list[LogLine], now: datetime
    ) -> None:
        self.report.conflicts += len(lines)
        rows = [
            dict(
                request_id=ln.request_id,
                source_file=source,
                line_no=ln.line_no,
                body=ln.body,
                body_hash=hashlib.sha256(ln.body.encode()).hexdigest(),
                detected_at=now,
            )
            for ln in lines
        ]
        insert_ignoring_existing(connection, LogConflictRow.__table__, rows)  # type: ignore[attr-defined]

    def _insert_quarantine(
        self, connection: Connection, source: str, bad: list[BadLine], now: datetime
    ) -> None:
        report = self.report
        report.quarantined += len(bad)
        for line in bad:
            report.quarantined_by_kind[line.kind] = report.quarantined_by_kind.get(line.kind, 0) + 1
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
