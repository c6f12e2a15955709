"""The published chunks as an index sync needs them: index and content hashes, texts on demand.

Without an import's handoff every published chunk is loaded from SQL (`kb_chunks.load_chunks`)
and hashed. With one (`import_handoff`), the chunks the import wrote come from it, the others'
hashes from the BM25 index when the manifest says the indexes held the KB as it was before the
import (`trusted`), and only the rest is loaded; texts are loaded when BM25 or the dense index
must take a chunk the handoff holds no term ids for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import col, select

from ragtriage.index.bm25_engine import BM25Document
from ragtriage.index.bulk_terms import SegmentedTerms
from ragtriage.index.import_handoff import ImportHandoff, WrittenChunk, bm25_title
from ragtriage.index.kb_chunks import KBChunk, kb_revision_of, load_chunks
from ragtriage.store.db import read_session
from ragtriage.store.kb_tables import ChunkRow, ChunkVectorRow
from ragtriage.workspace import Workspace

__all__ = ["PublishedChunks", "bm25_document", "published_chunks"]


@dataclass
class PublishedChunks:
    """Every published chunk of the KB at `revision`, by chunk id (in the store's order)."""

    revision: int
    index_hashes: dict[str, str]
    content_hashes: dict[str, str]
    imported_vectors: int
    """Published chunks that came with a vector (`kb import`)."""
    loaded: dict[str, KBChunk] = field(default_factory=dict)
    """The chunks loaded from SQL, with their texts."""
    written: Mapping[str, WrittenChunk] = field(default_factory=dict)
    segmented: SegmentedTerms | None = None

    def __len__(self) -> int:
        return len(self.index_hashes)

    def load(self, workspace: Workspace, chunk_ids: list[str]) -> list[KBChunk]:
        """The chunks `chunk_ids` with their texts (from SQL unless loaded already)."""
        missing = [chunk_id for chunk_id in chunk_ids if chunk_id not in self.loaded]
        fetched = load_chunks(workspace, missing)[0] if missing else {}
        return [
            self.loaded[chunk_id] if chunk_id in self.loaded else fetched[chunk_id]
            for chunk_id in chunk_ids
            if chunk_id in self.loaded or chunk_id in fetched
        ]

    def bm25_documents(self, workspace: Workspace, chunk_ids: list[str]) -> list[BM25Document]:
        """BM25 documents of `chunk_ids`, in that order; without their text when `segmented` has
        their content and title term ids (the bm25s index takes those instead)."""
        segmented = self.segmented
        documents: dict[str, BM25Document] = {}
        to_load: list[str] = []
        for chunk_id in chunk_ids:
            written = self.written.get(chunk_id)
            if (
                chunk_id not in self.loaded
                and written is not None
                and written.index_hash == self.index_hashes.get(chunk_id)
                and segmented is not None
                and written.content_hash in segmented.content
                and written.title in segmented.title
            ):
                documents[chunk_id] = BM25Document(
                    chunk_id, written.doc_id, written.title, "", written.content_hash, written.index_hash
                )
            else:
                to_load.append(chunk_id)
        for chunk in self.load(workspace, to_load):
            documents[chunk.row.chunk_id] = bm25_document(chunk)
        return [documents[chunk_id] for chunk_id in chunk_ids if chunk_id in documents]


def bm25_document(chunk: KBChunk) -> BM25Document:
    """What BM25 indexes of `chunk`."""
    row = chunk.row
    return BM25Document(
        chunk_id=row.chunk_id,
        doc_id=row.doc_id,
        title=bm25_title(row.title, row.heading_path),
        content=row.content,
        content_hash=row.content_hash,
        index_hash=chunk.index_hash,
    )


def published_chunks(
    workspace: Workspace,
    handoff: ImportHandoff | None = None,
    *,
    indexed: Mapping[str, tuple[str, str]] | None = None,
    trusted: bool = False,
) -> PublishedChunks:
    """Every published chunk's hashes: loaded from SQL, or (with `handoff`) from the import's pass,
    from `indexed` (the BM25 index's chunk id → (content hash, index hash)) when `trusted`, and
    from SQL for the rest."""
    if handoff is None:
        chunks, revision = load_chunks(workspace)
        return PublishedChunks(
            revision=revision,
            index_hashes={chunk_id: chunk.index_hash for chunk_id, chunk in chunks.items()},
            content_hashes={chunk_id: chunk.row.content_hash for chunk_id, chunk in chunks.items()},
            imported_vectors=sum(1 for chunk in chunks.values() if chunk.imported_vector is not None),
            loaded=chunks,
        )
    kb = workspace.settings.kb.name
    published = (col(ChunkRow.status) == "published", col(ChunkRow.kb) == kb)
    with read_session(workspace.engine) as session:
        chunk_ids = session.exec(select(ChunkRow.chunk_id).where(*published)).all()
        imported = session.exec(
            select(func.count())
            .select_from(ChunkVectorRow)
            .join(ChunkRow, col(ChunkRow.chunk_id) == col(ChunkVectorRow.chunk_id))
            .where(*published)
        ).one()
        revision = kb_revision_of(session, kb)
    index_hashes: dict[str, str] = {}
    content_hashes: dict[str, str] = {}
    missing: list[str] = []
    for chunk_id in chunk_ids:
        written = handoff.written.get(chunk_id)
        known = (written.content_hash, written.index_hash) if written is not None else None
        if known is None and trusted and indexed is not None:
            known = indexed.get(chunk_id)
        if known is None:
            missing.append(chunk_id)
            known = ("", "")  # filled in below; keeps the store's order
        content_hashes[chunk_id], index_hashes[chunk_id] = known
    loaded = load_chunks(workspace, missing)[0] if missing else {}
    for chunk_id in missing:
        chunk = loaded.get(chunk_id)
        if chunk is None:  # no longer published (another writer since)
            del index_hashes[chunk_id], content_hashes[chunk_id]
        else:
            index_hashes[chunk_id], content_hashes[chunk_id] = chunk.index_hash, chunk.row.content_hash
    result = PublishedChunks(
        revision=revision,
        index_hashes=index_hashes,
        content_hashes=content_hashes,
        imported_vectors=int(imported),
        loaded=loaded,
        written=handoff.written,
        segmented=handoff.segmented,
    )
    handoff.segmented = None  # held once: the BM25 build frees them when it has taken them
    return result
