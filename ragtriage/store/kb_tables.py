"""Knowledge-base tables: documents, chunks and the KB revision counter.

SQL holds the KB; Whoosh and Qdrant are derived from it (see `ragtriage.index.manifest`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, LargeBinary
from sqlmodel import Field, SQLModel

from ragtriage.store.columns import json_dict_column, json_list_column, utcnow

__all__ = [
    "FILTERED",
    "DocumentRow",
    "ChunkRow",
    "ChunkVectorRow",
    "KBStateRow",
    "deletion_kind",
    "filtered_reason",
]


class DocumentRow(SQLModel, table=True):
    """One source document at its current version."""

    __tablename__ = "kb_document"

    doc_id: str = Field(primary_key=True)
    kb: str = Field(default="default", index=True)
    title: str = ""
    source_path: str | None = None
    content_hash: str = ""
    """sha256 of the loaded document text (change detection)."""
    version: int = 1
    """Increases each time the document's content changes."""
    status: str = Field(default="published", index=True)
    updated_at: datetime = Field(default_factory=utcnow)
    product_line: str | None = None
    doc_version: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=json_dict_column(nullable=False))


class ChunkRow(SQLModel, table=True):
    """One chunk; `status` follows its document (deleted documents keep their chunks, marked deleted)."""

    __tablename__ = "kb_chunk"

    chunk_id: str = Field(primary_key=True)
    doc_id: str = Field(index=True)
    kb: str = Field(default="default", index=True)
    title: str = ""
    heading_path: list[str] = Field(default_factory=list, sa_column=json_list_column(nullable=False))
    anchor: str | None = None
    ordinal: int = 0
    content: str = ""
    content_hash: str = Field(default="", index=True)
    version: int = 1
    """The document version this chunk belongs to."""
    status: str = Field(default="published", index=True)
    updated_at: datetime = Field(default_factory=utcnow)
    product_line: str | None = None
    doc_version: str | None = None
    meta: dict[str, Any] | None = Field(default=None, sa_column=json_dict_column(nullable=True))
    """Columns of an imported row that map to no chunk field, kept as they came (None: none)."""
    char_start: int | None = None
    """Offset of the chunk in its document's text (`kb.chunking.document_text`); None when imported."""
    char_end: int | None = None
    """End offset (exclusive); None when imported."""
    source_hash: str | None = None
    """sha256 of an imported row as mapped (with its vector's hash): equal means nothing to write."""
    deletion: str | None = None
    """Why a deleted chunk is deleted: `rechunked` (the write that deleted it gave its document
    new chunks), `removed` (it did not, or the document went), or `filtered: <reason>` (an imported
    row the status filter left out, e.g. `filtered: not published (status=DRAFT)`; see
    `filtered_reason`); None while live, or when deleted by a version that did not record it."""


#: `ChunkRow.deletion` prefix of an imported row the status filters (`status`, `published`,
#: `deleted`) left out.
FILTERED = "filtered"


def filtered_reason(deletion: str | None) -> str | None:
    """The status filter's reason in a `ChunkRow.deletion` (`not published (status=DRAFT)`), or None
    when the chunk was deleted for another reason."""
    if deletion is None or not deletion.startswith(f"{FILTERED}: "):
        return None
    return deletion[len(FILTERED) + 2 :]


def deletion_kind(deletion: str | None) -> str | None:
    """The code of a `ChunkRow.deletion`: `rechunked`, `removed`, `filtered`, or None."""
    return FILTERED if filtered_reason(deletion) is not None else deletion


class ChunkVectorRow(SQLModel, table=True):
    """A vector that came with an imported chunk; the dense index takes it instead of embedding."""

    __tablename__ = "kb_chunk_vector"

    chunk_id: str = Field(primary_key=True)
    embedder: str
    """Name of the model that made the vector (checked against the query embedder)."""
    dim: int
    vector: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    """float32, little-endian, `dim` values."""
    vector_hash: str = ""
    """sha256 of `vector` (part of the dense index's change detection)."""


class KBStateRow(SQLModel, table=True):
    """KB revision: increases on every add/change/delete so indexes can tell they are behind."""

    __tablename__ = "kb_state"

    kb: str = Field(primary_key=True)
    revision: int = 0
    updated_at: datetime = Field(default_factory=utcnow)
