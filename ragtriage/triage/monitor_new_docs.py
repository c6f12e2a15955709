"""First-day recall of new documents for `ragtriage monitor`.

For each document added or updated in the window (its `updated_at`), the share of its published
chunks that any logged request retrieved — at any stage, or cited — within 24 hours of
`updated_at`. One pass over the document's first day: SQL keeps only requests whose body mentions
the ids' common prefix (or one of the ids when they share none), Python checks the stage lists
exactly, and the pass stops once every chunk was seen. A document whose first day is over is
computed once and kept in `monitor_doc_recall` (computed again if logs for that day arrive later).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from contextlib import closing
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from ragtriage.store import monitor_sql as sql
from ragtriage.store.db import read_session, write_session
from ragtriage.store.kb_tables import ChunkRow, DocumentRow
from ragtriage.store.log_tables import RequestLogRow
from ragtriage.store.monitor_tables import MonitorDocRecallRow
from ragtriage.triage import monitor_logged as logged
from ragtriage.wording import plural

if TYPE_CHECKING:
    from ragtriage.triage.monitor import Figure

FIRST_DAY = timedelta(days=1)
#: A common prefix shorter than this matches too much to be a useful filter: each id is searched.
MIN_PREFIX = 4


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def _new_documents(
    engine: Engine, since: datetime | None, until: datetime, kb: str
) -> list[tuple[str, datetime, list[str]]]:
    """`(doc_id, updated_at, published chunk ids)` of documents updated in [since, until)."""
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
            found.append((doc_id, _utc(updated_at), sorted(chunk_ids)))
    return found


def _needles(chunk_ids: Sequence[str]) -> list[str]:
    """What a body mentioning one of `chunk_ids` contains: their common prefix, else each id as a
    JSON string; both as logged raw and with `\\u` escapes (a logger with ensure_ascii)."""
    prefix = logged.common_prefix(chunk_ids)
    if len(prefix) >= MIN_PREFIX:
        return sorted({prefix, json.dumps(prefix)[1:-1]})
    return sorted({form for c in chunk_ids for form in (json.dumps(c, ensure_ascii=False), json.dumps(c))})


def _window_requests(engine: Engine, start: datetime, end: datetime) -> int:
    requests = RequestLogRow.__table__  # type: ignore[attr-defined]
    with read_session(engine) as session:
        statement = select(func.count()).select_from(requests).where(*sql.window(start, end))
        return int(session.execute(statement).scalar_one())


def _scan(engine: Engine, start: datetime, end: datetime, chunk_ids: Sequence[str]) -> set[str]:
    """The chunk ids some request in [start, end) retrieved; stops once all were seen."""
    wanted, found = set(chunk_ids), set()
    with closing(sql.mentioning(engine, "day", start, end, _needles(chunk_ids))) as rows:
        for _group, body in rows:
            found |= logged.retrieved_ids(logged.stage_lists(body)) & wanted
            if found == wanted:
                break
    return found


def _store_mark(engine: Engine) -> int | None:
    """SQLite's highest request rowid (one B-tree step): it moves whenever a request is ingested."""
    if engine.dialect.name != "sqlite":
        return None
    with engine.connect() as connection:
        return connection.exec_driver_sql("SELECT max(rowid) FROM request_log").scalar()


def document_recall(
    engine: Engine, kb: str, doc_id: str, updated_at: datetime, chunk_ids: list[str], mark: int | None
) -> set[str]:
    """The chunks of a document (first day over) retrieved in its first day, from the cache when
    nothing was ingested since (`mark`) or the window still holds as many requests."""
    end = updated_at + FIRST_DAY
    with read_session(engine) as session:
        cached = session.get(MonitorDocRecallRow, (doc_id, kb))
        same = (
            cached is not None
            and _utc(cached.updated_at) == updated_at
            and sorted(cached.chunk_ids) == chunk_ids
        )
    if cached is not None and same and mark is not None and cached.store_mark == mark:
        return {str(c) for c in cached.found}
    count = _window_requests(engine, updated_at, end)
    if cached is not None and same and cached.window_requests == count:
        found = {str(c) for c in cached.found}
    else:
        found = _scan(engine, updated_at, end, chunk_ids) if count else set()
    with write_session(engine) as session:
        row = session.get(MonitorDocRecallRow, (doc_id, kb)) or MonitorDocRecallRow(
            doc_id=doc_id, kb=kb, updated_at=updated_at, window_requests=count
        )
        row.updated_at, row.window_requests, row.store_mark = updated_at, count, mark
        row.chunk_ids, row.found = list(chunk_ids), sorted(found)
        session.add(row)
    return found


def first_day_recall(
    engine: Engine,
    by: sql.GroupBy,
    since: datetime | None,
    until: datetime,
    *,
    kb: str,
    keys: Sequence[str] = (),
) -> dict[str, Figure]:
    """Group key (and `all`) → first-day recall, grouped by the day of `updated_at`. By version
    only `all` has a value: a document's first day is one window, whatever version served it."""
    from ragtriage.triage.monitor import Figure

    documents = [d for d in _new_documents(engine, since, until, kb) if d[2]]
    chunks_by_day: dict[str, int] = defaultdict(int)
    found_by_day: dict[str, int] = defaultdict(int)
    docs_by_day: dict[str, int] = defaultdict(int)
    pending_by_day: dict[str, int] = defaultdict(int)
    mark = _store_mark(engine)
    for doc_id, updated_at, chunk_ids in documents:
        day = updated_at.date().isoformat()
        if updated_at + FIRST_DAY > until:
            pending_by_day[day] += 1
            continue
        chunks_by_day[day] += len(chunk_ids)
        docs_by_day[day] += 1
        found_by_day[day] += len(document_recall(engine, kb, doc_id, updated_at, chunk_ids, mark))
    for counter in (chunks_by_day, found_by_day, docs_by_day, pending_by_day):
        counter["all"] = sum(counter.values())
    figures: dict[str, Figure] = {}
    groups = sorted(set(chunks_by_day) | set(pending_by_day)) if by == "day" else ["all"]
    for key in groups:
        if chunks_by_day[key] == 0:
            waiting = pending_by_day[key]
            reason = (
                f"{plural(waiting, 'new document')} still in their first 24 h"
                if waiting
                else "no document was added or updated in this group"
            )
            figures[key] = Figure(reason=reason, detail={"pending": waiting})
            continue
        figures[key] = Figure(
            value=found_by_day[key] / chunks_by_day[key],
            count=found_by_day[key],
            total=chunks_by_day[key],
            detail={"documents": docs_by_day[key], "pending": pending_by_day[key]},
        )
    for key in keys if by == "version" else ():
        figures[key] = Figure(reason="counted per document, not per pipeline_version; see the `all` row")
    return figures
