"""The SQL side of `ragtriage monitor`: grouping keys, index-only counts, samples, confirmed cases,
new documents and their kept first-day recall, old-row backfill.

Counts run on the covering index `ix_request_log_monitor` (ts, pipeline_version, result_count,
rewrite_fired, rating, escalated, request_id), so a million stored requests are counted without
reading a single 1–2 KB row. Only the few requests a figure must look inside (confirmed cases, a
bounded sample, requests that mention a new document's chunk ids) have their bodies read.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Integer, and_, case, cast, func, literal, literal_column, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import ColumnElement

from ragtriage.store.db import read_session, write_session
from ragtriage.store.gold import gold_ids
from ragtriage.store.kb_repo import as_utc
from ragtriage.store.kb_tables import ChunkRow, DocumentRow
from ragtriage.store.log_tables import RequestLogRow, TriageRow
from ragtriage.store.monitor_tables import MonitorDocRecallRow

GroupBy = Literal["day", "version"]
#: Group of requests without a time (by day) or without a logged pipeline_version (by version).
UNKNOWN_GROUP = "-"

_REQUESTS = RequestLogRow.__table__  # type: ignore[attr-defined]


def group_key(engine: Engine, by: GroupBy) -> ColumnElement[Any]:
    """SQL expression of a request's group: its UTC day `YYYY-MM-DD`, or its pipeline_version."""
    if by == "version":
        return func.coalesce(_REQUESTS.c.pipeline_version, literal(UNKNOWN_GROUP))
    if engine.dialect.name == "sqlite":
        # SQLite stores times as naive-UTC text `YYYY-MM-DD HH:MM:SS.ffffff`: the day is its prefix.
        return func.coalesce(func.substr(_REQUESTS.c.ts, 1, 10), literal(UNKNOWN_GROUP))
    return func.coalesce(func.to_char(_REQUESTS.c.ts, "YYYY-MM-DD"), literal(UNKNOWN_GROUP))


def window(since: datetime | None, until: datetime | None) -> list[ColumnElement[bool]]:
    """Conditions on the request time (`since` ≤ ts < `until`)."""
    conditions: list[ColumnElement[bool]] = []
    if since is not None:
        conditions.append(_REQUESTS.c.ts >= since)
    if until is not None:
        conditions.append(_REQUESTS.c.ts < until)
    return conditions


def bad_feedback(bad_ratings: Sequence[str]) -> ColumnElement[bool]:
    """A bad rating (lower-case match with `[logs.flagging] bad_ratings`) or an escalation."""
    ratings = sorted({rating.strip().lower() for rating in bad_ratings})
    # Most requests carry no rating: the NULL test spares them the string functions.
    rated = and_(_REQUESTS.c.rating.is_not(None), func.lower(func.trim(_REQUESTS.c.rating)).in_(ratings))
    return or_(rated, _REQUESTS.c.escalated.is_(True))


@dataclass
class GroupCounts:
    """Index-only counts of one group."""

    requests: int = 0
    with_stage: int = 0
    """Requests that logged at least one retrieval stage."""
    empty: int = 0
    with_rewrite: int = 0
    rewrite_fired: int = 0
    bad: int = 0


def count_groups(
    engine: Engine,
    by: GroupBy,
    since: datetime | None,
    until: datetime | None,
    bad_ratings: Sequence[str],
    days: Sequence[tuple[str, datetime, datetime]] = (),
) -> dict[str, GroupCounts]:
    """Per-group counts from the monitor index. With `days` (`(key, start, end)`), one range query
    per day: no GROUP BY, so no sort of a million index entries; otherwise one grouped pass."""
    has_stage = _REQUESTS.c.result_count >= 0
    sums = (
        func.count(),
        func.sum(case((has_stage, 1), else_=0)),
        func.sum(case((_REQUESTS.c.result_count == 0, 1), else_=0)),
        func.count(_REQUESTS.c.rewrite_fired),
        func.sum(cast(_REQUESTS.c.rewrite_fired, Integer)),
        func.sum(case((bad_feedback(bad_ratings), 1), else_=0)),
    )
    groups: dict[str, GroupCounts] = {}
    with read_session(engine) as session:
        if by == "day" and days:
            for key, start, end in days:
                row = session.execute(select(*sums).where(*window(start, end))).one()
                if row[0]:
                    groups[key] = GroupCounts(*(int(value or 0) for value in row))
            return groups
        key_column = group_key(engine, by).label("key")
        statement = select(key_column, *sums).where(*window(since, until)).group_by(key_column)
        for row in session.execute(statement):
            groups[str(row[0])] = GroupCounts(*(int(value or 0) for value in row[1:]))
    return groups


def sample_bodies(
    engine: Engine, by: GroupBy, since: datetime | None, until: datetime | None, step: int, limit: int
) -> Iterator[tuple[str, str, str]]:
    """`(group, request_id, body)` of every `step`-th stored request in the window (at most `limit`).

    SQLite takes every request whose rowid is a multiple of `step` (the filter runs on the index,
    before any row is read); other databases use a hash of the request_id.
    """
    key = group_key(engine, by).label("key")
    if engine.dialect.name == "sqlite":
        picked = (literal_column("request_log.rowid") % step) == 0
    else:
        picked = func.mod(func.abs(func.hashtext(_REQUESTS.c.request_id)), step) == 0
    statement = (
        select(key, _REQUESTS.c.request_id, _REQUESTS.c.body)
        .where(*window(since, until), _REQUESTS.c.result_count > 0, picked)
        .limit(limit)
    )
    with read_session(engine) as session:
        for row in session.execute(statement):
            yield str(row[0]), row[1], row[2]


def bodies_of(engine: Engine, by: GroupBy, request_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """request_id → (group, body) of the given requests."""
    key = group_key(engine, by).label("key")
    found: dict[str, tuple[str, str]] = {}
    with read_session(engine) as session:
        for start in range(0, len(request_ids), 500):
            chunk = list(request_ids[start : start + 500])
            statement = select(_REQUESTS.c.request_id, key, _REQUESTS.c.body).where(
                _REQUESTS.c.request_id.in_(chunk)
            )
            for request_id, group, body in session.execute(statement):
                found[request_id] = (str(group), body)
    return found


def mentioning(
    engine: Engine,
    by: GroupBy,
    start: datetime,
    end: datetime,
    needles: Sequence[str],
) -> Generator[tuple[str, str], None, None]:
    """`(group, body)` of requests in [start, end) whose body contains one of `needles`, in time order."""
    spellings = [needle for needle in needles if needle]
    if not spellings:
        return
    key = group_key(engine, by).label("key")
    contains = or_(*(func.instr(_REQUESTS.c.body, form) > 0 for form in spellings))
    if engine.dialect.name != "sqlite":
        contains = or_(*(func.strpos(_REQUESTS.c.body, form) > 0 for form in spellings))
    statement = (
        select(key, _REQUESTS.c.body).where(and_(*window(start, end), contains)).order_by(_REQUESTS.c.ts)
    )
    with read_session(engine) as session:
        for group, body in session.execute(statement):
            yield str(group), body


def confirmed_cases(
    engine: Engine, by: GroupBy, since: datetime | None, until: datetime | None, bad_ratings: Sequence[str]
) -> list[tuple[str, str | None, list[str], bool, str]]:
    """`(request_id, primary label, gold ids, bad feedback, group)` of confirmed triage records."""
    triage = TriageRow.__table__  # type: ignore[attr-defined]
    statement = (
        select(
            triage.c.request_id,
            triage.c.primary_label,
            triage.c.gold_chunk_ids,
            bad_feedback(bad_ratings),
            group_key(engine, by),
        )
        .join(_REQUESTS, _REQUESTS.c.request_id == triage.c.request_id)
        .where(triage.c.status == "confirmed", *window(since, until))
    )
    with read_session(engine) as session:
        return [
            (row[0], row[1], gold_ids(row[2] or []), bool(row[3]), str(row[4]))
            for row in session.execute(statement)
        ]


def new_documents(
    engine: Engine, since: datetime | None, until: datetime, kb: str
) -> list[tuple[str, datetime, list[str]]]:
    """`(doc_id, updated_at in UTC, published chunk ids)` of documents updated in [since, until)."""
    documents = DocumentRow.__table__  # type: ignore[attr-defined]
    chunks = ChunkRow.__table__  # type: ignore[attr-defined]
    conditions = [documents.c.kb == kb, documents.c.status == "published", documents.c.updated_at < until]
    if since is not None:
        conditions.append(documents.c.updated_at >= since)
    with read_session(engine) as session:
        docs = session.execute(select(documents.c.doc_id, documents.c.updated_at).where(*conditions)).all()
        found = []
        for doc_id, updated_at in docs:
            chunk_ids = session.execute(
                select(chunks.c.chunk_id).where(chunks.c.doc_id == doc_id, chunks.c.status == "published")
            ).scalars()
            found.append((doc_id, as_utc(updated_at), sorted(chunk_ids)))
    return found


def count_window(engine: Engine, start: datetime, end: datetime) -> int:
    """Requests stored with a time in [start, end)."""
    with read_session(engine) as session:
        statement = select(func.count()).select_from(_REQUESTS).where(*window(start, end))
        return int(session.execute(statement).scalar_one())


def store_mark(engine: Engine) -> int | None:
    """SQLite's highest request rowid (one B-tree step): it moves whenever a request is ingested."""
    if engine.dialect.name != "sqlite":
        return None
    with engine.connect() as connection:
        return connection.exec_driver_sql("SELECT max(rowid) FROM request_log").scalar()


def cached_doc_recall(engine: Engine, doc_id: str, kb: str) -> MonitorDocRecallRow | None:
    """The kept first-day recall of a document, if any."""
    with read_session(engine) as session:
        return session.get(MonitorDocRecallRow, (doc_id, kb))


def save_doc_recall(
    engine: Engine,
    kb: str,
    doc_id: str,
    updated_at: datetime,
    window_requests: int,
    mark: int | None,
    chunk_ids: Sequence[str],
    found: Iterable[str],
) -> None:
    """Keep (or replace) the first-day recall of a document."""
    with write_session(engine) as session:
        row = session.get(MonitorDocRecallRow, (doc_id, kb)) or MonitorDocRecallRow(
            doc_id=doc_id, kb=kb, updated_at=updated_at, window_requests=window_requests
        )
        row.updated_at, row.window_requests, row.store_mark = updated_at, window_requests, mark
        row.chunk_ids, row.found = list(chunk_ids), sorted(found)
        session.add(row)


def bodies_missing_columns(engine: Engine, limit: int) -> list[tuple[str, str]]:
    """`(request_id, body)` of requests stored before the monitor columns existed (NULL
    `result_count`), through the partial index `ix_request_log_facts_missing`: one index probe on a
    store ingested by this version."""
    with read_session(engine) as session:
        statement = (
            select(_REQUESTS.c.request_id, _REQUESTS.c.body)
            .where(_REQUESTS.c.result_count.is_(None))
            .limit(limit)
        )
        return [(row[0], row[1]) for row in session.execute(statement)]


def set_monitor_columns(engine: Engine, rows: Sequence[tuple[str, str | None, int, bool | None]]) -> None:
    """Set `(request_id, pipeline_version, result_count, rewrite_fired)` of stored requests."""
    with write_session(engine) as session:
        for request_id, version, count, fired in rows:
            session.execute(
                update(_REQUESTS)
                .where(_REQUESTS.c.request_id == request_id)
                .values(pipeline_version=version, result_count=count, rewrite_fired=fired)
            )
