"""KB rows in SQL: store one loaded document (and its chunks), mark documents deleted, convert rows.

Each `store_document` call is one short write transaction, and only when something changed: a read
transaction first decides whether the document is unchanged (same content hash, same chunks, same
status and source), so re-adding an unchanged folder writes nothing and keeps the KB revision.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from sqlalchemy import delete, exists
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ragtriage.kb.chunking import ChunkingParams, chunk_document
from ragtriage.kb.document import LoadedDocument
from ragtriage.kb.types import ChunkRecord, ChunkStatus
from ragtriage.store.db import read_session, write_session
from ragtriage.store.kb_tables import ChunkRow, DocumentRow, KBStateRow

Outcome = Literal["added", "changed", "unchanged"]
DELETED = "deleted"
#: `ChunkRow.deletion`: the write that deleted the chunk gave its document new chunks (a re-chunking).
RECHUNKED = "rechunked"
#: `ChunkRow.deletion`: the chunk went without a replacement in its document (or with the document).
REMOVED = "removed"
#: ChunkRow fields that must match for a stored chunk to count as unchanged.
_CHUNK_FIELDS = (
    *("ordinal", "content_hash", "title", "heading_path", "anchor", "status", "version"),
    *("product_line", "doc_version", "updated_at", "char_start", "char_end"),
)


@dataclass
class _Plan:
    """What storing one document would write."""

    outcome: Outcome
    version: int
    chunks: list[ChunkRecord]
    stale_chunk_ids: list[str] = field(default_factory=list)
    """Live chunks of the previous version that the new chunking no longer produces."""
    stale_deletion: str = REMOVED
    """`RECHUNKED` when the new chunking has chunk ids the document did not have live."""


def store_document(
    engine: Engine,
    document: LoadedDocument,
    *,
    doc_id: str,
    kb: str,
    status: ChunkStatus,
    updated_at: datetime,
    params: ChunkingParams,
    source_root: str | None,
) -> tuple[Outcome, list[ChunkRecord]]:
    """Insert or update `doc_id` and its chunks unless nothing changed. Returns (outcome, chunks).

    `source_root` is the folder the file was found under; None (a file named on its own) keeps the
    folder recorded before for the same file.
    """
    doc_hash = document.content_hash()
    with read_session(engine) as session:
        plan = _plan(session, document, doc_id, kb, status, updated_at, params, source_root, doc_hash)
    if plan.outcome == "unchanged":
        return plan.outcome, plan.chunks
    with write_session(engine) as session:
        # Planned again inside the write lock: another writer may have stored this document meanwhile.
        plan = _plan(session, document, doc_id, kb, status, updated_at, params, source_root, doc_hash)
        if plan.outcome == "unchanged":
            return plan.outcome, plan.chunks
        _write_document(session, document, doc_id, kb, status, updated_at, source_root, doc_hash, plan)
        _write_chunks(session, plan)
        bump_revision(session, kb)
    return plan.outcome, plan.chunks


def _plan(
    session: Session,
    document: LoadedDocument,
    doc_id: str,
    kb: str,
    status: ChunkStatus,
    updated_at: datetime,
    params: ChunkingParams,
    source_root: str | None,
    doc_hash: str,
) -> _Plan:
    row = session.get(DocumentRow, doc_id)
    if row is None:
        outcome: Outcome = "added"
        version = 1
    else:
        content_changed = row.content_hash != doc_hash
        version = row.version + 1 if content_changed else row.version
        outcome = "added" if row.status == DELETED else "changed"
    kept_updated_at = updated_at
    if row is not None and row.content_hash == doc_hash and not document.meta.updated_at:
        # Without a front-matter date the file time stands in; touching a file is not a change.
        kept_updated_at = row.updated_at
    chunks = chunk_document(
        document,
        doc_id=doc_id,
        params=params,
        kb=kb,
        version=version,
        status=status,
        updated_at=as_utc(kept_updated_at).isoformat(),
    )
    live_rows = []
    if row is not None:
        statement = select(ChunkRow).where(ChunkRow.doc_id == doc_id, ChunkRow.status != DELETED)
        live_rows = list(session.exec(statement).all())
    new_ids = {chunk.chunk_id for chunk in chunks}
    stale = [chunk_row.chunk_id for chunk_row in live_rows if chunk_row.chunk_id not in new_ids]
    # Chunk ids hash the text, so an edited section gets a new id (a replacement) while a
    # removed section leaves only a stale one.
    replaced = bool(new_ids - {chunk_row.chunk_id for chunk_row in live_rows})
    if (
        row is not None
        and row.status == status
        and row.content_hash == doc_hash
        and row.kb == kb
        and row.source_path == document.source_path
        and (source_root is None or (row.meta or {}).get("source_root") == source_root)
        and not stale
        and _same_chunks(live_rows, chunks)
    ):
        outcome = "unchanged"
    return _Plan(
        outcome=outcome,
        version=version,
        chunks=chunks,
        stale_chunk_ids=stale,
        stale_deletion=RECHUNKED if replaced else REMOVED,
    )


def _same_chunks(rows: Sequence[ChunkRow], chunks: Sequence[ChunkRecord]) -> bool:
    if len(rows) != len(chunks):
        return False
    by_id = {row.chunk_id: row for row in rows}
    for chunk in chunks:
        row = by_id.get(chunk.chunk_id)
        if row is None:
            return False
        stored = to_record(row)
        if any(getattr(stored, name) != getattr(chunk, name) for name in _CHUNK_FIELDS):
            return False
    return True


def _write_document(
    session: Session,
    document: LoadedDocument,
    doc_id: str,
    kb: str,
    status: ChunkStatus,
    updated_at: datetime,
    source_root: str | None,
    doc_hash: str,
    plan: _Plan,
) -> None:
    row = session.get(DocumentRow, doc_id) or DocumentRow(doc_id=doc_id)
    if source_root is None and row.source_path == document.source_path:
        # Re-adding one file of a folder keeps it under that folder (and its deletion tracking).
        source_root = (row.meta or {}).get("source_root")
    meta: dict[str, Any] = {
        "source_root": source_root,
        "format": document.format,
        "tags": list(document.meta.tags),
        "extra": dict(document.meta.extra),
        "warnings": list(document.warnings),
        "sections": len(document.sections),
    }
    row.kb = kb
    row.title = document.title
    row.source_path = document.source_path
    row.content_hash = doc_hash
    row.version = plan.version
    row.status = status
    if plan.chunks:
        row.updated_at = datetime.fromisoformat(plan.chunks[0].updated_at or as_utc(updated_at).isoformat())
    else:
        row.updated_at = updated_at
    row.product_line = document.meta.product_line
    row.doc_version = document.meta.doc_version
    row.meta = meta
    session.add(row)


def _write_chunks(session: Session, plan: _Plan) -> None:
    ids = [chunk.chunk_id for chunk in plan.chunks] + plan.stale_chunk_ids
    existing = {
        row.chunk_id: row for row in session.exec(select(ChunkRow).where(col(ChunkRow.chunk_id).in_(ids)))
    }
    for chunk in plan.chunks:
        row = existing.get(chunk.chunk_id) or ChunkRow(chunk_id=chunk.chunk_id, doc_id=chunk.doc_id)
        row.kb = chunk.kb
        row.title = chunk.title
        row.heading_path = list(chunk.heading_path)
        row.anchor = chunk.anchor
        row.ordinal = chunk.ordinal
        row.content = chunk.content
        row.content_hash = chunk.content_hash
        row.version = chunk.version
        row.status = chunk.status
        row.updated_at = datetime.fromisoformat(chunk.updated_at) if chunk.updated_at else row.updated_at
        row.product_line = chunk.product_line
        row.doc_version = chunk.doc_version
        row.char_start = chunk.char_start
        row.char_end = chunk.char_end
        row.deletion = REMOVED if chunk.status == DELETED else None
        session.add(row)
    for chunk_id in plan.stale_chunk_ids:
        stale = existing[chunk_id]
        stale.status = DELETED
        stale.deletion = plan.stale_deletion
        session.add(stale)


def mark_deleted(engine: Engine, doc_ids: Iterable[str], kb: str) -> tuple[list[str], int]:
    """Mark documents and all their chunks deleted in one transaction. Returns (doc ids changed, chunks)."""
    wanted = list(dict.fromkeys(doc_ids))
    if not wanted:
        return [], 0
    with write_session(engine) as session:
        rows = session.exec(
            select(DocumentRow).where(col(DocumentRow.doc_id).in_(wanted), DocumentRow.status != DELETED)
        ).all()
        changed = [row.doc_id for row in rows]
        for row in rows:
            row.status = DELETED
            session.add(row)
        chunk_rows = session.exec(
            select(ChunkRow).where(col(ChunkRow.doc_id).in_(changed), ChunkRow.status != DELETED)
        ).all()
        for chunk_row in chunk_rows:
            chunk_row.status = DELETED
            chunk_row.deletion = REMOVED
            session.add(chunk_row)
        if changed:
            bump_revision(session, kb)
    return changed, len(chunk_rows)


def remove_empty_documents(session: Session, doc_ids: Iterable[str]) -> list[str]:
    """Delete the rows of those of `doc_ids` that have no chunk at all, live or deleted (inside the
    caller's write transaction): documents a re-import left behind by moving their chunks to other
    documents. Returns the ids removed, sorted."""
    wanted = sorted(set(doc_ids))
    removed: list[str] = []
    for start in range(0, len(wanted), 500):  # well under SQLite's bound-parameter limit
        part = wanted[start : start + 500]
        has_chunk = exists().where(col(ChunkRow.doc_id) == col(DocumentRow.doc_id))
        empty = session.exec(
            select(DocumentRow.doc_id).where(col(DocumentRow.doc_id).in_(part), ~has_chunk)
        ).all()
        if empty:
            session.execute(delete(DocumentRow).where(col(DocumentRow.doc_id).in_(empty)))
            removed.extend(empty)
    return removed


def empty_documents(engine: Engine, kb: str) -> list[str]:
    """Ids of the live documents of `kb` that have no chunk at all, sorted (what
    `remove_empty_documents` removes when a re-import moves chunks; homes imported before it did
    may hold them)."""
    has_chunk = exists().where(col(ChunkRow.doc_id) == col(DocumentRow.doc_id))
    with read_session(engine) as session:
        return list(
            session.exec(
                select(DocumentRow.doc_id)
                .where(DocumentRow.kb == kb, DocumentRow.status != DELETED, ~has_chunk)
                .order_by(col(DocumentRow.doc_id))
            ).all()
        )


def bump_revision(session: Session, kb: str) -> int:
    """Increase the KB revision (inside the caller's write transaction) and return it."""
    state = session.get(KBStateRow, kb) or KBStateRow(kb=kb, revision=0)
    state.revision += 1
    state.updated_at = datetime.now(timezone.utc)
    session.add(state)
    return state.revision


def kb_revision(engine: Engine, kb: str) -> int:
    """The current KB revision (0 before anything was added)."""
    with read_session(engine) as session:
        state = session.get(KBStateRow, kb)
        return state.revision if state is not None else 0


def as_utc(value: datetime) -> datetime:
    """Aware UTC datetime (SQLite hands back naive UTC)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def to_record(row: ChunkRow, *, source_path: str | None = None, include_content: bool = True) -> ChunkRecord:
    """A `ChunkRecord` from a row (`content` left empty unless `include_content`)."""
    return ChunkRecord(
        chunk_id=row.chunk_id,
        doc_id=row.doc_id,
        kb=row.kb,
        title=row.title,
        heading_path=list(row.heading_path or []),
        anchor=row.anchor,
        ordinal=row.ordinal,
        content=row.content if include_content else "",
        content_hash=row.content_hash,
        version=row.version,
        updated_at=as_utc(row.updated_at).isoformat() if row.updated_at else None,
        status=row.status,  # type: ignore[arg-type]
        product_line=row.product_line,
        doc_version=row.doc_version,
        source_path=source_path,
        meta=dict(row.meta) if row.meta is not None else None,
        char_start=row.char_start,
        char_end=row.char_end,
    )
