"""Keep the derived indexes (Whoosh BM25, Qdrant dense) in line with the published chunks in SQL.

`sync_indexes` diffs each index against the KB by an index hash (doc id, title, heading path and
content), so it also repairs an index left behind by an interrupted sync. Only chunks whose
(embedder, passage text) is not in the embedding cache are embedded, in batches; each batch is
cached and written to Qdrant at once, so a stopped sync resumes where it stopped. The dense half
lives in `dense_sync` (run here, or by `dense_worker` in a process of its own during `kb import`).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ragtriage import locations
from ragtriage.index.bm25 import WhooshIndex
from ragtriage.index.dense_sync import (
    CACHE_FILE,
    DenseFigures,
    DenseIndex,
    compact_dense,
    dense_backend_of,
    open_dense,
    sync_dense,
)
from ragtriage.index.embed import get_embedder

# Re-exported: the indexer is where callers look for the state of the indexes too.
from ragtriage.index.index_state import index_lag, index_status
from ragtriage.index.manifest import IndexManifest, check_embedder, hash_digest, read_manifest, write_manifest
from ragtriage.index.published import PublishedChunks, published_chunks
from ragtriage.index.types import Embedder
from ragtriage.workspace import Workspace

if TYPE_CHECKING:
    from ragtriage.index.bm25s_index import BM25sIndex
    from ragtriage.index.dense_worker import DenseWorker
    from ragtriage.index.import_handoff import ImportHandoff

__all__ = [
    "CACHE_FILE",
    "IndexReport",
    "Indexes",
    "index_lag",
    "index_status",
    "indexed_content_hash",
    "open_indexes",
    "rebuild_indexes",
    "sync_indexes",
]

ProgressCallback = Callable[[int, int], None]
StopCallback = Callable[[], bool]


@dataclass
class IndexReport:
    """What one sync did, with time split into embedding and everything else."""

    added: int = 0
    """Chunks missing from at least one index before the sync."""
    updated: int = 0
    """Chunks indexed with other content (or title) before the sync."""
    deleted: int = 0
    """Chunks removed from the indexes (no longer published)."""
    unchanged: int = 0
    embedded: int = 0
    """Passages sent to the embedder (cache misses)."""
    imported_vectors: int = 0
    """Chunks written to the dense index with the vector they were imported with (not embedded)."""
    cache_hits: int = 0
    chunk_count: int = 0
    kb_revision: int = 0
    embed_seconds: float = 0.0
    bm25_seconds: float = 0.0
    """Writing the BM25 (Whoosh) index."""
    dense_seconds: float = 0.0
    """Writing the dense (Qdrant) index, embedding excluded (with a dense worker: its busy time,
    overlapping the SQL writes and the BM25 build)."""
    dense_wait_seconds: float = 0.0
    """With a dense worker: how long this process waited for it after the BM25 build."""
    dense_cpu_seconds: float = 0.0
    """With a dense worker: the CPU time that process used."""
    other_seconds: float = 0.0
    total_seconds: float = 0.0
    stopped: bool = False
    """True when `should_stop` ended the sync early (the manifest is then left as it was)."""


@dataclass
class Indexes:
    """The opened BM25 and dense indexes, the embedder they were built with and the manifest."""

    bm25: WhooshIndex | BM25sIndex
    dense: DenseIndex
    embedder: Embedder
    manifest: IndexManifest | None
    _closed: bool = field(default=False, repr=False)

    def indexed_content_hash(self, chunk_id: str) -> dict[str, str | None]:
        """The content hash each index holds for `chunk_id` (None: not in that index)."""
        return {"bm25": self.bm25.content_hash(chunk_id), "dense": self.dense.content_hash(chunk_id)}

    def close(self) -> None:
        """Close the searcher and release the Qdrant folder."""
        if not self._closed:
            self._closed = True
            self.bm25.close()
            self.dense.close()


def indexed_content_hash(indexes: Indexes, chunk_id: str) -> dict[str, str | None]:
    """Is `chunk_id` in each index, and with which content hash (for index_stale diagnosis)."""
    return indexes.indexed_content_hash(chunk_id)


def _bm25s_index_class() -> type[BM25sIndex]:
    """`BM25sIndex`, imported on demand (it imports bm25s itself, without numba, when it first
    loads an index to search: `bm25s_index.import_bm25s`)."""
    from ragtriage.index.bm25s_index import BM25sIndex

    return BM25sIndex


def _open_bm25(workspace: Workspace) -> WhooshIndex | BM25sIndex:
    index = workspace.settings.index
    engine: type[WhooshIndex] | type[BM25sIndex] = WhooshIndex
    if index.bm25_engine == "bm25s":
        engine = _bm25s_index_class()
    folder = locations.bm25s_dir if index.bm25_engine == "bm25s" else locations.whoosh_dir
    return engine(
        folder(workspace.home),
        title_boost=index.title_boost,
        query_segmentation=index.query_segmentation,
        query_stop_words=index.query_stop_words,
        procs=min(index.bm25_procs, os.cpu_count() or 1),
        multiproc_min_docs=index.bm25_multiproc_min_docs,
        writer_timeout_s=index.writer_timeout_s,
    )


def open_indexes(workspace: Workspace) -> Indexes:
    """Open both indexes (empty ones if never built) with the configured embedder.

    Raises:
        IndexStateError: the manifest names another embedder or dimension, or the Qdrant folder is
            held by another process.
    """
    embedder = get_embedder(workspace.settings.embedder)
    manifest_file = locations.manifest_path(workspace.home)
    manifest = read_manifest(manifest_file)
    check_embedder(manifest, embedder, manifest_file)
    bm25 = _open_bm25(workspace)
    try:
        dense = open_dense(workspace, embedder)
    except BaseException:
        bm25.close()
        raise
    return Indexes(bm25=bm25, dense=dense, embedder=embedder, manifest=manifest)


def sync_indexes(
    workspace: Workspace,
    on_progress: ProgressCallback | None = None,
    should_stop: StopCallback | None = None,
    *,
    dense_worker: DenseWorker | None = None,
    handoff: ImportHandoff | None = None,
) -> IndexReport:
    """Bring Whoosh and Qdrant in line with the published chunks and write the manifest.

    With `dense_worker` (`kb import`), the dense index is synced by that process, which already
    holds the points streamed to it; this process builds BM25 meanwhile and then waits for it.
    With `handoff` (`kb import`), the chunks the import wrote are taken from its pass instead of
    being loaded back from SQL (`published.published_chunks`).
    """
    return _sync(
        workspace,
        rebuild=False,
        on_progress=on_progress,
        should_stop=should_stop,
        dense_worker=dense_worker,
        handoff=handoff,
    )


def rebuild_indexes(
    workspace: Workspace,
    on_progress: ProgressCallback | None = None,
    should_stop: StopCallback | None = None,
) -> IndexReport:
    """Drop both indexes and the manifest and build them again with the configured embedder.

    Embeddings cached for this embedder are reused, so a rebuild after a crash embeds nothing new.
    """
    return _sync(workspace, rebuild=True, on_progress=on_progress, should_stop=should_stop)


def _trusted(previous: IndexManifest | None, workspace: Workspace, handoff: ImportHandoff | None) -> bool:
    """The indexes held the KB as the import found it: their hashes are those of the chunks it did not write."""
    return (
        handoff is not None
        and handoff.base_revision is not None
        and previous is not None
        and previous.kb_revision == handoff.base_revision
        and previous.kb == workspace.settings.kb.name
        and previous.bm25_engine == workspace.settings.index.bm25_engine
    )


def _sync(
    workspace: Workspace,
    *,
    rebuild: bool,
    on_progress: ProgressCallback | None,
    should_stop: StopCallback | None,
    dense_worker: DenseWorker | None = None,
    handoff: ImportHandoff | None = None,
) -> IndexReport:
    started = time.perf_counter()
    report = IndexReport()
    embedder = get_embedder(workspace.settings.embedder)
    manifest_file = locations.manifest_path(workspace.home)
    # Resolved before a rebuild drops the manifest: `auto` keeps the home on its backend.
    backend = dense_backend_of(workspace)
    if rebuild:
        manifest_file.unlink(missing_ok=True)
        shutil.rmtree(locations.whoosh_dir(workspace.home), ignore_errors=True)
        shutil.rmtree(locations.bm25s_dir(workspace.home), ignore_errors=True)
    previous = read_manifest(manifest_file)
    check_embedder(previous, embedder, manifest_file)
    bm25 = _open_bm25(workspace)
    dense: DenseIndex | None = None
    try:
        bm25_hashes = bm25.indexed_hashes()
        chunks = published_chunks(
            workspace, handoff, indexed=bm25_hashes, trusted=_trusted(previous, workspace, handoff)
        )
        report.kb_revision = chunks.revision
        wanted = chunks.index_hashes
        dense_before: dict[str, str] = {}
        if dense_worker is not None:
            dense_worker.sync(wanted)
        else:
            dense = open_dense(workspace, embedder, recreate=rebuild, backend=backend)
            dense_before = {cid: hashes[1] for cid, hashes in dense.indexed_hashes().items()}
        bm25_state = {cid: hashes[1] for cid, hashes in bm25_hashes.items()}
        del bm25_hashes
        bm25_todo = [cid for cid, ihash in wanted.items() if bm25_state.get(cid) != ihash]
        # With a worker the dense diff happens there: count every chunk as possible dense work.
        dense_todo = (
            len(wanted)
            if dense is None
            else sum(1 for cid, ihash in wanted.items() if dense_before.get(cid) != ihash)
        )
        total = len(bm25_todo) + dense_todo
        if on_progress is not None:
            on_progress(0, total)

        began = time.perf_counter()
        if isinstance(bm25, WhooshIndex) and not bm25.takes_term_ids():
            chunks.segmented = None  # an index with positions: Whoosh's writer needs the texts
        documents = chunks.bm25_documents(workspace, bm25_todo)
        deletes = [cid for cid in bm25_state if cid not in wanted]
        progress = None if on_progress is None else lambda done: on_progress(done, total)
        if chunks.segmented is not None:
            bm25.apply(documents, deletes, on_progress=progress, segmented=chunks.segmented)
        else:
            bm25.apply(documents, deletes, on_progress=progress)
        del documents
        chunks.segmented = None  # the term ids are in the index now
        report.bm25_seconds = time.perf_counter() - began
        began = time.perf_counter()
        if dense_worker is not None:
            figures = dense_worker.finish()
            report.dense_wait_seconds = time.perf_counter() - began
            report.dense_cpu_seconds = figures.cpu_seconds
            if on_progress is not None:
                on_progress(total, total)
        elif dense is not None:
            figures = sync_dense(
                workspace,
                dense,
                embedder,
                wanted,
                lambda ids: chunks.load(workspace, ids),
                dense_before,
                progress=None
                if on_progress is None
                else lambda done: on_progress(len(bm25_todo) + done, total),
                should_stop=should_stop,
            )
            compact_dense(dense, figures)
        _count_changes(report, wanted, bm25_state, figures.before)
        report.embedded, report.imported_vectors = figures.embedded, figures.imported_vectors
        report.cache_hits, report.stopped = figures.cache_hits, figures.stopped
        report.embed_seconds, report.dense_seconds = figures.embed_seconds, figures.dense_seconds
        report.chunk_count = len(wanted)
        report.total_seconds = time.perf_counter() - started
        report.other_seconds = report.total_seconds - report.embed_seconds
        if not report.stopped:
            _write(manifest_file, previous, workspace, embedder, figures, chunks, report, backend)
    finally:
        bm25.close()
        if dense is not None:
            dense.close()
    return report


def _count_changes(
    report: IndexReport, wanted: dict[str, str], bm25_state: dict[str, str], dense_state: dict[str, str]
) -> None:
    for chunk_id, ihash in wanted.items():
        states = (bm25_state.get(chunk_id), dense_state.get(chunk_id))
        if None in states:
            report.added += 1
        elif any(state != ihash for state in states):
            report.updated += 1
        else:
            report.unchanged += 1
    report.deleted = len((bm25_state.keys() | dense_state.keys()) - wanted.keys())


def _write(
    path: Any,
    previous: IndexManifest | None,
    workspace: Workspace,
    embedder: Embedder,
    dense: DenseFigures,
    chunks: PublishedChunks,
    report: IndexReport,
    backend: str,
) -> None:
    manifest = IndexManifest(
        kb=workspace.settings.kb.name,
        kb_revision=report.kb_revision,
        embedder=embedder.name,
        dim=embedder.dim,
        collection=dense.collection,
        qdrant=dense.where,
        chunk_count=len(chunks),
        content_digest=hash_digest(chunks.content_hashes),
        content_hashes=chunks.content_hashes,
        imported_vectors=chunks.imported_vectors,
        last_sync_seconds=round(report.total_seconds, 3),
        last_embed_seconds=round(report.embed_seconds, 3),
        bm25_engine=workspace.settings.index.bm25_engine,
        dense_backend=backend,
        dense_server=workspace.settings.index.qdrant_url is not None,
    )
    if previous is not None:
        manifest.created_at = previous.created_at
    write_manifest(path, manifest)
