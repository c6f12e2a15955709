"""`kb import` with vectors writes the dense index in a forked process (`dense_worker`) during the SQL
pass and the BM25 build: the indexes must equal those of a sequential sync, and a failing worker
must fail the import without leaving points on disk that the KB does not hold. Every test runs on
both embedded dense backends (Qdrant local mode and Qdrant Edge)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qdrant_client import QdrantClient

from ragtriage import locations
from ragtriage.errors import IndexStateError, InputError
from ragtriage.index import dense_worker
from ragtriage.index.dense import QdrantIndex
from ragtriage.index.dense_edge import EdgeIndex
from ragtriage.index.indexer import index_status, open_indexes, sync_indexes
from ragtriage.kb.import_report import ImportReport
from ragtriage.kb.importer import ImportSpec, run_import
from ragtriage.workspace import Workspace

MAP = {"chunk_id": "id", "doc_id": "document_id", "content": "text", "title": "section_title"}
TEXTS = [
    ("报销", "出差结束后十五天内提交发票原件。"),
    ("报销", "超过期限需要部门负责人审批。"),
    ("报销", "电子发票需要打印并签字。"),
    ("网络", "VPN 连接失败时先检查客户端版本。"),
    ("网络", "无线网络密码每季度更换一次。"),
    ("请假", "请假需要提前在系统提交申请。"),
    ("请假", "病假需要附医院证明。"),
    ("会议", "会议室可以提前七天预订。"),
]
VOLATILE = {"created_at", "updated_at", "last_sync_seconds", "last_embed_seconds"}
COLLECTION = "ragtriage_chunks"


@pytest.fixture(params=["qdrant_local", "qdrant_edge"])
def backend(request: pytest.FixtureRequest) -> str:
    """`[index] dense_backend` of every home the test makes."""
    return str(request.param)


def _rows(seed: int = 3) -> list[dict[str, Any]]:
    """Chunks with UUID ids, integer document ids and random unit 384-d vectors (nothing to embed)."""
    rng = np.random.default_rng(seed)
    rows = []
    for n, (title, text) in enumerate(TEXTS):
        vector = rng.normal(size=384)
        rows.append(
            {
                "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://kb.example/chunk/{n}")),
                "document_id": 100 + n // 3,
                "section_title": title,
                "text": text,
                "status": "PUBLISHED",
                "embedding": (vector / np.linalg.norm(vector)).tolist(),
            }
        )
    return rows


def _second_version(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One text changed, one vector changed, one row deleted by status, one dropped, one added."""
    edited = [dict(row) for row in rows]
    edited[0]["text"] = "出差结束后三十天内提交发票原件。"
    edited[3]["embedding"] = list(reversed(edited[3]["embedding"]))
    edited[5]["status"] = "DELETED"
    del edited[7]
    edited.append({**rows[6], "id": str(uuid.uuid4()), "text": "年假可以分两次休。"})
    return edited


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def _home(root: Path, name: str, backend: str) -> Path:
    home = root / name
    home.mkdir()
    # Batches of two rows: the worker is fed several batches during the pass.
    config = f'[kb.import]\nbatch_size = 2\n[index]\ndense_backend = "{backend}"\n'
    (home / "config.toml").write_text(config, encoding="utf-8")
    return home


def _dense_folder(home: Path) -> Path:
    """The folder of the home's dense index (local mode's, or the edge shard's), as resolved for
    `[index] dense_backend` (explicit, or `auto`: the manifest's backend, else Edge)."""
    from ragtriage.config.loading import load_settings
    from ragtriage.index.manifest import effective_dense_backend, read_manifest

    config = home / "config.toml"
    settings = load_settings(config if config.exists() else None, environ={})
    backend = effective_dense_backend(settings.index, read_manifest(locations.manifest_path(home)))
    if backend == "qdrant_edge":
        return locations.qdrant_edge_dir(home) / COLLECTION
    return locations.qdrant_dir(home)


def _import(home: Path, path: Path, *, index: bool = True, full: bool = False) -> ImportReport:
    workspace = Workspace.open(home)
    try:
        spec = ImportSpec(path=path, map=MAP, vector_field="embedding")
        return run_import(workspace, spec, index=index, full=full)
    finally:
        workspace.close()


def _sync(home: Path) -> None:
    workspace = Workspace.open(home)
    try:
        sync_indexes(workspace)
    finally:
        workspace.close()


def _state(home: Path) -> str:
    workspace = Workspace.open(home)
    try:
        return str(index_status(workspace)["state"])
    finally:
        workspace.close()


def _dense_points(home: Path) -> dict[str, tuple[dict[str, Any], list[float]]]:
    """Every point on disk: id → (payload, vector), read by a fresh client as a later process would."""
    folder = _dense_folder(home)
    if folder.parent.name == "qdrant_edge":
        return _edge_points(folder)
    if not folder.exists():
        return {}
    client = QdrantClient(path=str(folder))
    try:
        if not client.collection_exists(COLLECTION):
            return {}
        points, _ = client.scroll(COLLECTION, limit=1000, with_payload=True, with_vectors=True)
        return {str(p.id): (dict(p.payload or {}), list(p.vector)) for p in points}  # type: ignore[arg-type]
    finally:
        client.close()


def _edge_points(folder: Path) -> dict[str, tuple[dict[str, Any], list[float]]]:
    import qdrant_edge

    if not (folder / "edge_config.json").exists():
        return {}
    shard = qdrant_edge.EdgeShard.load(str(folder))
    try:
        records, _ = shard.scroll(qdrant_edge.ScrollRequest(limit=1000, with_payload=True, with_vector=True))
        return {str(r.id): (dict(r.payload or {}), list(r.vector)) for r in records}  # type: ignore[arg-type]
    finally:
        shard.close()


def _indexes(home: Path) -> dict[str, Any]:
    """BM25 hashes, a BM25 search, the dense points and the manifest (minus times) of `home`."""
    workspace = Workspace.open(home)
    try:
        indexes = open_indexes(workspace)
        try:
            bm25 = indexes.bm25.indexed_hashes()
            hits = indexes.bm25.search("发票 审批", 10)[0]
        finally:
            indexes.close()
    finally:
        workspace.close()
    manifest = json.loads(locations.manifest_path(home).read_text(encoding="utf-8"))
    assert manifest.pop("qdrant") == str(_dense_folder(home))  # the one field naming the home
    return {
        "bm25": bm25,
        "bm25_hits": [(hit.chunk_id, round(hit.score, 6)) for hit in hits],
        "dense": _dense_points(home),
        "manifest": {key: value for key, value in manifest.items() if key not in VOLATILE},
    }


def test_overlapped_import_builds_the_indexes_a_sequential_sync_builds(tmp_path: Path, backend: str) -> None:
    overlapped, sequential = _home(tmp_path, "overlapped", backend), _home(tmp_path, "sequential", backend)
    export = tmp_path / "chunks.jsonl"

    for version in (_rows(), _second_version(_rows())):
        _write(export, version)
        report = _import(overlapped, export, full=True)
        _import(sequential, export, index=False, full=True)
        _sync(sequential)

        assert report.index is not None and report.index["embedded"] == 0
        assert report.index["imported_vectors"] > 0 and report.adds_up
        got, expected = _indexes(overlapped), _indexes(sequential)
        assert len(got["dense"]) == sum(row["status"] == "PUBLISHED" for row in version)
        assert got == expected
    assert report.index["deleted"] == 2 and report.missing == 1
    assert _state(overlapped) == "up_to_date"


def test_a_bad_row_after_streamed_batches_leaves_the_kb_and_the_dense_index_as_they_were(
    tmp_path: Path, backend: str
) -> None:
    home = _home(tmp_path, "home", backend)
    export = _write(tmp_path / "chunks.jsonl", _rows())
    _import(home, export)
    before = _indexes(home)
    edited = [{**row, "text": f"新版：{row['text']}"} for row in _rows()]
    edited[-1]["embedding"] = [0.0] * 384  # found last, after three batches went to the worker

    with pytest.raises(InputError, match="chunks.jsonl:8: .*all zeros"):
        _import(home, _write(export, edited))

    assert _indexes(home) == before


def _fail_sync(*args: Any, **kwargs: Any) -> Any:
    raise IndexStateError("dense sync failed on purpose (test)")


def test_a_worker_failing_after_the_commit_fails_the_import_and_the_next_import_repairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    home = _home(tmp_path, "home", backend)
    export = _write(tmp_path / "chunks.jsonl", _rows())
    with monkeypatch.context() as patch:
        patch.setattr(dense_worker, "sync_dense", _fail_sync)  # the forked worker inherits it
        # A first import leaves the worker nothing to do: make it do the sync.
        patch.setattr(dense_worker._Streamed, "nothing_left", lambda *args: False)

        with pytest.raises(IndexStateError, match="dense sync failed on purpose"):
            _import(home, export)

    assert _dense_points(home) != {}  # the streamed points were committed with the KB
    assert not locations.manifest_path(home).exists()  # but the sync did not finish: stale
    again = _import(home, export)
    assert again.unchanged == len(_rows()) and again.index is not None
    assert len(_dense_points(home)) == len(_rows())
    assert _state(home) == "up_to_date"


def test_a_worker_failing_while_points_stream_rolls_its_points_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    home = _home(tmp_path, "home", backend)
    export = _write(tmp_path / "chunks.jsonl", _rows())
    calls: list[int] = []
    index_class: Any = EdgeIndex if backend == "qdrant_edge" else QdrantIndex
    original = index_class.upsert

    def upsert_then_fail(self: Any, documents: Any) -> None:
        calls.append(len(documents))
        if len(calls) == 2:  # the second streamed batch, after the first was applied
            raise RuntimeError("Qdrant failed on purpose (test)")
        original(self, documents)

    with monkeypatch.context() as patch:
        patch.setattr(index_class, "upsert", upsert_then_fail)

        with pytest.raises(RuntimeError, match="Qdrant failed on purpose"):
            _import(home, export)

    assert _dense_points(home) == {}  # the first batch was rolled back with the second
    assert not locations.manifest_path(home).exists()
    _import(home, export)
    assert len(_dense_points(home)) == len(_rows())
    assert _state(home) == "up_to_date"


def test_a_process_holding_the_dense_index_imports_without_a_worker(tmp_path: Path, backend: str) -> None:
    """The service and the TUI keep the dense index open: a worker could not open it, so the
    dense index is written here, after the BM25 build, through the client this process holds."""
    home = _home(tmp_path, "home", backend)
    export = _write(tmp_path / "chunks.jsonl", _rows())
    workspace = Workspace.open(home)
    try:
        held = open_indexes(workspace)
        try:
            report = run_import(workspace, ImportSpec(path=export, map=MAP, vector_field="embedding"))
            assert held.dense.count() == len(_rows())
        finally:
            held.close()
    finally:
        workspace.close()

    assert report.index is not None and report.index["dense_wait_seconds"] == 0.0
    assert report.index["imported_vectors"] == len(_rows()) and _state(home) == "up_to_date"


def test_an_unchanged_import_after_a_dense_backend_change_fills_the_new_index(
    tmp_path: Path, backend: str
) -> None:
    """The manifest names the backend: an import of the same file after the switch is not skipped
    as up to date, and the new backend gets every point with the imported vectors (nothing embedded)."""
    home = _home(tmp_path, "home", backend)
    export = _write(tmp_path / "chunks.jsonl", _rows())
    _import(home, export)
    before = _dense_points(home)
    other = "qdrant_local" if backend == "qdrant_edge" else "qdrant_edge"
    config = home / "config.toml"
    config.write_text(config.read_text(encoding="utf-8").replace(backend, other), encoding="utf-8")
    assert _state(home) == "stale"

    again = _import(home, export)

    assert again.unchanged == len(_rows()) and again.index is not None
    assert again.index["embedded"] == 0 and again.index["imported_vectors"] == len(_rows())
    after = _dense_points(home)
    assert {pid: payload for pid, (payload, _) in after.items()} == {
        pid: payload for pid, (payload, _) in before.items()
    }
    for pid, (_, vector) in after.items():
        assert vector == pytest.approx(before[pid][1], abs=1e-6)
    assert _state(home) == "up_to_date"


def test_the_worker_reopens_the_index_only_when_the_sync_has_work() -> None:
    """After the commit the worker has closed the index; it reopens it to delete, write or compact."""
    streamed = {"a": "h1", "b": "h2"}

    def nothing_left(before: dict[str, str], wanted: dict[str, str]) -> bool:
        points = dense_worker._Streamed(before)
        points.add(list(streamed), list(streamed.values()))
        return points.nothing_left(wanted)

    assert nothing_left({}, dict(streamed))  # a first import
    assert not nothing_left({}, {"a": "h1"})  # b is to delete
    assert not nothing_left({}, {**streamed, "c": "h3"})  # c is to write
    assert not nothing_left({}, {"a": "h1", "b": "h9"})  # b has changed
    assert not nothing_left({"a": "h0"}, dict(streamed))  # a was replaced
    assert nothing_left({"a": "h1"}, dict(streamed))
    assert nothing_left({"c": "h3"}, {**streamed, "c": "h3"})  # c was there and stays
    assert not nothing_left({"c": "h3"}, dict(streamed))  # c is to delete
    assert not nothing_left({"c": "h3"}, {**streamed, "c": "h4"})  # c has changed
    assert not nothing_left({"c": "h3"}, {"a": "h1", "c": "h3", "d": "h2"})  # same size, d is new


def _children() -> set[str]:
    found: set[str] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            found.update((task / "children").read_text().split())
        except OSError:
            pass
    return found


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts child processes in /proc (Linux)")
def test_the_workers_are_forked_before_the_pass_reads_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process forked from the grown pass kept the old copy of every page the pass rewrote after
    the fork (55 MB more at 30k chunks): the dense process and the segmenters exist before the first
    row is read, and they do their work as before."""
    from ragtriage.kb.import_files import FileSource

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[kb.import]\nbatch_size = 2\n[index]\nbm25_engine = "bm25s"\nbm25_procs = 2\n', encoding="utf-8"
    )
    export = _write(tmp_path / "chunks.jsonl", _rows())
    before = _children()
    at_first_batch: list[set[str]] = []
    original = FileSource.batches

    def batches(self: FileSource, on_progress: Any = None) -> Any:
        for batch in original(self, on_progress):
            at_first_batch.append(_children() - before)
            yield batch

    monkeypatch.setattr(FileSource, "batches", batches)
    report = _import(home, export)

    segmenters = min(2, os.cpu_count() or 1)
    assert len(at_first_batch[0]) == 1 + (segmenters if segmenters > 1 else 0)
    assert report.index is not None and report.index["imported_vectors"] == len(_rows())
    assert report.index["embedded"] == 0 and _state(home) == "up_to_date"
    assert not _children() - before  # none is left
