"""Dense route: chunk vectors in Qdrant, behind one small interface (`DenseIndex`).

Two implementations: `dense_edge.EdgeIndex` (Qdrant Edge, embedded in this process, the default,
in `<home>/index/qdrant_edge`) and `ServerIndex` (a Qdrant server through qdrant-client, with
`[index] qdrant_url`; several processes can share it).

Point ids are uuid5(chunk id) (Qdrant accepts only unsigned ints and UUIDs); the chunk id,
doc id and hashes live in the payload and results are read from the payload's chunk id.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ragtriage.errors import IndexStateError
from ragtriage.index.qdrant_clients import acquire_server, release
from ragtriage.index.types import Embedder, ScoredChunk
from ragtriage.wording import quoted

if TYPE_CHECKING:
    # qdrant-client (~40 MB) is imported when a server index opens: a Qdrant Edge home never loads it.
    from qdrant_client import QdrantClient, models

__all__ = ["DenseDocument", "DenseIndex", "ServerIndex", "point_id", "stored_hashes"]

#: Fixed namespace of the chunk-id → point-id mapping (changing it orphans every stored point).
POINT_NAMESPACE = uuid.UUID("6f1c2a8e-3d4b-5e6f-8a9b-0c1d2e3f4a5b")
_UPSERT_BATCH = 1024  # points per upsert request
_SCROLL_PAGE = 1000


def point_id(chunk_id: str) -> str:
    """The Qdrant point id of a chunk: uuid5 of its chunk id in a fixed namespace."""
    return str(uuid.uuid5(POINT_NAMESPACE, chunk_id))


@dataclass(frozen=True)
class DenseDocument:
    """One chunk's vector and payload."""

    chunk_id: str
    doc_id: str
    content_hash: str
    index_hash: str
    vector: np.ndarray

    def payload(self) -> dict[str, str]:
        """The point payload both embedded backends store (results are read from its chunk id)."""
        return {
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "content_hash": self.content_hash,
            "index_hash": self.index_hash,
        }


def stored_hashes(payload: dict[str, Any] | None) -> tuple[str, tuple[str, str]]:
    """(chunk id, (content hash, index hash)) of a stored point's payload."""
    payload = payload or {}
    return str(payload["chunk_id"]), (
        str(payload.get("content_hash", "")),
        str(payload.get("index_hash", "")),
    )


class DenseIndex(Protocol):
    """A collection of chunk vectors (cosine), tied to the embedder that fills and queries it."""

    kind: str
    where: str
    """The folder or server URL holding it."""
    collection: str
    embedder: Embedder

    def upsert(self, documents: Sequence[DenseDocument]) -> None:
        """Add or replace chunk vectors."""
        ...

    def delete(self, chunk_ids: Sequence[str]) -> None:
        """Remove chunks by id."""
        ...

    def compact(self) -> None:
        """Reclaim the space of deleted and replaced points (a no-op where the backend does it)."""
        ...

    def search_vector(self, vector: np.ndarray, k: int) -> list[ScoredChunk]:
        """Top-k chunks by cosine similarity to `vector` (ranks from 1)."""
        ...

    def search_vectors(self, matrix: np.ndarray, k: int) -> list[list[ScoredChunk]]:
        """Top-k chunks for each row of `matrix`."""
        ...

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        """Embed `query` and search; no flags."""
        ...

    def indexed_hashes(self) -> dict[str, tuple[str, str]]:
        """chunk_id → (content_hash, index_hash) of every stored point."""
        ...

    def content_hash(self, chunk_id: str) -> str | None:
        """The content hash stored with `chunk_id`, or None if it has no point."""
        ...

    def count(self) -> int:
        """Number of stored points."""
        ...

    def close(self) -> None:
        """Release the index."""
        ...


class ServerIndex:
    """A collection of chunk vectors (cosine) on a Qdrant server, tied to the embedder that fills and queries it."""

    kind = "dense"

    def __init__(
        self, client: QdrantClient, registry_key: str, where: str, collection: str, embedder: Embedder
    ):
        self._client = client
        self._registry_key = registry_key
        self._closed = False
        self.where = where
        self.collection = collection
        self.embedder = embedder

    @classmethod
    def open(
        cls,
        embedder: Embedder,
        *,
        url: str,
        api_key: str | None = None,
        collection: str = "ragtriage_chunks",
        recreate: bool = False,
        timeout_s: float = 30.0,
    ) -> ServerIndex:
        """Open the collection on the server at `url`; create it or check its dimension.

        Raises:
            IndexStateError: the collection's vectors have another dimension than the embedder's
                (both numbers are named).
        """
        client = acquire_server(url, api_key, timeout_s)
        index = cls(client, f"url:{url}", url, collection, embedder)
        try:
            index._prepare_collection(recreate)
        except BaseException:
            index.close()
            raise
        return index

    def _prepare_collection(self, recreate: bool) -> None:
        exists = self._client.collection_exists(self.collection)
        if exists and recreate:
            self._client.delete_collection(self.collection)
            exists = False
        if not exists:
            from qdrant_client import models

            self._client.create_collection(
                self.collection,
                vectors_config=models.VectorParams(size=self.embedder.dim, distance=models.Distance.COSINE),
            )
            return
        stored_dim = self.collection_dim()
        if stored_dim != self.embedder.dim:
            raise IndexStateError(
                f"Qdrant collection {quoted(self.collection)} at {self.where} holds {stored_dim}-dim vectors but "
                f"embedder {self.embedder.name} makes {self.embedder.dim}-dim vectors; rebuild the indexes "
                "with `ragtriage kb reindex` or configure the embedder they were built with"
            )

    def collection_dim(self) -> int | None:
        """The vector size the collection was created with."""
        params = self._client.get_collection(self.collection).config.params.vectors
        size = getattr(params, "size", None)
        return int(size) if size is not None else None

    # ------------------------------------------------------------ writing

    def upsert(self, documents: Sequence[DenseDocument]) -> None:
        """Add or replace chunk vectors."""
        self._upsert(documents)

    def compact(self) -> None:
        """Nothing to do: the server's optimizer reclaims space on its own."""

    def _upsert(self, documents: Sequence[DenseDocument]) -> None:
        from qdrant_client import models

        for start in range(0, len(documents), _UPSERT_BATCH):
            batch = documents[start : start + _UPSERT_BATCH]
            for doc in batch:
                self._check_dim(doc.vector)
            self._client.upsert(
                self.collection,
                points=[
                    models.PointStruct(
                        id=point_id(doc.chunk_id),
                        vector=np.asarray(doc.vector, dtype=np.float32).tolist(),
                        payload=doc.payload(),
                    )
                    for doc in batch
                ],
                wait=True,
            )

    def delete(self, chunk_ids: Sequence[str]) -> None:
        """Remove chunks by id."""
        from qdrant_client import models

        ids: list[models.ExtendedPointId] = [point_id(chunk_id) for chunk_id in chunk_ids]
        for start in range(0, len(ids), _UPSERT_BATCH):
            self._client.delete(
                self.collection,
                points_selector=models.PointIdsList(points=ids[start : start + _UPSERT_BATCH]),
            )

    # ------------------------------------------------------------ reading

    def _check_dim(self, vector: np.ndarray) -> None:
        if vector.shape[-1] != self.embedder.dim:
            raise IndexStateError(
                f"a {vector.shape[-1]}-dim vector was given to collection {quoted(self.collection)}, "
                f"which holds {self.embedder.dim}-dim vectors"
            )

    def _hits(self, points: Sequence[models.ScoredPoint]) -> list[ScoredChunk]:
        return [
            ScoredChunk(chunk_id=str((point.payload or {})["chunk_id"]), rank=rank, score=float(point.score))
            for rank, point in enumerate(points, start=1)
        ]

    def search_vector(self, vector: np.ndarray, k: int) -> list[ScoredChunk]:
        """Top-k chunks by cosine similarity to `vector` (ranks from 1)."""
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        self._check_dim(vector)
        response = self._client.query_points(
            self.collection, query=vector.tolist(), limit=k, with_payload=["chunk_id"]
        )
        return self._hits(response.points)

    def search_vectors(self, matrix: np.ndarray, k: int) -> list[list[ScoredChunk]]:
        """Top-k chunks for each row of `matrix`, in one batch request."""
        matrix = np.atleast_2d(np.asarray(matrix, dtype=np.float32))
        if matrix.shape[0] == 0:
            return []
        self._check_dim(matrix)
        from qdrant_client import models

        responses = self._client.query_batch_points(
            self.collection,
            requests=[
                models.QueryRequest(query=row.tolist(), limit=k, with_payload=["chunk_id"]) for row in matrix
            ],
        )
        return [self._hits(response.points) for response in responses]

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        """Embed `query` with the index's embedder and search; no flags are raised by this route."""
        return self.search_vector(self.embedder.embed_queries([query])[0], k), []

    def indexed_hashes(self) -> dict[str, tuple[str, str]]:
        """chunk_id → (content_hash, index_hash) of every stored point."""
        found: dict[str, tuple[str, str]] = {}
        offset = None
        while True:
            points, offset = self._client.scroll(
                self.collection, limit=_SCROLL_PAGE, offset=offset, with_payload=True, with_vectors=False
            )
            found.update(stored_hashes(point.payload) for point in points)
            if offset is None:
                return found

    def content_hash(self, chunk_id: str) -> str | None:
        """The content hash stored with `chunk_id`, or None if it has no point."""
        points = self._client.retrieve(self.collection, ids=[point_id(chunk_id)], with_payload=True)
        if not points:
            return None
        return str((points[0].payload or {}).get("content_hash", ""))

    def count(self) -> int:
        """Number of stored points."""
        return int(self._client.count(self.collection, exact=True).count)

    def close(self) -> None:
        """Release this index's share of the client (the last user closes it and its folder lock)."""
        if not self._closed:
            self._closed = True
            release(self._registry_key)

    def __repr__(self) -> str:
        return (
            f"ServerIndex(where={self.where!r}, collection={self.collection!r},"
            f" embedder={self.embedder.name!r})"
        )
