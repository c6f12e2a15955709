"""Keep the derived indexes (BM25: Whoosh or bm25s; dense: Qdrant) in line with the published chunks in SQL.

`sync_indexes` diffs each index against the KB by an index hash (doc id, title, heading path and
content), so it also repairs an index left behind by an interrupted sync. Only chunks whose
(embedder, passage text) is not in the embedding cache are embedded (`dense_sync`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import Engine

from ragtriage import locations
from ragtriage.config.settings import Settings
from ragtriage.index.bm25 import WhooshIndex
from ragtriage.index.bm25_engine import BM25Engine
from ragtriage.index.dense import DenseIndex
from ragtriage.index.dense_sync import open_dense, sync_dense
from ragtriage.index.embed import get_embedder
from ragtriage.index.kb_chunks import bm25_document, load_chunks
from ragtriage.index.manifest import (
    IndexManifest,
    check_dense_backend,
    check_embedder,
    configured_dense_backend,
    hash_digest,
    read_manifest,
    write_manifest,
)
from ragtriage.index.types import Embedder

__all__ = ["IndexReport", "Indexes", "open_indexes", "rebuild_indexes", "sync_indexes"]

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
    """Writing the BM25 index."""
    dense_seconds: float = 0.0
    """Writing the dense index, embedding excluded."""
    other_seconds: float = 0.0
    total_seconds: float = 0.0
    stopped: bool = False
    """True when `should_stop` ended the sync early (the manifest is then left as it was)."""


@dataclass
class Indexes:
    """The opened BM25 and dense indexes, the embedder they were built with and the manifest."""

    bm25: BM25Engine
    dense: DenseIndex
    embedder: Embedder
    manifest: IndexManifest | None
    _closed: bool = field(default=False, repr=False)

    def indexed_content_hash(self, chunk_id: str) -> dict[str, str | None]:
        """The content hash each index holds for `chunk_id` (None: not in that index)."""
        return {"bm25": self.bm25.content_hash(chunk_id), "dense": self.dense.content_hash(chunk_id)}

    def close(self) -> None:
        """Close the searcher and release the dense index."""
        if not self._closed:
            self._closed = True
            self.bm25.close()
            self.dense.close()


def _open_bm25(home: Path, settings: Settings) -> BM25Engine:
    index = settings.index
    engine: type[BM25Engine] = WhooshIndex
    folder = locations.whoosh_dir(home)
    if index.bm25_engine == "bm25s":
        # bm25s imports scipy (and numba when installed): only a bm25s home pays for them.
        from ragtriage.index.bm25s_index import BM25sIndex

        engine, folder = BM25sIndex, locations.bm25s_dir(home)
    return engine(
        folder,
        title_boost=index.title_boost,
        query_segmentation=index.query_segmentation,
        query_stop_words=index.query_stop_words,
        k1=index.bm25_k1,
        b=index.bm25_b,
        procs=index.bm25_procs,
        multiproc_min_docs=index.bm25_multiproc_min_docs,
        writer_timeout_s=index.writer_timeout_s,
    )


def open_indexes(home: Path, settings: Settings) -> Indexes:
    """Open both indexes of `home` (empty ones if never built) with the configured embedder.

    Raises:
        IndexStateError: the manifest names another embedder or dimension, or a removed dense
            backend, or the dense index is held by another process.
    """
    embedder = get_embedder(settings.embedder)
    manifest_file = locations.manifest_path(home)
    manifest = read_manifest(manifest_file)
    check_embedder(manifest, embedder, manifest_file)
    check_dense_backend(manifest, manifest_file)
    bm25 = _open_bm25(home, settings)
    try:
        dense = open_dense(home, settings, embedder)
    except BaseException:
        bm25.close()
        raise
    return Indexes(bm25=bm25, dense=dense, embedder=embedder, manifest=manifest)


def sync_indexes(
    home: Path,
    settings: Settings,
    engine: Engine,
    on_progress: ProgressCallback | None = None,
    should_stop: StopCallback | None = None,
) -> IndexReport:
    """Bring the BM25 and dense indexes of `home` in line with the published chunks of the KB in
    `engine`, and write the manifest."""
    return _sync(home, settings, engine, rebuild=False, on_progress=on_progress, should_stop=should_stop)


def rebuild_indexes(
    home: Path,
    settings: Settings,
    engine: Engine,
    on_progress: ProgressCallback | None = None,
    should_stop: StopCallback | None = None,
) -> IndexReport:
    """Drop both indexes and the manifest and build them again with the configured embedder.

    Embeddings cached for this embedder are reused, so a rebuild after a crash embeds nothing new.
    """
    return _sync(home, settings, engine, rebuild=True, on_progress=on_progress, should_stop=should_stop)


def _sync(
    home: Path,
    settings: Settings,
    engine: Engine,
    *,
    rebuild: bool,
    on_progress: ProgressCallback | None,
    should_stop: StopCallback | None,
) -> IndexReport:
    started = time.perf_counter()
    report = IndexReport()
    embedder = get_embedder(settings.embedder)
    manifest_file = locations.manifest_path(home)
    if rebuild:
        manifest_file.unlink(missing_ok=True)
        for folder in (locations.whoosh_dir(home), locations.bm25s_dir(home), locations.qdrant_dir(home)):
            shutil.rmtree(folder, ignore_errors=True)
    previous = read_manifest(manifest_file)
    check_embedder(previous, embedder, manifest_file)
    chunks = load_chunks(engine, settings.kb.name)
    report.kb_revision = chunks.revision
    wanted = chunks.index_hashes
    bm25 = _open_bm25(home, settings)
    dense: DenseIndex | None = None
    try:
        dense = open_dense(home, settings, embedder, recreate=rebuild)
        bm25_state = {cid: hashes[1] for cid, hashes in bm25.indexed_hashes().items()}
        bm25_todo = [cid for cid, ihash in wanted.items() if bm25_state.get(cid) != ihash]
        total = len(bm25_todo) + len(wanted)
        if on_progress is not None:
            on_progress(0, total)

        began = time.perf_counter()
        deletes = [cid for cid in bm25_state if cid not in wanted]
        progress = None if on_progress is None else lambda done: on_progress(done, total)
        bm25.apply([bm25_document(chunk) for chunk in chunks.load(bm25_todo)], deletes, on_progress=progress)
        report.bm25_seconds = time.perf_counter() - began
        figures = sync_dense(
            home,
            engine,
            settings.embedder.batch_size,
            dense,
            chunks.chunks,
            progress=None if on_progress is None else lambda done: on_progress(len(bm25_todo) + done, total),
            should_stop=should_stop,
        )
        if on_progress is not None:
            on_progress(total, total)
        _count_changes(report, wanted, bm25_state, figures.before)
        report.embedded, report.imported_vectors = figures.embedded, figures.imported_vectors
        report.cache_hits, report.stopped = figures.cache_hits, figures.stopped
        report.embed_seconds, report.dense_seconds = figures.embed_seconds, figures.dense_seconds
        report.chunk_count = len(wanted)
        report.total_seconds = time.perf_counter() - started
        report.other_seconds = report.total_seconds - report.embed_seconds
        if not report.stopped:
            manifest = IndexManifest(
                kb=settings.kb.name,
                kb_revision=report.kb_revision,
                embedder=embedder.name,
                dim=embedder.dim,
                collection=figures.collection,
                qdrant=figures.where,
                chunk_count=len(chunks),
                content_digest=hash_digest(chunks.content_hashes),
                content_hashes=chunks.content_hashes,
                imported_vectors=chunks.imported_vectors,
                last_sync_seconds=round(report.total_seconds, 3),
                last_embed_seconds=round(report.embed_seconds, 3),
                bm25_engine=settings.index.bm25_engine,
                dense_backend=configured_dense_backend(settings.index),
                dense_server=settings.index.qdrant_url is not None,
            )
            if previous is not None:
                manifest.created_at = previous.created_at
            write_manifest(manifest_file, manifest)
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
