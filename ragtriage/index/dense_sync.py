"""The dense half of an index sync: open the dense index, diff it against the KB, delete, embed, upsert.

Chunks imported with a vector are upserted with it (checked against the query embedder first);
the others are embedded unless their (embedder, passage text) is in the embedding cache, batch by
batch, each batch cached and upserted at once, so a stopped sync resumes where it stopped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy.engine import Engine

from ragtriage import locations
from ragtriage.config.settings import Settings
from ragtriage.errors import IndexStateError
from ragtriage.index.dense import DenseDocument, DenseIndex, ServerIndex
from ragtriage.index.dense_edge import EdgeIndex
from ragtriage.index.embed import passage_text
from ragtriage.index.embed_cache import EmbeddingCache, text_hash
from ragtriage.index.imported_vectors import check_imported_vectors, load_vectors
from ragtriage.index.kb_chunks import KBChunk
from ragtriage.index.types import Embedder

__all__ = ["CACHE_FILE", "DenseFigures", "dense_document", "open_dense", "sync_dense"]

CACHE_FILE = "embeddings.sqlite"
_VECTOR_BATCH = 2000  # imported vectors per batch: ids per IN (…)
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
    stopped: bool = False


def open_dense(home: Path, settings: Settings, embedder: Embedder, *, recreate: bool = False) -> DenseIndex:
    """The dense index: the Qdrant server of `[index] qdrant_url`, else the home's Qdrant Edge shard.

    Raises:
        IndexStateError: the index is held by another process, holds vectors of another
            dimension, or the settings name the removed Qdrant local mode.
    """
    index = settings.index
    if index.qdrant_url:
        return ServerIndex.open(
            embedder,
            url=index.qdrant_url,
            api_key=os.environ.get(index.qdrant_api_key_env),
            collection=index.collection,
            recreate=recreate,
        )
    if index.dense_backend == "qdrant_local":
        raise IndexStateError(
            '[index] dense_backend = "qdrant_local" is no longer supported: set it to "qdrant_edge" '
            "(or remove it) and run `ragtriage kb reindex`"
        )
    return EdgeIndex.open(
        embedder, path=locations.qdrant_edge_dir(home), collection=index.collection, recreate=recreate
    )


def sync_dense(
    home: Path,
    engine: Engine,
    batch_size: int,
    dense: DenseIndex,
    wanted: Mapping[str, KBChunk],
    *,
    progress: Callable[[int], None] | None = None,
    should_stop: StopCallback | None = None,
) -> DenseFigures:
    """Make `dense` hold exactly the `wanted` chunks: delete the others and write those whose index
    hash differs (imported vectors read from `engine`, the rest embedded `batch_size` at a time,
    through the home's embedding cache). Space of removed points is reclaimed at the end.
    """
    began = time.perf_counter()
    before = {cid: hashes[1] for cid, hashes in dense.indexed_hashes().items()}
    figures = DenseFigures(before=before, collection=dense.collection, where=dense.where)
    deletes = [cid for cid in before if cid not in wanted]
    dense.delete(deletes)
    todo = [chunk for cid, chunk in wanted.items() if before.get(cid) != chunk.index_hash]
    removed = len(deletes) + sum(1 for chunk in todo if chunk.row.chunk_id in before)
    cache = EmbeddingCache(locations.cache_dir(home) / CACHE_FILE)
    try:
        figures.stopped = _embed_and_upsert(
            figures, engine, batch_size, dense, cache, todo, progress=progress, should_stop=should_stop
        )
    finally:
        cache.close()
    if removed and not figures.stopped:
        dense.compact()
    figures.dense_seconds = time.perf_counter() - began - figures.embed_seconds
    return figures


def _embed_and_upsert(
    figures: DenseFigures,
    engine: Engine,
    batch_size: int,
    dense: DenseIndex,
    cache: EmbeddingCache,
    todo: list[KBChunk],
    *,
    progress: Callable[[int], None] | None,
    should_stop: StopCallback | None,
) -> bool:
    """Embed cache misses batch by batch, caching and upserting each batch; True if stopped early."""
    embedder = dense.embedder
    check_imported_vectors([c.imported_vector for c in todo], [c.row.chunk_id for c in todo], embedder)
    imported = [c for c in todo if c.imported_vector is not None]
    for start in range(0, len(imported), _VECTOR_BATCH):
        if should_stop is not None and should_stop():
            return True
        batch = imported[start : start + _VECTOR_BATCH]
        vectors = load_vectors(engine, [c.row.chunk_id for c in batch])
        dense.upsert([dense_document(c, vectors[c.row.chunk_id]) for c in batch])
        figures.imported_vectors += len(batch)
        if progress is not None:
            progress(start + len(batch))
    done = len(imported)
    todo = [c for c in todo if c.imported_vector is None]
    texts = [passage_text(c.row.title, c.row.heading_path, c.row.content) for c in todo]
    keys = [text_hash(text) for text in texts]
    cached = cache.get_many(embedder.name, keys)
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
