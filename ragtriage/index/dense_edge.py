"""The embedded dense index: Qdrant Edge (`qdrant-edge-py`), Qdrant's Rust engine in this process.

It implements `dense.DenseIndex` with the point ids (`dense.point_id`) and payload (chunk id, doc
id, content hash, index hash) a Qdrant server holds too (`dense.ServerIndex`).

The shard of collection C lives in `<home>/index/qdrant_edge/C`. Its write-ahead log is locked
by the engine (a second open fails with `WouldBlock`); one shard per folder is shared per process
(`qdrant_clients`) and a pid file beside the folder names the holder, so a second process gets an
`IndexLockedError` saying which process to stop.

Search is exact (brute force, `SearchParams(exact=True)`), and the shard is created with HNSW
indexing off (indexing threshold 0).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as edge

from ragtriage.errors import IndexStateError
from ragtriage.index.dense import DenseDocument, point_id, stored_hashes
from ragtriage.index.qdrant_clients import acquire_folder, locked_error, release
from ragtriage.index.types import Embedder, ScoredChunk
from ragtriage.wording import quoted

__all__ = ["EdgeIndex"]

_BATCH = 1024  # points per update operation
_SCROLL_PAGE = 5000
_EXACT = edge.SearchParams(exact=True)
_CHUNK_ID_ONLY = ["chunk_id"]


class _Shard:
    """The open shard of one folder, shared by every `EdgeIndex` on it in this process (a
    recreate replaces `shard` for all of them)."""

    def __init__(self, folder: Path, shard: edge.EdgeShard) -> None:
        self.folder = folder
        self.shard = shard

    def close(self) -> None:
        self.shard.flush()
        self.shard.close()


def _config(dim: int) -> edge.EdgeConfig:
    return edge.EdgeConfig(
        vectors=edge.EdgeVectorParams(size=dim, distance=edge.Distance.Cosine),
        optimizers=edge.EdgeOptimizersConfig(indexing_threshold=0),
    )


def _open_shard(folder: Path, dim: int, recreate: bool) -> _Shard:
    """Load or create the shard; recreate empties it.

    Raises:
        IndexLockedError: another client holds the folder.
        IndexStateError: the shard cannot be loaded (names the folder and `kb reindex`).
    """
    if (folder / "edge_config.json").exists():
        try:
            shard = edge.EdgeShard.load(str(folder))
        except Exception as error:  # noqa: BLE001 (the engine raises plain Exception)
            if "WouldBlock" in str(error):
                raise locked_error(folder) from None
            if not recreate:
                raise IndexStateError(
                    f"{folder}: cannot open the Qdrant Edge shard ({str(error).splitlines()[0]}); "
                    "run `ragtriage kb reindex` to rebuild it"
                ) from None
        else:
            if not recreate:
                return _Shard(folder, shard)
            shard.close()
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    return _Shard(folder, edge.EdgeShard.create(str(folder), _config(dim)))


class EdgeIndex:
    """A Qdrant Edge shard of chunk vectors (cosine), tied to the embedder that fills and queries it."""

    kind = "dense"

    def __init__(self, holder: _Shard, collection: str, embedder: Embedder) -> None:
        self._holder = holder
        self._closed = False
        self.where = str(holder.folder)
        self.collection = collection
        self.embedder = embedder

    @classmethod
    def open(
        cls, embedder: Embedder, *, path: Path, collection: str = "ragtriage_chunks", recreate: bool = False
    ) -> EdgeIndex:
        """Open (or create) the shard of `collection` under `path`; recreate empties it.

        Raises:
            IndexLockedError: another process (or a foreign client here) holds the shard.
            IndexStateError: the shard holds vectors of another dimension than the embedder's
                (both numbers are named), or cannot be loaded.
        """
        folder = path / collection
        opened: list[_Shard] = []

        def open_here() -> _Shard:
            opened.append(_open_shard(folder, embedder.dim, recreate))
            return opened[0]

        holder = acquire_folder(folder, open_here, _Shard.close)
        index = cls(holder, collection, embedder)
        try:
            if recreate and not opened:
                holder.shard.close()  # opened earlier in this process: recreate it under every user
                holder.shard = _open_shard(folder, embedder.dim, recreate=True).shard
            stored_dim = index.collection_dim()
            if stored_dim is not None and stored_dim != embedder.dim:
                raise IndexStateError(
                    f"Qdrant Edge shard {quoted(collection)} at {folder} holds {stored_dim}-dim vectors "
                    f"but embedder {embedder.name} makes {embedder.dim}-dim vectors; rebuild the indexes "
                    "with `ragtriage kb reindex` or configure the embedder they were built with"
                )
        except BaseException:
            index.close()
            raise
        return index

    @property
    def _shard(self) -> edge.EdgeShard:
        return self._holder.shard

    def collection_dim(self) -> int | None:
        """The vector size the shard was created with (from its `edge_config.json`; None if unreadable)."""
        try:
            config = json.loads((self._holder.folder / "edge_config.json").read_text(encoding="utf-8"))
            return int(config["vectors"][""]["size"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # ------------------------------------------------------------ writing

    def upsert(self, documents: Sequence[DenseDocument]) -> None:
        """Add or replace chunk vectors (each batch applied as it comes; a sync repairs a partial call).

        Raises:
            IndexStateError: a vector has another dimension than the shard's.
        """
        for start in range(0, len(documents), _BATCH):
            batch = documents[start : start + _BATCH]
            points = []
            for doc in batch:
                self._check_dim(doc.vector)
                vector = np.asarray(doc.vector, dtype=np.float32).reshape(-1).tolist()
                points.append(edge.Point(point_id(doc.chunk_id), vector, doc.payload()))
            self._shard.update(edge.UpdateOperation.upsert_points(points))

    def delete(self, chunk_ids: Sequence[str]) -> None:
        """Remove chunks by id."""
        ids = [point_id(chunk_id) for chunk_id in chunk_ids]
        for start in range(0, len(ids), _BATCH):
            batch: list[Any] = ids[start : start + _BATCH]
            self._shard.update(edge.UpdateOperation.delete_points(batch))

    def compact(self) -> None:
        """Run the shard's optimizer (vacuum of deleted and replaced points) and flush.

        Edge has no background optimizer: without this the shard's segments keep every deleted
        point.
        """
        self._shard.optimize()
        self._shard.flush()

    # ------------------------------------------------------------ reading

    def _check_dim(self, vector: np.ndarray) -> None:
        if vector.shape[-1] != self.embedder.dim:
            raise IndexStateError(
                f"a {vector.shape[-1]}-dim vector was given to collection {quoted(self.collection)}, "
                f"which holds {self.embedder.dim}-dim vectors"
            )

    @staticmethod
    def _hits(points: Sequence[edge.ScoredPoint]) -> list[ScoredChunk]:
        return [
            ScoredChunk(chunk_id=str((point.payload or {})["chunk_id"]), rank=rank, score=float(point.score))
            for rank, point in enumerate(points, start=1)
        ]

    def _request(self, vector: np.ndarray, k: int) -> edge.QueryRequest:
        return edge.QueryRequest(
            query=edge.Query.Nearest(vector.tolist()), limit=k, with_payload=_CHUNK_ID_ONLY, params=_EXACT
        )

    def search_vector(self, vector: np.ndarray, k: int) -> list[ScoredChunk]:
        """Top-k chunks by cosine similarity to `vector` (shape (dim,); ranks from 1)."""
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        self._check_dim(vector)
        return self._hits(self._shard.query(self._request(vector, k)))

    def search_vectors(self, matrix: np.ndarray, k: int) -> list[list[ScoredChunk]]:
        """Top-k chunks for each row of `matrix` (shape (n, dim)), planned as one batch."""
        matrix = np.atleast_2d(np.asarray(matrix, dtype=np.float32))
        if matrix.shape[0] == 0:
            return []
        self._check_dim(matrix)
        batch = edge.QueryBatchRequest([self._request(row, k) for row in matrix])
        return [self._hits(points) for points in self._shard.query_batch(batch)]

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        """Embed `query` with the index's embedder and search; no flags are raised by this route."""
        return self.search_vector(self.embedder.embed_queries([query])[0], k), []

    def indexed_hashes(self) -> dict[str, tuple[str, str]]:
        """chunk_id → (content_hash, index_hash) of every stored point."""
        found: dict[str, tuple[str, str]] = {}
        offset: Any = None
        while True:
            records, offset = self._shard.scroll(
                edge.ScrollRequest(offset=offset, limit=_SCROLL_PAGE, with_payload=True, with_vector=False)
            )
            found.update(stored_hashes(record.payload) for record in records)
            if offset is None:
                return found

    def content_hash(self, chunk_id: str) -> str | None:
        """The content hash stored with `chunk_id`, or None if it has no point."""
        records = self._shard.retrieve([point_id(chunk_id)], with_payload=True, with_vector=False)
        if not records:
            return None
        return str((records[0].payload or {}).get("content_hash", ""))

    def count(self) -> int:
        """Number of stored points."""
        return int(self._shard.count(edge.CountRequest(exact=True)))

    def close(self) -> None:
        """Release this index's share of the shard (the last user flushes and closes it)."""
        if not self._closed:
            self._closed = True
            release(str(self._holder.folder.resolve()))

    def __repr__(self) -> str:
        return f"EdgeIndex(where={self.where!r}, collection={self.collection!r}, embedder={self.embedder.name!r})"
