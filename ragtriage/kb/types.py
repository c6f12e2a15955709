"""The knowledge base's record type: one chunk of a document, as stored in the KB."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ChunkStatus = Literal["ready", "published", "deleted"]


class ChunkRecord(BaseModel):
    """One chunk of a document, as stored in the KB (`content` may be empty in listings)."""

    model_config = ConfigDict(frozen=True)

    chunk_id: str
    doc_id: str
    kb: str = "default"
    title: str
    heading_path: list[str] = Field(default_factory=list)
    anchor: str | None = None
    ordinal: int
    content: str = ""
    content_hash: str
    version: int = 1
    updated_at: str | None = None
    """ISO-8601 time of the document version."""
    status: ChunkStatus = "published"
    product_line: str | None = None
    doc_version: str | None = None
    """The product/document version string from metadata (e.g. `v2.3`), not the KB revision."""
    source_path: str | None = None
    meta: dict[str, Any] | None = None
    """An imported chunk's source columns that map to no field (`kb import`); None otherwise."""
    char_start: int | None = None
    """Offset of the chunk's first character in the document text (`kb.chunking.document_text`);
    None for imported chunks, whose document text ragtriage never saw."""
    char_end: int | None = None
    """Offset just past the chunk's last character (end exclusive); None when `char_start` is."""
