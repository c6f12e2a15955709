"""In-memory metadata of the published chunks, read from `ChunkRow`, for traces and rerank features.

Metadata (doc id, title, anchor, heading path, dates) of every published chunk is held in memory;
chunk text is fetched from SQL only for the few chunks the reranker reads. The lookup reloads
itself when the KB revision changes, so a long-lived pipeline (the TUI) never shows stale titles.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from ragtriage.kb.types import ChunkRecord
from ragtriage.store.kb_tables import ChunkRow, KBStateRow


@dataclass(frozen=True)
class ChunkMeta:
    """What a trace shows about a chunk, and what the rerank features read."""

    chunk_id: str
    doc_id: str
    title: str
    anchor: str | None = None
    heading_path: tuple[str, ...] = ()
    updated_at: str | None = None
    product_line: str | None = None
    content_hash: str = ""


@dataclass
class ChunkLookup:
    """chunk_id → `ChunkMeta` of published chunks, plus on-demand chunk text."""

    engine: Engine | None = None
    kb: str = "default"
    _meta: dict[str, ChunkMeta] = field(default_factory=dict, repr=False)
    _contents: dict[str, str] = field(default_factory=dict, repr=False)
    _revision: int | None = field(default=None, repr=False)
    _loaded: bool = field(default=False, repr=False)

    @classmethod
    def from_records(cls, records: Iterable[ChunkRecord]) -> ChunkLookup:
        """A lookup over given records (text included), with no database behind it."""
        lookup = cls(engine=None)
        for record in records:
            if record.status != "published":
                continue
            lookup._meta[record.chunk_id] = _meta_of(record)
            lookup._contents[record.chunk_id] = record.content
        lookup._loaded = True
        return lookup

    def revision(self) -> int | None:
        """The KB revision counter in the store (None without a store or before the first add)."""
        if self.engine is None:
            return None
        # A Core select on a plain connection: this runs before every query, and the ORM's
        # session and identity map cost more than the query itself.
        statement = select(KBStateRow.revision).where(KBStateRow.kb == self.kb)
        with self.engine.connect() as connection:
            return connection.execute(statement).scalar_one_or_none()

    def refresh(self) -> None:
        """Reload the metadata if the KB revision changed since the last load."""
        if self.engine is None:
            return
        revision = self.revision()
        if self._loaded and revision == self._revision:
            return
        # Only the metadata columns as plain rows: no chunk text, no ORM objects (cold start).
        statement = sa_select(
            col(ChunkRow.chunk_id),
            col(ChunkRow.doc_id),
            col(ChunkRow.title),
            col(ChunkRow.anchor),
            col(ChunkRow.heading_path),
            col(ChunkRow.updated_at),
            col(ChunkRow.product_line),
            col(ChunkRow.content_hash),
        ).where(col(ChunkRow.kb) == self.kb, col(ChunkRow.status) == "published")
        with self.engine.connect() as connection:
            rows = connection.execute(statement).all()
        self._meta = {row.chunk_id: _meta_of(row) for row in rows}
        self._contents = {}
        self._revision = revision
        self._loaded = True

    def get(self, chunk_id: str) -> ChunkMeta | None:
        """Metadata of a published chunk, or None (unknown id, deleted or unpublished chunk)."""
        if not self._loaded:
            self.refresh()
        return self._meta.get(chunk_id)

    def __contains__(self, chunk_id: object) -> bool:
        return isinstance(chunk_id, str) and self.get(chunk_id) is not None

    def __len__(self) -> int:
        if not self._loaded:
            self.refresh()
        return len(self._meta)

    def contents(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """Text of the given published chunks (unknown ids are left out)."""
        missing = [c for c in chunk_ids if c not in self._contents and self.get(c) is not None]
        if missing and self.engine is not None:
            statement = select(ChunkRow.chunk_id, ChunkRow.content).where(col(ChunkRow.chunk_id).in_(missing))
            with Session(self.engine) as session:
                for chunk_id, content in session.exec(statement).all():
                    self._contents[chunk_id] = content
        return {c: self._contents[c] for c in chunk_ids if c in self._contents}


def _meta_of(row: Any) -> ChunkMeta:
    """Metadata from a `ChunkRow`, a `ChunkRecord` or a result row with the same column names."""
    updated = row.updated_at
    updated_text = updated.isoformat() if hasattr(updated, "isoformat") else updated
    return ChunkMeta(
        chunk_id=row.chunk_id,
        doc_id=row.doc_id,
        title=row.title,
        anchor=row.anchor,
        heading_path=tuple(row.heading_path or ()),
        updated_at=updated_text,
        product_line=row.product_line,
        content_hash=row.content_hash,
    )
