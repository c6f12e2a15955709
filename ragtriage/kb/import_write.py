"""Writing imported chunks to SQL, inside the import's one transaction (`import_apply`).

Rows are inserted batch by batch with one Core `insert` and a list of parameter rows (SQLAlchemy's
executemany), not as ORM objects: 100k ORM rows would take gigabytes and minutes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, delete, func, insert, update
from sqlmodel import Session, SQLModel, col, select

from ragtriage.kb.import_rows import ImportedChunk
from ragtriage.store.kb_repo import DELETED, RECHUNKED, REMOVED, remove_empty_documents
from ragtriage.store.kb_tables import FILTERED, ChunkRow, ChunkVectorRow, DocumentRow

__all__ = ["DocFields", "ImportWriter", "PUBLISHED"]

PUBLISHED = "published"
_IN_BATCH = 500  # ids per IN (…): well under SQLite's bound-parameter limit


@dataclass(frozen=True, slots=True)
class DocFields:
    """What a document row takes from the last written chunk of that document."""

    doc_title: str | None
    product_line: str | None
    doc_version: str | None
    updated_at: datetime | None

    @classmethod
    def of(cls, chunk: ImportedChunk) -> DocFields:
        """The document fields `chunk` carries."""
        return cls(chunk.doc_title, chunk.product_line, chunk.doc_version, chunk.updated_at)


def _table(model: type[SQLModel]) -> Table:
    """The Core table of `model` (a Core insert of many rows skips the ORM's per-row work)."""
    return SQLModel.metadata.tables[str(model.__tablename__)]


class ImportWriter:
    """Replaces chunk rows (and their vectors) batch by batch in one session's transaction."""

    def __init__(self, session: Session, kb: str, now: datetime, embedder: str | None) -> None:
        self.session = session
        self.kb = kb
        self.now = now
        self.embedder = embedder or ""
        self.left_docs: set[str] = set()
        """Documents a written chunk belonged to before it moved to another document."""

    def write(self, chunks: list[ImportedChunk], known: Sequence[str]) -> None:
        """Insert `chunks`, replacing the stored rows of the `known` ids (those the store held before).

        A deleted chunk is written as removed; `retag_rechunked` corrects that at the end, once it is
        known which documents gained chunks.
        """
        session = self.session
        previous: dict[str, tuple[int, str, str]] = {}
        for start in range(0, len(known), _IN_BATCH):
            part = list(known[start : start + _IN_BATCH])
            rows = session.exec(
                select(ChunkRow.chunk_id, ChunkRow.version, ChunkRow.content_hash, ChunkRow.doc_id).where(
                    col(ChunkRow.chunk_id).in_(part)
                )
            ).all()
            previous.update({chunk_id: (version, h, doc) for chunk_id, version, h, doc in rows})
            session.execute(delete(ChunkRow).where(col(ChunkRow.chunk_id).in_(part)))
            session.execute(delete(ChunkVectorRow).where(col(ChunkVectorRow.chunk_id).in_(part)))
        chunk_rows: list[dict[str, Any]] = []
        vector_rows: list[dict[str, Any]] = []
        for chunk in chunks:
            old = previous.get(chunk.chunk_id)
            if old is not None and old[2] != chunk.doc_id:
                self.left_docs.add(old[2])
            # A new chunk version only when the text changed; metadata edits keep the version.
            version = 1 if old is None else old[0] + (old[1] != chunk.content_hash)
            retrievable = chunk.retrievable
            deletion = f"{FILTERED}: {chunk.filtered_by}" if chunk.filtered_by else REMOVED
            chunk_rows.append(
                {
                    "chunk_id": chunk.chunk_id,
                    "doc_id": chunk.doc_id,
                    "kb": self.kb,
                    "title": chunk.title,
                    "heading_path": chunk.heading_path,
                    "anchor": chunk.anchor,
                    "ordinal": chunk.ordinal,
                    "content": chunk.content,
                    "content_hash": chunk.content_hash,
                    "version": version,
                    "status": PUBLISHED if retrievable else DELETED,
                    "updated_at": chunk.updated_at or self.now,
                    "product_line": chunk.product_line,
                    "doc_version": chunk.doc_version,
                    "meta": chunk.meta or None,
                    "source_hash": chunk.source_hash(),
                    "deletion": None if retrievable else deletion,
                }
            )
            vector = chunk.vector
            if vector is not None and chunk.vector_hash is not None:
                vector_rows.append(
                    {
                        "chunk_id": chunk.chunk_id,
                        "embedder": self.embedder,
                        "dim": int(vector.shape[0]),
                        "vector": vector.astype("<f4", copy=False).tobytes(),
                        "vector_hash": chunk.vector_hash,
                    }
                )
        if chunk_rows:
            session.execute(insert(_table(ChunkRow)), chunk_rows)
        if vector_rows:
            session.execute(insert(_table(ChunkVectorRow)), vector_rows)

    def retag_rechunked(self, chunk_ids: Sequence[str]) -> None:
        """Mark written deleted chunks as re-chunked (their document gained chunks in this import)."""
        for start in range(0, len(chunk_ids), _IN_BATCH):
            part = list(chunk_ids[start : start + _IN_BATCH])
            self.session.execute(
                update(ChunkRow).where(col(ChunkRow.chunk_id).in_(part)).values(deletion=RECHUNKED)
            )

    def mark_missing(self, chunk_ids: list[str], grown_docs: set[str]) -> set[str]:
        """Mark `chunk_ids` deleted: re-chunked when their document gained chunks, else removed.

        Returns their documents.
        """
        session = self.session
        doc_ids: set[str] = set()
        for start in range(0, len(chunk_ids), _IN_BATCH):
            part = chunk_ids[start : start + _IN_BATCH]
            by_deletion: dict[str, list[str]] = {RECHUNKED: [], REMOVED: []}
            for chunk_id, doc_id in session.exec(
                select(ChunkRow.chunk_id, ChunkRow.doc_id).where(col(ChunkRow.chunk_id).in_(part))
            ).all():
                doc_ids.add(doc_id)
                # Every missing chunk was live (the import picks only those).
                by_deletion[RECHUNKED if doc_id in grown_docs else REMOVED].append(chunk_id)
            for deletion, ids in by_deletion.items():
                if ids:
                    session.execute(
                        update(ChunkRow)
                        .where(col(ChunkRow.chunk_id).in_(ids))
                        .values(status=DELETED, deletion=deletion)
                    )
        return doc_ids

    def write_documents(
        self, touched: dict[str, DocFields], missing_docs: set[str], source_name: str
    ) -> list[str]:
        """Insert or update the documents of written chunks; a document without live chunks is
        deleted, and one that written chunks left with no chunk at all is removed. Returns the
        removed documents' ids."""
        session = self.session
        removed = remove_empty_documents(session, self.left_docs - set(touched))
        doc_ids = sorted((set(touched) | missing_docs | self.left_docs) - set(removed))
        for start in range(0, len(doc_ids), _IN_BATCH):
            part = doc_ids[start : start + _IN_BATCH]
            live = dict(
                session.exec(
                    select(ChunkRow.doc_id, func.count())
                    .where(col(ChunkRow.doc_id).in_(part), ChunkRow.status == PUBLISHED)
                    .group_by(ChunkRow.doc_id)
                ).all()
            )
            existing = {
                row.doc_id: row
                for row in session.exec(select(DocumentRow).where(col(DocumentRow.doc_id).in_(part)))
            }
            new_rows: list[dict[str, Any]] = []
            for doc_id in part:
                status = PUBLISHED if live.get(doc_id) else DELETED
                fields = touched.get(doc_id)
                row = existing.get(doc_id)
                if row is not None:
                    row.status = status
                    if fields is not None:
                        row.title = fields.doc_title or row.title
                        row.product_line = fields.product_line
                        row.doc_version = fields.doc_version
                        row.updated_at = fields.updated_at or self.now
                    session.add(row)
                elif fields is not None:
                    new_rows.append(
                        {
                            "doc_id": doc_id,
                            "kb": self.kb,
                            "title": fields.doc_title or doc_id,
                            "source_path": source_name,
                            "content_hash": "",
                            "version": 1,
                            "status": status,
                            "updated_at": fields.updated_at or self.now,
                            "product_line": fields.product_line,
                            "doc_version": fields.doc_version,
                            "meta": {"origin": "import", "source": source_name},
                        }
                    )
            if new_rows:
                session.execute(insert(DocumentRow), new_rows)
            session.flush()
        return removed
