"""The published chunks as the indexes take them from SQL, each with its index hash.

The index hash covers every field an index takes from a chunk (doc id, title, heading path,
content) and the hash of its imported vector: a change to any of them means re-indexing it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import col

from ragtriage.index.bm25_engine import BM25Document
from ragtriage.index.imported_vectors import imported_vector_refs
from ragtriage.store.db import read_session
from ragtriage.store.kb_tables import ChunkRow, KBStateRow

__all__ = [
    "ChunkFields",
    "KBChunk",
    "PublishedChunks",
    "bm25_document",
    "index_hash",
    "kb_revision_of",
    "load_chunks",
]

_IN_BATCH = 500  # ids per IN (…): well under SQLite's bound-parameter limit


class _Indexed(Protocol):
    @property
    def doc_id(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def heading_path(self) -> list[str]: ...
    @property
    def content(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ChunkFields:
    """The columns of a chunk the indexes take (a tuple-sized object: 100k ORM rows would take GBs)."""

    chunk_id: str
    doc_id: str
    title: str
    heading_path: list[str]
    content: str
    content_hash: str


@dataclass(frozen=True)
class KBChunk:
    """A published chunk, its index hash and the (embedder name, dim) of its imported vector."""

    row: ChunkFields
    index_hash: str
    imported_vector: tuple[str, int] | None = None
    """(embedder name, dim) of the vector the chunk was imported with (`kb import`)."""


@dataclass
class PublishedChunks:
    """The published chunks of a KB at `revision`, by chunk id (in the store's order)."""

    revision: int
    chunks: dict[str, KBChunk]

    def __len__(self) -> int:
        return len(self.chunks)

    @property
    def index_hashes(self) -> dict[str, str]:
        """chunk id → index hash."""
        return {chunk_id: chunk.index_hash for chunk_id, chunk in self.chunks.items()}

    @property
    def content_hashes(self) -> dict[str, str]:
        """chunk id → content hash."""
        return {chunk_id: chunk.row.content_hash for chunk_id, chunk in self.chunks.items()}

    @property
    def imported_vectors(self) -> int:
        """Chunks that came with a vector (`kb import`)."""
        return sum(1 for chunk in self.chunks.values() if chunk.imported_vector is not None)

    def load(self, chunk_ids: Sequence[str]) -> list[KBChunk]:
        """The chunks `chunk_ids`, in that order."""
        return [self.chunks[chunk_id] for chunk_id in chunk_ids]


def bm25_document(chunk: KBChunk) -> BM25Document:
    """What BM25 indexes of `chunk`: its title field is the title and the heading path."""
    row = chunk.row
    return BM25Document(
        chunk_id=row.chunk_id,
        doc_id=row.doc_id,
        title=" ".join([row.title, *row.heading_path]).strip(),
        content=row.content,
        content_hash=row.content_hash,
        index_hash=chunk.index_hash,
    )


# `json.dumps(…, ensure_ascii=False)` without a new encoder per chunk (100k chunks per import).
_INDEX_JSON = json.JSONEncoder(ensure_ascii=False).encode


def index_hash(row: _Indexed, vector_hash: str | None = None) -> str:
    """Hash of every field the indexes take from a chunk (and of its imported vector)."""
    fields: list[Any] = [row.doc_id, row.title, list(row.heading_path), row.content]
    if vector_hash:
        fields.append(vector_hash)
    payload = _INDEX_JSON(fields)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def kb_revision_of(session: Any, kb: str) -> int:
    """The KB's revision (0 before its first write)."""
    state = session.get(KBStateRow, kb)
    return int(state.revision) if state is not None else 0


def load_chunks(engine: Engine, kb: str, only: Sequence[str] | None = None) -> PublishedChunks:
    """Every published chunk of KB `kb` (or those in `only`) and the KB revision."""
    with read_session(engine) as session:
        # A Core select of six columns (sqlmodel's typed select stops at four).
        statement = sa_select(
            col(ChunkRow.chunk_id),
            col(ChunkRow.doc_id),
            col(ChunkRow.title),
            col(ChunkRow.heading_path),
            col(ChunkRow.content),
            col(ChunkRow.content_hash),
        ).where(col(ChunkRow.status) == "published", col(ChunkRow.kb) == kb)
        if only is None:
            rows = [ChunkFields(*values) for values in session.execute(statement)]
        else:
            rows = []
            for start in range(0, len(only), _IN_BATCH):
                part = list(only[start : start + _IN_BATCH])
                rows += [
                    ChunkFields(*v)
                    for v in session.execute(statement.where(col(ChunkRow.chunk_id).in_(part)))
                ]
        vectors = imported_vector_refs(session, kb)
        revision = kb_revision_of(session, kb)
    chunks = {}
    for row in rows:
        vector = vectors.get(row.chunk_id)
        if vector is None:
            chunks[row.chunk_id] = KBChunk(row, index_hash(row))
        else:
            chunks[row.chunk_id] = KBChunk(row, index_hash(row, vector[0]), (vector[1], vector[2]))
    return PublishedChunks(revision, chunks)
