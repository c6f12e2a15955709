"""The SQL side of ingest: one parsed batch per short write transaction.

Classifies rows as new, duplicate or conflicting by request_id, inserts new requests (plain
driver executemany on SQLite, `INSERT … ON CONFLICT DO NOTHING` on PostgreSQL), applies the
session follow-up rule and creates triage records for flagged requests, and stores quarantined
lines and conflicts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Table, and_, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from ragtriage.config import FlaggingSettings
from ragtriage.errors import StoreError
from ragtriage.logs.batches import (
    REQUEST_COLUMNS,
    ROW_BODY,
    ROW_RECOVERED,
    ROW_REQUEST_ID,
    ROW_SOURCE_LINE,
    ROW_TS,
    ParsedBatch,
    sqlite_time,
)
from ragtriage.logs.flagging import REASON_FOLLOW_UP, followed_up_in_timeline
from ragtriage.logs.reader import BadLine, same_request
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
SQLITE_CACHE_KIB = 16384
SQLITE_AUTOCHECKPOINT_PAGES = 16384
"""Checkpoint once the WAL holds this many pages (512 MB on 32 KiB pages): every commit rewrites
the primary-key pages it touched, and a checkpoint copies each page once however often it was
rewritten, so rare checkpoints save most of those copies (1M lines: about 1.1× faster than 64 MB)."""
SQLITE_WAL_SIZE_LIMIT = 64 << 20
"""Bytes the WAL file is cut back to once checkpointed, so a big ingest does not leave it large."""
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
#: Sessions per neighbour query: one batch's sessions in one query (SQLite allows 32,766 parameters).
SESSIONS_PER_QUERY = 10_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)
# The body arrives as UTF-8 bytes; CAST stores it as TEXT (what the column and every reader expect).
_SQLITE_INSERT_REQUESTS = (
    f"INSERT INTO request_log ({', '.join(REQUEST_COLUMNS)}) VALUES ("
    + ", ".join("CAST(? AS TEXT)" if column == "body" else "?" for column in REQUEST_COLUMNS)
    + ") ON CONFLICT DO NOTHING"
)


_Neighbours = tuple[list[tuple[str, str, int]], dict[str, str | None]]


@dataclass(slots=True)
class PreparedBatch:
    """The pure-Python part of writing a batch, done before the write lock is needed (an ingest
    worker prepares while the other one writes)."""

    sorted_rows: list[tuple[Any, ...]]
    """`rows` in request_id order (see `_by_request_id`)."""
    unique_ids: bool
    """No request_id repeats within the batch."""
    windows: list[tuple[str, str]]
    """Merged follow-up windows around the batch's times, as naive-UTC SQLite text."""
    session_chunks: list[list[str]]
    timeline: list[tuple[str, int, str]]
    """`(session, ts µs, request_id)` of the timed rows, sorted (the follow-up rule's order)."""
    timed_ids: set[str]
    ts_by_id: dict[str, str | None]
    """Request time (naive-UTC text) by request_id; the first row of an id wins."""


def prepare_batch(batch: ParsedBatch, follow_up_minutes: float) -> PreparedBatch:
    """Sort and index `batch` for `BatchWriter.write` (no database access)."""
    rows, timed = batch.rows, batch.timed
    ids = [row[ROW_REQUEST_ID] for row in rows]
    windows: list[tuple[str, str]] = []
    if timed and follow_up_minutes > 0:
        window_us = timedelta(minutes=follow_up_minutes) // _ONE_US
        stretches: list[list[int]] = []
        for ts in sorted({item[2] for item in timed}):
            if stretches and ts - window_us <= stretches[-1][1]:
                stretches[-1][1] = ts + window_us
            else:
                stretches.append([ts - window_us, ts + window_us])
        windows = [
            (
                sqlite_time(_EPOCH + timedelta(microseconds=low)),
                sqlite_time(_EPOCH + timedelta(microseconds=high)),
            )
            for low, high in stretches
        ]
    return PreparedBatch(
        sorted_rows=_by_request_id(rows),
        unique_ids=len(set(ids)) == len(ids),
        windows=windows,
        session_chunks=[
            list(chunk) for chunk in _chunks(sorted({item[0] for item in timed}), SESSIONS_PER_QUERY)
        ],
        timeline=sorted([(session, ts, request_id) for session, request_id, ts in timed]),
        timed_ids={item[1] for item in timed},
        ts_by_id=dict(zip(map(_request_id_of, reversed(rows)), map(_ts_of, reversed(rows)), strict=True)),
    )


def _chunks(items: Sequence[Any], size: int = IN_CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _by_request_id(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows in request_id order. Ids are random: inserted in order, each page of the primary-key
    index is visited once per batch instead of once per row, which on a store bigger than the
    page cache makes ingest about 1.5× faster."""
    return sorted(rows, key=_request_id_of)


_request_id_of = itemgetter(ROW_REQUEST_ID)
_ts_of = itemgetter(ROW_TS)


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _time_us(value: datetime | str) -> int:
    """Epoch microseconds of a stored time (SQLite text or a datetime; naive means UTC)."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // _ONE_US


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
        statement = sqlite_insert(table).on_conflict_do_nothing()
    elif dialect == "postgresql":
        statement = postgresql_insert(table).on_conflict_do_nothing()
    else:
        raise StoreError(
            f"request-log ingest supports SQLite and PostgreSQL, not {dialect}; change store.url"
        )
    connection.execute(statement, rows)


class BatchWriter:
    """Writes parsed batches in `BEGIN IMMEDIATE` transactions of about `transaction_lines` lines:
    requests, flags, quarantine, conflicts; counts into `report`.

    Call `write` per batch and `commit` at the end (or on a stop); `rollback` on an error. A
    transaction spans several batches because each commit rewrites every index page the random
    request ids touched: 10,000 lines per commit write half the pages 5,000 would.

    On SQLite a batch is first inserted as if every request were new, inside a savepoint, and the
    driver's change count confirms it; only when some request_id was already stored (or repeats
    within the batch) is that insert rolled back and the batch classified row by row (new,
    duplicate, conflict). After a batch with known ids the next one is classified up front, so a
    re-ingest (all duplicates) does not insert twice.
    """

    def __init__(
        self,
        engine: Engine,
        flagging: FlaggingSettings,
        report: IngestReport,
        *,
        transaction_lines: int = 10_000,
    ) -> None:
        self.engine = engine
        self.follow_up_minutes = flagging.follow_up_minutes
        self.report = report
        self.transaction_lines = transaction_lines
        self._expect_known_ids = False
        self._session: Session | None = None
        self._connection: Connection | None = None
        self._lines_in_transaction = 0

    def _begin(self) -> Connection:
        bound = self.engine
        if bound.dialect.name == "sqlite":
            bound = bound.execution_options(sqlite_begin="IMMEDIATE")
        self._session = Session(bound, expire_on_commit=False)
        connection = self._connection = self._session.connection()
        if connection.dialect.name == "sqlite":
            # A page cache for the random-key index inserts (16 MB: with two writers taking turns
            # it is emptied at every turn anyway) and rare checkpoints; per connection (a worker's
            # ends with it; in-process ingest is for small files).
            connection.exec_driver_sql(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
            connection.exec_driver_sql(f"PRAGMA wal_autocheckpoint={SQLITE_AUTOCHECKPOINT_PAGES}")
            connection.exec_driver_sql(f"PRAGMA journal_size_limit={SQLITE_WAL_SIZE_LIMIT}")
        return connection

    def commit(self) -> None:
        """Commit the open transaction, if any."""
        session, self._session, self._connection = self._session, None, None
        self._lines_in_transaction = 0
        if session is not None:
            try:
                session.commit()
            finally:
                session.close()

    def rollback(self) -> None:
        """Roll the open transaction back, if any (its lines stay counted: the caller raises)."""
        session, self._session, self._connection = self._session, None, None
        self._lines_in_transaction = 0
        if session is not None:
            try:
                session.rollback()
            finally:
                session.close()

    def write(self, source: str, batch: ParsedBatch, prepared: PreparedBatch | None = None) -> None:
        """Store one batch (read from `source`) in the open transaction and update the report;
        commits once the transaction holds `transaction_lines` lines. `prepared` is
        `prepare_batch(batch, …)` when the caller made it beforehand.

        Raises:
            Exception: whatever the database raised; the transaction is rolled back.
        """
        if not batch.rows and not batch.bad:
            return
        connection = self._connection or self._begin()
        try:
            self._write(connection, source, batch, prepared or prepare_batch(batch, self.follow_up_minutes))
        except BaseException:
            self.rollback()
            raise
        self._lines_in_transaction += len(batch.rows) + len(batch.bad)
        if self._lines_in_transaction >= self.transaction_lines:
            self.commit()

    def _write(
        self, connection: Connection, source: str, batch: ParsedBatch, prepared: PreparedBatch
    ) -> None:
        rows, bad = batch.rows, batch.bad
        report = self.report
        now = datetime.now(timezone.utc)
        sqlite = connection.dialect.name == "sqlite"
        inserted: set[int] | None = None  # indices of the rows inserted; None: all of them
        conflicts: list[tuple[Any, ...]] = []
        neighbours: _Neighbours = ([], {})
        if rows:
            # Read before inserting, so that the query returns only requests stored earlier.
            neighbours = self._stored_neighbours(connection, prepared)
            optimistic = sqlite and not self._expect_known_ids and prepared.unique_ids
            if not (optimistic and self._insert_all_new(connection, prepared.sorted_rows)):
                inserted, conflicts = self._classify(connection, rows)
                self._insert_requests(connection, [rows[i] for i in sorted(inserted)])
            self._expect_known_ids = inserted is not None and len(inserted) < len(rows)
        new_count = len(rows) if inserted is None else len(inserted)
        report.ingested += new_count
        if new_count:
            new_rows = rows if inserted is None else [rows[i] for i in sorted(inserted)]
            report.recovered += sum(row[ROW_RECOVERED] for row in new_rows)
            self._flag(connection, batch, prepared, inserted, new_rows, neighbours, now)
        self._insert_conflicts(connection, source, conflicts, now)
        self._insert_quarantine(connection, source, bad, now)

    def _insert_all_new(self, connection: Connection, sorted_rows: list[tuple[Any, ...]]) -> bool:
        """Insert every row (ids unique within the batch, in request_id order) inside a
        savepoint; False, with nothing inserted, when some request_id was already stored."""
        driver = connection.connection.driver_connection
        connection.exec_driver_sql("SAVEPOINT ingest_batch")
        before = driver.total_changes  # type: ignore[union-attr]
        connection.exec_driver_sql(_SQLITE_INSERT_REQUESTS, sorted_rows)  # type: ignore[arg-type]
        if driver.total_changes - before == len(sorted_rows):  # type: ignore[union-attr]
            connection.exec_driver_sql("RELEASE ingest_batch")
            return True
        connection.exec_driver_sql("ROLLBACK TO ingest_batch")
        connection.exec_driver_sql("RELEASE ingest_batch")
        return False

    def _classify(
        self, connection: Connection, rows: list[tuple[Any, ...]]
    ) -> tuple[set[int], list[tuple[Any, ...]]]:
        """`(indices of the new rows, conflicting rows)`; duplicates are counted in the report.

        A request_id already stored, or earlier in the batch, with the same request (`same_request`)
        is a duplicate; with a different one it is a conflict.
        """
        first: dict[str, int] = {}
        repeats: list[int] = []
        for index, row in enumerate(rows):
            if row[ROW_REQUEST_ID] in first:
                repeats.append(index)
            else:
                first[row[ROW_REQUEST_ID]] = index
        stored = self._stored_bodies(connection, list(first))
        new: set[int] = set()
        conflicts: list[tuple[Any, ...]] = []
        report = self.report
        for request_id, index in first.items():
            stored_body = stored.get(request_id)
            if stored_body is None:
                new.add(index)
            elif same_request(stored_body, rows[index][ROW_BODY]):
                report.duplicates += 1
            else:
                conflicts.append(rows[index])
        for index in repeats:
            row = rows[index]
            known = stored.get(row[ROW_REQUEST_ID], rows[first[row[ROW_REQUEST_ID]]][ROW_BODY])
            if same_request(known, row[ROW_BODY]):
                report.duplicates += 1
            else:
                conflicts.append(row)
        return new, conflicts

    def _stored_bodies(self, connection: Connection, ids: list[str]) -> dict[str, bytes]:
        """The stored bodies (UTF-8 bytes) of those of `ids` that are stored."""
        stored: dict[str, bytes] = {}
        table = RequestLogRow.__table__  # type: ignore[attr-defined]
        sqlite = connection.dialect.name == "sqlite"
        for chunk in _chunks(ids):
            if sqlite:
                # Plain driver SQL: SQLAlchemy's compile and result processing cost more than the lookup.
                cursor = connection.exec_driver_sql(
                    _SQLITE_SELECT_BODIES.format(_marks(len(chunk))), tuple(chunk)
                )
                stored.update(cursor.all())  # type: ignore[arg-type]
            else:
                for request_id, body in connection.execute(
                    select(table.c.request_id, table.c.body).where(table.c.request_id.in_(chunk))
                ):
                    stored[request_id] = body.encode("utf-8")
        return stored

    def _insert_requests(self, connection: Connection, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        if connection.dialect.name == "sqlite":
            # Plain tuples straight to the driver (no per-row type processing).
            connection.exec_driver_sql(_SQLITE_INSERT_REQUESTS, _by_request_id(rows))  # type: ignore[arg-type]
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
            )
            dict_rows.append(item)
        insert_ignoring_existing(connection, RequestLogRow.__table__, dict_rows)  # type: ignore[attr-defined]

    def _flag(
        self,
        connection: Connection,
        batch: ParsedBatch,
        prepared: PreparedBatch,
        inserted: set[int] | None,
        new_rows: list[tuple[Any, ...]],
        neighbours: _Neighbours,
        now: datetime,
    ) -> None:
        """Triage records for the new rows that the per-line rules or the follow-up rule flag,
        and the follow-up reason for stored requests that a new one follows up."""
        rows = batch.rows
        reasons: dict[str, list[str]] = {}
        for index, line_reasons in batch.flags:
            if inserted is None or index in inserted:
                reasons[rows[index][ROW_REQUEST_ID]] = list(line_reasons)
        timeline, timed_ids = prepared.timeline, prepared.timed_ids
        if inserted is not None:
            new_ids = {row[ROW_REQUEST_ID] for row in new_rows}
            timeline = [item for item in timeline if item[2] in new_ids]
            timed_ids = timed_ids & new_ids
        stored, stored_ts = neighbours
        followed: set[str] = set()
        if timeline and self.follow_up_minutes > 0:
            if stored:
                # Sorted runs merge in about linear time.
                timeline = sorted(timeline + [(session, ts, rid) for session, rid, ts in stored])
            followed = followed_up_in_timeline(timeline, self.follow_up_minutes, involving=timed_ids)
        earlier: dict[str, str | None] = {}
        for request_id in followed:
            if request_id in stored_ts:
                earlier[request_id] = stored_ts[request_id]
            else:
                line_reasons = reasons.setdefault(request_id, [])
                if REASON_FOLLOW_UP not in line_reasons:
                    line_reasons.append(REASON_FOLLOW_UP)
        flags: list[tuple[str, list[str], str | None]] = []
        if reasons:
            ts_by_id = prepared.ts_by_id
            flags = [(request_id, r, ts_by_id[request_id]) for request_id, r in reasons.items()]
        if earlier:
            flags.extend(self._flag_earlier(connection, earlier, now))
        self._insert_triage(connection, flags, now)
        self.report.flagged += len(flags)

    def _insert_triage(
        self, connection: Connection, flags: list[tuple[str, list[str], str | None]], now: datetime
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
                request_ts=now if ts is None else _text_time(ts),
                created_at=now,
                updated_at=now,
                updated_by=INGEST_USER,
                revision=1,
            )
            for rid, reasons, ts in flags
        ]
        insert_ignoring_existing(connection, TriageRow.__table__, dict_rows)  # type: ignore[attr-defined]

    def _stored_neighbours(self, connection: Connection, prepared: PreparedBatch) -> _Neighbours:
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

    def _flag_earlier(
        self, connection: Connection, earlier: dict[str, str | None], now: datetime
    ) -> list[tuple[str, list[str], str | None]]:
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
        self, connection: Connection, source: str, conflicts: list[tuple[Any, ...]], now: datetime
    ) -> None:
        self.report.conflicts += len(conflicts)
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
