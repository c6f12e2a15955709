"""The dense half of an index sync: diff the Qdrant collection against the KB, delete, embed, upsert.

Chunks imported with a vector are upserted with it (checked against the query embedder first);
the others are embedded unless their (embedder, passage text) is in the embedding cache, batch by
batch, each batch cached and upserted at once, so a stopped sync resumes where it stopped. It runs
in the syncing process (`indexer`) or in a process of its own (`dense_worker`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragtriage import locations
from ragtriage.index.dense import DenseDocument, QdrantIndex
from ragtriage.index.dense_edge import EdgeIndex
from ragtriage.index.embed import passage_text
from ragtriage.index.embed_cache import EmbeddingCache, text_hash
from ragtriage.index.imported_vectors import check_imported_vectors, load_vectors
from ragtriage.index.kb_chunks import KBChunk
from ragtriage.index.manifest import effective_dense_backend, read_manifest
from ragtriage.index.qdrant_clients import held_by_this_process
from ragtriage.index.types import Embedder
from ragtriage.workspace import Workspace

__all__ = [
    "CACHE_FILE",
    "DenseFigures",
    "DenseIndex",
    "compact_dense",
    "dense_backend_of",
    "dense_document",
    "dense_folder",
    "dense_held_here",
    "open_dense",
    "sync_dense",
]

#: A dense index of either embedded backend (or a Qdrant server, through `QdrantIndex`).
DenseIndex = QdrantIndex | EdgeIndex

CACHE_FILE = "embeddings.sqlite"
_VECTOR_BATCH = 2000  # imported vectors per batch: ids per IN (…), one Qdrant commit in local mode
StopCallback = Callable[[], bool]


@dataclass
class DenseFigures:
    """What the dense half of a sync did (see `indexer.IndexReport` for the fields)."""

    before: dict[str, str]
    """chunk id → index hash of every point before the sync."""
    collection: str
    where: str
    embedded: int = 0
    imported_vectors: int = 0
    cache_hits: int = 0
    embed_seconds: float = 0.0
    dense_seconds: float = 0.0
    cpu_seconds: float = 0.0
    """CPU time of the process that synced (set by `dense_worker` only: its whole life)."""
    stopped: bool = False
    removed: int = 0
    """Points deleted or replaced by the sync (what a Qdrant Edge compaction reclaims)."""
    compact_seconds: float = 0.0
    """Time of `compact_dense` (Qdrant Edge only; part of `dense_seconds`)."""


#: manifest path → ((inode, mtime ns, size), its recorded dense backend): a manifest of 100k
#: chunks takes a fraction of a second to parse, and `auto` is resolved at every open.
_RECORDED: dict[Path, tuple[tuple[int, int, int], str | None]] = {}


def dense_backend_of(workspace: Workspace) -> str:
    """The workspace's embedded dense backend, `qdrant_local` or `qdrant_edge` (never `auto`):
    `manifest.effective_dense_backend` of the settings and the home's index manifest.

    Raises:
        IndexStateError: `auto` and the manifest exists but cannot be read.
    """
    index = workspace.settings.index
    if index.dense_backend != "auto":
        return index.dense_backend
    path = locations.manifest_path(workspace.home)
    try:
        stat = path.stat()
    except FileNotFoundError:
        return effective_dense_backend(index, None)
    key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
    cached = _RECORDED.get(path)
    if cached is None or cached[0] != key:
        manifest = read_manifest(path)
        cached = (key, None if manifest is None else manifest.dense_backend)
        _RECORDED[path] = cached
    recorded = cached[1]
    return recorded if recorded is not None else effective_dense_backend(index, None)


def open_dense(
    workspace: Workspace, embedder: Embedder, *, recreate: bool = False, backend: str | None = None
) -> DenseIndex:
    """The workspace's dense index: `[index] qdrant_url`, else the embedded `backend` in the home
    (default `dense_backend_of(workspace)`; a rebuild passes the one resolved before it dropped
    the manifest).

    The one place that picks the dense implementation (the indexer, the import's dense worker,
    replay and the service all open it here).

    Raises:
        IndexStateError: the index is held by another process, or holds vectors of another dimension.
    """
    index = workspace.settings.index
    if index.qdrant_url:
        return QdrantIndex.open(
            embedder,
            url=index.qdrant_url,
            api_key=os.environ.get(index.qdrant_api_key_env),
            collection=index.collection,
            recreate=recreate,
        )
    if (backend or dense_backend_of(workspace)) == "qdrant_edge":
        return EdgeIndex.open(
            embedder,
            path=locations.qdrant_edge_dir(workspace.home),
            collection=index.collection,
            recreate=recreate,
        )
    return QdrantIndex.open(
        embedder, path=locations.qdrant_dir(workspace.home), collection=index.collection, recreate=recreate
    )


def dense_folder(workspace: Workspace) -> Path | None:
    """The folder the configured embedded dense index locks (None with a Qdrant server)."""
    index = workspace.settings.index
    if index.qdrant_url:
        return None
    if dense_backend_of(workspace) == "qdrant_edge":
        return locations.qdrant_edge_dir(workspace.home) / index.collection
    return locations.qdrant_dir(workspace.home)


def dense_held_here(workspace: Workspace) -> bool:
    """This process has the configured embedded dense index open (another process could not open it)."""
    folder = dense_folder(workspace)
    return folder is not None and held_by_this_process(folder)


def sync_dense(
    workspace: Workspace,
    dense: DenseIndex,
    embedder: Embedder,
    wanted: Mapping[str, str],
    load: Callable[[list[str]], Sequence[KBChunk]],
    before: dict[str, str],
    *,
    current: Mapping[str, str] | None = None,
    progress: Callable[[int], None] | None = None,
    should_stop: StopCallback | None = None,
) -> DenseFigures:
    """Make `dense` hold exactly the `wanted` chunks (chunk id → index hash): delete the others and
    write those whose index hash differs, as `load` gives them (by id, in the order asked).

    `before` is the index's state (chunk id → index hash) before the sync; `current` its state now
    when points were written since (`dense_worker`), else `before`.
    """
    began = time.perf_counter()
    figures = DenseFigures(before=before, collection=dense.collection, where=dense.where)
    state = before if current is None else current
    deletes = [cid for cid in state if cid not in wanted]
    dense.delete(deletes)
    todo = list(load([cid for cid, ihash in wanted.items() if state.get(cid) != ihash]))
    figures.removed = len(deletes) + sum(1 for chunk in todo if chunk.row.chunk_id in state)
    if current is not None:  # points the dense worker replaced while the import streamed them
        figures.removed += sum(1 for cid, ihash in current.items() if cid in before and before[cid] != ihash)
    cache = EmbeddingCache(locations.cache_dir(workspace.home) / CACHE_FILE)
    try:
        figures.stopped = _embed_and_upsert(
            figures, workspace, dense, embedder, cache, todo, progress=progress, should_stop=should_stop
        )
    finally:
        cache.close()
    figures.dense_seconds = time.perf_counter() - began - figures.embed_seconds
    return figures


def compact_dense(dense: DenseIndex, figures: DenseFigures) -> None:
    """Reclaim the space of deleted and replaced points, once a sync has committed them.

    Qdrant Edge never compacts on its own (no background optimizer), so a sync that removed
    points (`figures.removed`) runs its optimizer once: about 1.2 s for 20k points with 40 %
    deleted, nothing otherwise. Qdrant local mode and a server need nothing.
    """
    if figures.removed == 0 or figures.stopped or not isinstance(dense, EdgeIndex):
        return
    began = time.perf_counter()
    dense.compact()
    figures.compact_seconds = time.perf_counter() - began
    figures.dense_seconds += figures.compact_seconds


def _embed_and_upsert(
    figures: DenseFigures,
    workspace: Workspace,
    dense: DenseIndex,
    embedder: Embedder,
    cache: EmbeddingCache,
    todo: list[KBChunk],
    *,
    progress: Callable[[int], None] | None,
    should_stop: StopCallback | None,
) -> bool:
    """Embed cache misses batch by batch, caching and upserting each batch; True if stopped early."""
    check_imported_vectors([c.imported_vector for c in todo], [c.row.chunk_id for c in todo], embedder)
    imported = [c for c in todo if c.imported_vector is not None]
    for start in range(0, len(imported), _VECTOR_BATCH):
        if should_stop is not None and should_stop():
            return True
        batch = imported[start : start + _VECTOR_BATCH]
        vectors = load_vectors(workspace.engine, [c.row.chunk_id for c in batch])
        dense.upsert([dense_document(c, vectors[c.row.chunk_id]) for c in batch])
        figures.imported_vectors += len(batch)
        if progress is not None:
            progress(start + len(batch))
    done = len(imported)
    todo = [c for c in todo if c.imported_vector is None]
    texts = [passage_text(c.row.title, c.row.heading_path, c.row.content) for c in todo]
    keys = [text_hash(text) for text in texts]
    cached = cache.get_many(embedder.name, keys)
    batch_size = workspace.settings.embedder.batch_size
    for start in range(0, len(todo), batch_size):
        if should_stop is not None and should_stop():
            return True
        positions = range(start, min(start + batch_size, len(todo)))
        missing = [i for i in positions if keys[i] not in cached]
        if missing:
            began = time.perf_counter()
            embedded = embedder.embed_passages([texts[i] for i in missing])
            figures.embed_seconds += time.perf_counter() - began
            fresh = {keys[i]: embedded[n] for n, i in enumerate(missing)}
            cache.put_many(embedder.name, fresh)
            cached.update(fresh)
            figures.embedded += len(missing)
        figures.cache_hits += len(positions) - len(missing)
        dense.upsert([dense_document(todo[i], cached[keys[i]]) for i in positions])
        if progress is not None:
            progress(done + positions.stop)
    return False


def dense_document(chunk: KBChunk, vector: np.ndarray) -> DenseDocument:
    """The point of `chunk` with `vector`."""
    return DenseDocument(
        chunk_id=chunk.row.chunk_id,
        doc_id=chunk.row.doc_id,
        content_hash=chunk.row.content_hash,
        index_hash=chunk.index_hash,
        vector=vector,
    )
