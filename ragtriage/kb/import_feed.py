"""What `kb import`'s pass hands on, batch by batch, besides SQL: points to the dense process
(`DenseStream`) and the written chunks (hashes, term ids) to the index sync's handoff
(`pipeline.import_handoff`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ragtriage.index.kb_chunks import index_hash
from ragtriage.kb.import_rows import ImportedChunk
from ragtriage.workspace import Workspace

if TYPE_CHECKING:
    from ragtriage.index.dense_worker import DenseWorker
    from ragtriage.index.import_handoff import ImportHandoff

__all__ = ["DenseStream", "IndexFeed", "interrupted_message", "make_handoff"]


def make_handoff(workspace: Workspace) -> ImportHandoff:
    """What the pass keeps for the index sync; it segments the written texts meanwhile (in
    `bm25_procs` processes, forked now: the import's size is not known before its pass) for bm25s
    and for a Whoosh index written from term ids (`WhooshIndex.takes_term_ids`)."""
    from ragtriage.index.bm25 import takes_term_ids
    from ragtriage.index.import_handoff import ImportHandoff
    from ragtriage.locations import whoosh_dir

    settings = workspace.settings.index
    segment = settings.bm25_engine == "bm25s" or takes_term_ids(whoosh_dir(workspace.home))
    return ImportHandoff(segment=segment, procs=min(settings.bm25_procs, os.cpu_count() or 1))


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


class DenseStream:
    """Hands the written chunks' vectors to a `DenseWorker`, which takes them from the first batch
    that has any (its `worker` from then on).

    The worker process is forked here, before the pass: forked from the grown pass, it kept the old
    copy of every page the pass rewrote after the fork (with the segmenters forked early too, 30k
    chunks peaked 55 MB lower). It opens nothing until points come; an import that writes none
    stops it unused (`close`). Not used when this process holds the Qdrant folder itself (the
    worker could not open it): the sync then writes the dense index here, after the BM25 build,
    as without vectors.
    """

    def __init__(self, workspace: Workspace) -> None:
        from ragtriage.index.dense_worker import DenseWorker

        self.workspace = workspace
        self.worker: DenseWorker | None = None
        """The worker once it has been sent points (None: the sync writes the dense index here)."""
        self._idle: DenseWorker | None = DenseWorker(workspace)

    def send(self, chunks: list[ImportedChunk]) -> None:
        from ragtriage.index.dense import DenseDocument
        from ragtriage.index.kb_chunks import index_hash

        documents = [
            DenseDocument(
                chunk.chunk_id,
                chunk.doc_id,
                chunk.content_hash,
                chunk.index_hash or index_hash(chunk, chunk.vector_hash),
                chunk.vector,
            )
            for chunk in chunks
            if chunk.retrievable and chunk.vector is not None
        ]
        if not documents:
            return
        if self.worker is None:
            if self._idle is None or _dense_held_here(self.workspace):
                self.close_idle()
                return
            _check_index_embedder(self.workspace)  # before a point is written, as a sync would
            self.worker, self._idle = self._idle, None
        self.worker.stream(documents)

    def close_idle(self) -> None:
        """Stop the worker process if no points went to it (it never opened the index)."""
        if self._idle is not None:
            idle, self._idle = self._idle, None
            idle.close()

    def close(self) -> None:
        self.close_idle()
        if self.worker is not None:
            self.worker.close()


def _check_index_embedder(workspace: Workspace) -> None:
    """Refuse (IndexStateError) indexes built with another embedder than the configured one."""
    from ragtriage import locations
    from ragtriage.index.embed import get_embedder
    from ragtriage.index.manifest import check_embedder, read_manifest

    manifest_file = locations.manifest_path(workspace.home)
    check_embedder(read_manifest(manifest_file), get_embedder(workspace.settings.embedder), manifest_file)


def _dense_held_here(workspace: Workspace) -> bool:
    from ragtriage.index.dense_sync import dense_held_here

    return dense_held_here(workspace)


def interrupted_message(stored_revision: int | None) -> str:
    """What an interrupted import did: nothing (before its commit), or stored the chunks but not
    (all of) the indexes."""
    if stored_revision is None:
        return "kb import: interrupted; nothing was imported (the KB and its indexes are as they were)"
    return (
        f"kb import: interrupted while updating the indexes; the chunks are stored (KB revision "
        f"{stored_revision}) but the indexes are behind: run the same kb import again to update them"
    )
