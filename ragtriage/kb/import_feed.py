"""What `kb import`'s pass hands on, batch by batch, besides SQL: points to the dense process and the
written chunks (hashes, term ids) to the index sync's handoff (`pipeline.import_handoff`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ragtriage.kb.import_rows import ImportedChunk
from ragtriage.pipeline.kb_chunks import index_hash
from ragtriage.workspace import Workspace

if TYPE_CHECKING:
    from ragtriage.pipeline.import_handoff import ImportHandoff

__all__ = ["IndexFeed", "interrupted_message", "make_handoff"]


def make_handoff(workspace: Workspace) -> ImportHandoff:
    """What the pass keeps for the index sync; with bm25s it segments the written texts meanwhile."""
    from ragtriage.pipeline.import_handoff import ImportHandoff

    settings = workspace.settings.index
    return ImportHandoff(
        segment=settings.bm25_engine == "bm25s",
        procs=min(settings.bm25_procs, os.cpu_count() or 1),
        min_docs=settings.bm25_multiproc_min_docs,
    )


class IndexFeed:
    """Called with each batch of written chunks (inside the import's transaction): computes their
    index hashes once and hands them to the dense stream and to the handoff."""

    def __init__(
        self, send_points: Callable[[list[ImportedChunk]], None] | None, handoff: ImportHandoff | None
    ) -> None:
        self.send_points = send_points
        self.handoff = handoff

    def __call__(self, chunks: list[ImportedChunk]) -> None:
        hashes = [index_hash(chunk, chunk.vector_hash) for chunk in chunks]
        for chunk, chunk_hash in zip(chunks, hashes, strict=True):
            chunk.index_hash = chunk_hash
        if self.send_points is not None:
            self.send_points(chunks)
        if self.handoff is not None:
            for chunk, chunk_hash in zip(chunks, hashes, strict=True):
                if chunk.retrievable:
                    self.handoff.add(
                        chunk.chunk_id,
                        chunk.doc_id,
                        chunk.title,
                        chunk.heading_path,
                        chunk.content,
                        chunk.content_hash,
                        chunk_hash,
                    )


def interrupted_message(stored_revision: int | None) -> str:
    """What an interrupted import did: nothing (before its commit), or stored the chunks but not
    (all of) the indexes."""
    if stored_revision is None:
        return "kb import: interrupted; nothing was imported (the KB and its indexes are as they were)"
    return (
        f"kb import: interrupted while updating the indexes; the chunks are stored (KB revision "
        f"{stored_revision}) but the indexes are behind: run the same kb import again to update them"
    )
