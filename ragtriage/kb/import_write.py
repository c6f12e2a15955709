"""Writing imported chunks to SQL, inside the import's one transaction (`import_apply`).

Rows are inserted with the driver's `executemany`: the values go through the columns' own bind
processors (JSON, datetime), so the stored rows are exactly what SQLAlchemy would store, without
its per-row statement machinery (several times slower at 100k rows).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, delete, func, insert, update
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, SQLModel, col, select

from ragtriage.kb.import_rows import ImportedChunk
from ragtriage.store.kb_repo import DELETED, RECHUNKED, REMOVED
from ragtriage.store.kb_tables import FILTERED, ChunkRow, ChunkVectorRow, DocumentRow

__all__ = ["DocFields", "ImportWriter", "PUBLISHED"]

PUBLISHED = "published"
_IN_BATCH = 500  # ids per IN (…): well under SQLite's bound-parameter limit
#: SQLite page cache of the import's connection while it writes (KiB; the default is 2,000). The
#: chunk id and content hash indexes take rows in random order: with the default cache their
#: pages are written out and read back all through a 100k-row import (half its system time).
IMPORT_CACHE_KIB = 32768


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


class _BulkInsert:
    """`INSERT INTO table (…) VALUES (…)` run with the DBAPI cursor's executemany.

    Rows come as tuples in `keys` order. Each column's bind processor runs over the whole column at
    once (`map`), and the parameter rows are zipped back together: no per-row dict or generator.
    """

    def __init__(self, connection: Connection, table: Table, keys: Sequence[str]) -> None:
        dialect = connection.dialect
        compiled = insert(table).compile(dialect=dialect, column_keys=list(keys))
        self.sql = str(compiled)
        given = list(keys)
        self.keys = list(compiled.positiontup or keys) if compiled.positional else given
        self.positional = bool(compiled.positional)
        self.order = [given.index(key) for key in self.keys]
        processors = [table.c[key].type.dialect_impl(dialect).bind_processor(dialect) for key in given]
        self.processors = [(n, proc) for n, proc in enumerate(processors) if proc is not None]

    def run(self, connection: Connection, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        columns: list[Sequence[Any]] = list(zip(*rows, strict=True))
        for n, proc in self.processors:
            columns[n] = list(map(proc, columns[n]))
        ordered = zip(*(columns[n] for n in self.order), strict=True)
        params: list[Any] = (
            list(ordered)
            if self.positional
            else [dict(zip(self.keys, values, strict=True)) for values in ordered]
        )
        connection.exec_driver_sql(self.sql, params)


_CHUNK_KEYS = (
    "chunk_id",
    "doc_id",
    "kb",
    "title",
    "heading_path",
    "anchor",
    "ordinal",
    "content",
    "content_hash",
    "version",
    "status",
    "updated_at",
    "product_line",
    "doc_version",
    "meta",
    "source_hash",
    "deletion",
)
_VECTOR_KEYS = ("chunk_id", "embedder", "dim", "vector", "vector_hash")


class ImportWriter:
    """Replaces chunk rows (and their vectors) batch by batch in one session's transaction."""

    def __init__(self, session: Session, kb: str, now: datetime, embedder: str | None) -> None:
        self.session = session
        self.kb = kb
        self.now = now
        self.embedder = embedder or ""
        connection = session.connection()
        tables = SQLModel.metadata.tables
        self._chunks = _BulkInsert(connection, tables[ChunkRow.__tablename__], _CHUNK_KEYS)
        self._vectors = _BulkInsert(connection, tables[ChunkVectorRow.__tablename__], _VECTOR_KEYS)
        self._cache_size: int | None = None
        if connection.dialect.name == "sqlite":
            self._cache_size = int(connection.exec_driver_sql("PRAGMA cache_size").scalar() or -2000)
            connection.exec_driver_sql(f"PRAGMA cache_size=-{IMPORT_CACHE_KIB}")

    def close(self) -> None:
        """Give the connection its page cache size back (before the transaction ends; it then shrinks)."""
        if self._cache_size is not None:
            size, self._cache_size = self._cache_size, None
            with contextlib.suppress(SQLAlchemyError):  # a failed connection is discarded anyway
                self.session.connection().exec_driver_sql(f"PRAGMA cache_size={size}")

    def write(self, chunks: list[ImportedChunk], known: Sequence[str]) -> None:
        """Insert `chunks`, replacing the stored rows of the `known` ids (those the store held before).

        A deleted chunk is written as removed; `retag_rechunked` corrects that at the end, once it is
        known which documents gained chunks.
        """
        session = self.session
        previous: dict[str, tuple[int, str]] = {}
        for start in range(0, len(known), _IN_BATCH):
            part = list(known[start : start + _IN_BATCH])
            rows = session.exec(
                select(ChunkRow.chunk_id, ChunkRow.version, ChunkRow.content_hash).where(
                    col(ChunkRow.chunk_id).in_(part)
                )
            ).all()
            previous.update({chunk_id: (version, h) for chunk_id, version, h in rows})
            session.execute(delete(ChunkRow).where(col(ChunkRow.chunk_id).in_(part)))
            session.execute(delete(ChunkVectorRow).where(col(ChunkVectorRow.chunk_id).in_(part)))
        chunk_rows: list[tuple[Any, ...]] = []
        vector_rows: list[tuple[Any, ...]] = []
        kb, now, embedder = self.kb, self.now, self.embedder
        for chunk in chunks:
            old = previous.get(chunk.chunk_id)
            # A new chunk version only when the text changed; metadata edits keep the version.
            version = 1 if old is None else old[0] + (old[1] != chunk.content_hash)
            retrievable = chunk.retrievable
            # In _CHUNK_KEYS order.
            chunk_rows.append(
                (
                    chunk.chunk_id,
                    chunk.doc_id,
                    kb,
                    chunk.title,
                    chunk.heading_path,
                    chunk.anchor,
                    chunk.ordinal,
                    chunk.content,
                    chunk.content_hash,
                    version,
                    PUBLISHED if retrievable else DELETED,
                    chunk.updated_at or now,
                    chunk.product_line,
                    chunk.doc_version,
                    chunk.meta or None,
                    chunk.source_hash(),
                    None
                    if retrievable
                    else f"{FILTERED}: {chunk.filtered_by}"
                    if chunk.filtered_by
                    else REMOVED,
                )
            )
            vector = chunk.vector
            if vector is not None and chunk.vector_hash is not None:
                vector_rows.append(
                    (
                        chunk.chunk_id,
                        embedder,
                        int(vector.shape[0]),
                        vector.astype("<f4", copy=False).tobytes(),
                        chunk.vector_hash,
                    )
                )
        connection = session.connection()
        self._chunks.run(connection, chunk_rows)
        self._vectors.run(connection, vector_rows)

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
    ) -> None:
        """Insert or update the documents of written chunks; a document without live chunks is deleted."""
        session = self.session
        doc_ids = sorted(set(touched) | missing_docs)
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
