"""The SQL side of ingest: one parsed batch per short write transaction.

Classifies rows as new, duplicate or conflicting by request_id, inserts new requests (plain
driver executemany on SQLite, `INSERT … ON CONFLICT DO NOTHING` on PostgreSQL), applies the
session follow-up rule and creates triage records for flagged requests, and stores quarantined
lines and conflicts (the statements are in `ingest_sql`).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any

from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from ragtriage.config.settings import FlaggingSettings
from ragtriage.logs.batches import ROW_BODY, ROW_RECOVERED, ROW_REQUEST_ID, ParsedBatch
from ragtriage.logs.flagging import REASON_FOLLOW_UP, followed_up_in_timeline, reason_key
from ragtriage.logs.log_line import BadLine
from ragtriage.logs.prepared_batch import PreparedBatch, prepare_batch
from ragtriage.logs.reader import same_request
from ragtriage.logs.report import IngestReport, add_counts
from ragtriage.store import ingest_sql
from ragtriage.store.ingest_sql import Neighbours

SQLITE_CACHE_KIB = 16384
SQLITE_AUTOCHECKPOINT_PAGES = 16384
"""Checkpoint once the WAL holds this many pages (512 MB on 32 KiB pages): every commit rewrites
the primary-key pages it touched, and a checkpoint copies each page once however often it was
rewritten, so rare checkpoints save most of those copies (1M lines: about 1.1× faster than 64 MB)."""
SQLITE_WAL_SIZE_LIMIT = 64 << 20
"""Bytes the WAL file is cut back to once checkpointed, so a big ingest does not leave it large."""


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
        neighbours: Neighbours = ([], {})
        if rows:
            # Read before inserting, so that the query returns only requests stored earlier.
            neighbours = ingest_sql.stored_neighbours(connection, prepared)
            optimistic = sqlite and not self._expect_known_ids and prepared.unique_ids
            if not (optimistic and ingest_sql.insert_all_new(connection, prepared.sorted_rows)):
                inserted, conflicts = self._classify(connection, rows)
                ingest_sql.insert_requests(connection, [rows[i] for i in sorted(inserted)])
            self._expect_known_ids = inserted is not None and len(inserted) < len(rows)
        new_count = len(rows) if inserted is None else len(inserted)
        report.ingested += new_count
        if new_count:
            new_rows = rows if inserted is None else [rows[i] for i in sorted(inserted)]
            report.recovered += sum(row[ROW_RECOVERED] for row in new_rows)
            self._flag(connection, batch, prepared, inserted, new_rows, neighbours, now)
        self._insert_conflicts(connection, source, conflicts, now)
        self._insert_quarantine(connection, source, bad, now)

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
        stored = ingest_sql.stored_bodies(connection, list(first))
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

    def _flag(
        self,
        connection: Connection,
        batch: ParsedBatch,
        prepared: PreparedBatch,
        inserted: set[int] | None,
        new_rows: list[tuple[Any, ...]],
        neighbours: Neighbours,
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
            flags.extend(ingest_sql.flag_earlier(connection, earlier, now))
        ingest_sql.insert_triage(connection, flags, now)
        self.report.flagged += len(flags)
        add_counts(self.report.flagged_by_reason, Counter(reason_key(r) for _, r, _ in flags))

    def _insert_conflicts(
        self, connection: Connection, source: str, conflicts: list[tuple[Any, ...]], now: datetime
    ) -> None:
        self.report.conflicts += len(conflicts)
        ingest_sql.insert_conflicts(connection, source, conflicts, now)

    def _insert_quarantine(
        self, connection: Connection, source: str, bad: list[BadLine], now: datetime
    ) -> None:
        report = self.report
        report.quarantined += len(bad)
        add_counts(report.quarantined_by_kind, Counter(line.kind for line in bad))
        ingest_sql.insert_quarantine(connection, source, bad, now)
