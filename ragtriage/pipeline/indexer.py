"""Keep the derived indexes (Whoosh BM25, Qdrant dense) in line with the published chunks in SQL.

`sync_indexes` diffs each index against the KB by an index hash (doc id, title, heading path and
content), so it also repairs an index left behind by an interrupted sync. Only chunks whose
(embedder, passage text) is not in the embedding cache are embedded, in batches; each batch is
cached and written to Qdrant at once, so a stopped sync resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import select as sa_select
from sqlmodel import col, select

from ragtriage import locations
from ragtriage.pipeline.bm25 import BM25Document, WhooshIndex
from ragtriage.pipeline.dense import DenseDocument, QdrantIndex
from ragtriage.pipeline.embed import embedder_name, get_embedder, passage_text
from ragtriage.pipeline.embed_cache import EmbeddingCache, text_hash
from ragtriage.pipeline.imported_vectors import check_imported_vectors, imported_vector_refs, load_vectors
from ragtriage.pipeline.manifest import (
    IndexManifest,
    check_embedder,
    hash_digest,
    read_manifest,
    write_manifest,
)
from ragtriage.pipeline.types import Embedder
from ragtriage.store.db import read_session
from ragtriage.store.kb_tables import ChunkRow, KBStateRow
from ragtriage.workspace import Workspace

if TYPE_CHECKING:
    from ragtriage.pipeline.bm25s_index import BM25sIndex

__all__ = [
    "IndexReport",
    "Indexes",
    "index_status",
    "indexed_content_hash",
    "open_indexes",
    "rebuild_indexes",
    "sync_indexes",
]

ProgressCallback = Callable[[int, int], None]
StopCallback = Callable[[], bool]
CACHE_FILE = "embeddings.sqlite"
_VECTOR_BATCH = 2000  # imported vectors per batch: ids per IN (…), one Qdrant commit in local mode


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
    """Writing the dense (Qdrant) index, embedding excluded."""
    other_seconds: float = 0.0
    total_seconds: float = 0.0
    stopped: bool = False
    """True when `should_stop` ended the sync early (the manifest is then left as it was)."""


@dataclass
class Indexes:
    """The opened BM25 and dense indexes, the embedder they were built with and the manifest."""

    bm25: WhooshIndex | BM25sIndex
    dense: QdrantIndex
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


@dataclass(frozen=True, slots=True)
class _ChunkFields:
    """The columns of a chunk the indexes take (a tuple-sized object: 100k ORM rows would take GBs)."""

    chunk_id: str
    doc_id: str
    title: str
    heading_path: list[str]
    content: str
    content_hash: str


@dataclass(frozen=True)
class _KBChunk:
    row: _ChunkFields
    index_hash: str
    imported_vector: tuple[str, int] | None = None
    """(embedder name, dim) of the vector the chunk was imported with (`kb import`)."""


def indexed_content_hash(indexes: Indexes, chunk_id: str) -> dict[str, str | None]:
    """Is `chunk_id` in each index, and with which content hash (for index_stale diagnosis)."""
    return indexes.indexed_content_hash(chunk_id)


def _index_hash(row: ChunkRow | _ChunkFields, vector_hash: str | None = None) -> str:
    """Hash of every field the indexes take from a chunk (and of its imported vector): a change to
    any of them means re-indexing."""
    fields: list[Any] = [row.doc_id, row.title, list(row.heading_path), row.content]
    if vector_hash:
        fields.append(vector_hash)
    payload = json.dumps(fields, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _kb_revision(session: Any, kb: str) -> int:
    state = session.get(KBStateRow, kb)
    return int(state.revision) if state is not None else 0


def _load_chunks(workspace: Workspace) -> tuple[dict[str, _KBChunk], int]:
    kb = workspace.settings.kb.name
    with read_session(workspace.engine) as session:
        # A Core select of six columns (sqlmodel's typed select stops at four).
        statement = sa_select(
            col(ChunkRow.chunk_id),
            col(ChunkRow.doc_id),
            col(ChunkRow.title),
            col(ChunkRow.heading_path),
            col(ChunkRow.content),
            col(ChunkRow.content_hash),
        ).where(col(ChunkRow.status) == "published", col(ChunkRow.kb) == kb)
        rows = [_ChunkFields(*values) for values in session.execute(statement)]
        vectors = imported_vector_refs(session, kb)
        revision = _kb_revision(session, kb)
    chunks = {}
    for row in rows:
        vector = vectors.get(row.chunk_id)
        if vector is None:
            chunks[row.chunk_id] = _KBChunk(row, _index_hash(row))
        else:
            chunks[row.chunk_id] = _KBChunk(row, _index_hash(row, vector[0]), (vector[1], vector[2]))
    return chunks, revision


def _open_bm25(workspace: Workspace) -> WhooshIndex | BM25sIndex:
    index = workspace.settings.index
    engine: type[WhooshIndex] | type[BM25sIndex] = WhooshIndex
    if index.bm25_engine == "bm25s":
        # Imported on demand: bm25s imports numba when it is installed (about a second of start-up).
        from ragtriage.pipeline.bm25s_index import BM25sIndex

        engine = BM25sIndex
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


def _open_dense(workspace: Workspace, embedder: Embedder, *, recreate: bool = False) -> QdrantIndex:
    index = workspace.settings.index
    if index.qdrant_url:
        return QdrantIndex.open(
            embedder,
            url=index.qdrant_url,
            api_key=os.environ.get(index.qdrant_api_key_env),
            collection=index.collection,
            recreate=recreate,
        )
    return QdrantIndex.open(
        embedder, path=locations.qdrant_dir(workspace.home), collection=index.collection, recreate=recreate
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
        dense = _open_dense(workspace, embedder)
    except BaseException:
        bm25.close()
        raise
    return Indexes(bm25=bm25, dense=dense, embedder=embedder, manifest=manifest)


def sync_indexes(
    workspace: Workspace,
    on_progress: ProgressCallback | None = None,
    should_stop: StopCallback | None = None,
) -> IndexReport:
    """Bring Whoosh and Qdrant in line with the published chunks and write the manifest."""
    return _sync(workspace, rebuild=False, on_progress=on_progress, should_stop=should_stop)


def rebuild_indexes(
    workspace: Workspace,
    on_progress: ProgressCallback | None = None,
    should_stop: StopCallback | None = None,
) -> IndexReport:
    """Drop both indexes and the manifest and build them again with the configured embedder.

    Embeddings cached for this embedder are reused, so a rebuild after a crash embeds nothing new.
    """
    return _sync(workspace, rebuild=True, on_progress=on_progress, should_stop=should_stop)


def _sync(
    workspace: Workspace,
    *,
    rebuild: bool,
    on_progress: ProgressCallback | None,
    should_stop: StopCallback | None,
) -> IndexReport:
    started = time.perf_counter()
    report = IndexReport()
    chunks, report.kb_revision = _load_chunks(workspace)
    embedder = get_embedder(workspace.settings.embedder)
    manifest_file = locations.manifest_path(workspace.home)
    if rebuild:
        manifest_file.unlink(missing_ok=True)
        shutil.rmtree(locations.whoosh_dir(workspace.home), ignore_errors=True)
        shutil.rmtree(locations.bm25s_dir(workspace.home), ignore_errors=True)
    previous = read_manifest(manifest_file)
    check_embedder(previous, embedder, manifest_file)
    bm25 = _open_bm25(workspace)
    dense: QdrantIndex | None = None
    cache = EmbeddingCache(locations.cache_dir(workspace.home) / CACHE_FILE)
    try:
        dense = _open_dense(workspace, embedder, recreate=rebuild)
        bm25_state = {cid: hashes[1] for cid, hashes in bm25.indexed_hashes().items()}
        dense_state = {cid: hashes[1] for cid, hashes in dense.indexed_hashes().items()}
        _count_changes(report, chunks, bm25_state, dense_state)
        bm25_todo = [c for cid, c in chunks.items() if bm25_state.get(cid) != c.index_hash]
        dense_todo = [c for cid, c in chunks.items() if dense_state.get(cid) != c.index_hash]
        total = len(bm25_todo) + len(dense_todo)
        if on_progress is not None:
            on_progress(0, total)

        began = time.perf_counter()
        bm25.apply(
            [_bm25_document(c) for c in bm25_todo],
            [cid for cid in bm25_state if cid not in chunks],
            on_progress=None if on_progress is None else lambda done: on_progress(done, total),
        )
        report.bm25_seconds = time.perf_counter() - began
        began = time.perf_counter()
        dense.delete([cid for cid in dense_state if cid not in chunks])
        report.stopped = _embed_and_upsert(
            report,
            workspace,
            dense,
            embedder,
            cache,
            dense_todo,
            workspace.settings.embedder.batch_size,
            progress=None if on_progress is None else lambda done: on_progress(len(bm25_todo) + done, total),
            should_stop=should_stop,
        )
        report.dense_seconds = time.perf_counter() - began - report.embed_seconds
        report.chunk_count = len(chunks)
        report.total_seconds = time.perf_counter() - started
        report.other_seconds = report.total_seconds - report.embed_seconds
        if not report.stopped:
            _write(manifest_file, previous, workspace, embedder, dense, chunks, report)
    finally:
        cache.close()
        bm25.close()
        if dense is not None:
            dense.close()
    return report


def _count_changes(
    report: IndexReport, chunks: dict[str, _KBChunk], bm25_state: dict[str, str], dense_state: dict[str, str]
) -> None:
    for chunk_id, chunk in chunks.items():
        states = (bm25_state.get(chunk_id), dense_state.get(chunk_id))
        if None in states:
            report.added += 1
        elif any(state != chunk.index_hash for state in states):
            report.updated += 1
        else:
            report.unchanged += 1
    report.deleted = len((bm25_state.keys() | dense_state.keys()) - chunks.keys())


def _bm25_document(chunk: _KBChunk) -> BM25Document:
    row = chunk.row
    return BM25Document(
        chunk_id=row.chunk_id,
        doc_id=row.doc_id,
        title=" ".join([row.title, *row.heading_path]).strip(),
        content=row.content,
        content_hash=row.content_hash,
        index_hash=chunk.index_hash,
    )


def _embed_and_upsert(
    report: IndexReport,
    workspace: Workspace,
    dense: QdrantIndex,
    embedder: Embedder,
    cache: EmbeddingCache,
    todo: list[_KBChunk],
    batch_size: int,
    *,
    progress: Callable[[int], None] | None,
    should_stop: StopCallback | None,
) -> bool:
    """Embed cache misses batch by batch, caching and upserting each batch; True if stopped early.

    Chunks imported with a vector are upserted with it (checked against the embedder first).
    """
    check_imported_vectors([c.imported_vector for c in todo], [c.row.chunk_id for c in todo], embedder)
    imported = [c for c in todo if c.imported_vector is not None]
    for start in range(0, len(imported), _VECTOR_BATCH):
        if should_stop is not None and should_stop():
            return True
        batch = imported[start : start + _VECTOR_BATCH]
        vectors = load_vectors(workspace.engine, [c.row.chunk_id for c in batch])
        dense.upsert([_dense_document(c, vectors[c.row.chunk_id]) for c in batch])
        report.imported_vectors += len(batch)
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
            report.embed_seconds += time.perf_counter() - began
            fresh = {keys[i]: embedded[n] for n, i in enumerate(missing)}
            cache.put_many(embedder.name, fresh)
            cached.update(fresh)
            report.embedded += len(missing)
        report.cache_hits += len(positions) - len(missing)
        dense.upsert([_dense_document(todo[i], cached[keys[i]]) for i in positions])
        if progress is not None:
            progress(done + positions.stop)
    return False


def _dense_document(chunk: _KBChunk, vector: np.ndarray) -> DenseDocument:
    return DenseDocument(
        chunk_id=chunk.row.chunk_id,
        doc_id=chunk.row.doc_id,
        content_hash=chunk.row.content_hash,
        index_hash=chunk.index_hash,
        vector=vector,
    )


def _write(
    path: Any,
    previous: IndexManifest | None,
    workspace: Workspace,
    embedder: Embedder,
    dense: QdrantIndex,
    chunks: dict[str, _KBChunk],
    report: IndexReport,
) -> None:
    content_hashes = {chunk_id: chunk.row.content_hash for chunk_id, chunk in chunks.items()}
    manifest = IndexManifest(
        kb=workspace.settings.kb.name,
        kb_revision=report.kb_revision,
        embedder=embedder.name,
        dim=embedder.dim,
        collection=dense.collection,
        qdrant=dense.where,
        chunk_count=len(chunks),
        content_digest=hash_digest(content_hashes),
        content_hashes=content_hashes,
        imported_vectors=sum(1 for chunk in chunks.values() if chunk.imported_vector is not None),
        last_sync_seconds=round(report.total_seconds, 3),
        last_embed_seconds=round(report.embed_seconds, 3),
        bm25_engine=workspace.settings.index.bm25_engine,
    )
    if previous is not None:
        manifest.created_at = previous.created_at
    write_manifest(path, manifest)


def index_status(workspace: Workspace) -> dict[str, Any]:
    """Manifest vs KB: `state` is `up_to_date`, `stale` or `missing`, with the counts behind it."""
    kb = workspace.settings.kb.name
    with read_session(workspace.engine) as session:
        kb_hashes = dict(
            session.exec(
                select(ChunkRow.chunk_id, ChunkRow.content_hash).where(
                    ChunkRow.status == "published", ChunkRow.kb == kb
                )
            ).all()
        )
        revision = _kb_revision(session, kb)
    configured = embedder_name(workspace.settings.embedder)
    status: dict[str, Any] = {
        "kb": kb,
        "kb_revision": revision,
        "kb_chunks": len(kb_hashes),
        "embedder": configured,
    }
    manifest = read_manifest(locations.manifest_path(workspace.home))
    if manifest is None:
        return {**status, "state": "missing", "indexed_chunks": 0}
    indexed = manifest.content_hashes
    changed = sum(1 for cid, h in kb_hashes.items() if cid in indexed and indexed[cid] != h)
    not_indexed = len(kb_hashes.keys() - indexed.keys())
    extra = len(indexed.keys() - kb_hashes.keys())
    up_to_date = manifest.kb_revision == revision and not (changed or not_indexed or extra)
    return {
        **status,
        "state": "up_to_date" if up_to_date else "stale",
        "index_revision": manifest.kb_revision,
        "indexed_chunks": manifest.chunk_count,
        "changed_chunks": changed,
        "unindexed_chunks": not_indexed,
        "extra_chunks": extra,
        "index_embedder": manifest.embedder,
        "imported_vectors": manifest.imported_vectors,
        "index_dim": manifest.dim,
        "embedder_matches": manifest.embedder == configured,
        "updated_at": manifest.updated_at,
    }
