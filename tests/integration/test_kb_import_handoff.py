"""`kb import` hands its index sync what the pass computed (hashes; with bm25s, term ids segmented
during the pass) instead of loading the KB back: the indexes must equal those a sync from scratch
builds, for both BM25 engines, with `kb add` documents in the same KB, and with indexes that were
stale before the import."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragtriage import locations
from ragtriage.index import published
from ragtriage.index.indexer import index_status, open_indexes, rebuild_indexes, sync_indexes
from ragtriage.kb.import_report import ImportReport
from ragtriage.kb.importer import ImportSpec, run_import
from ragtriage.kb.service import add_paths
from ragtriage.workspace import Workspace
from tests.integration.test_kb_import_overlap import MAP, _dense_points, _rows, _second_version, _write
from tests.tiny_kb import write_markdown_docs

QUERIES = ["发票 审批", "请假 申请", "VPN 客户端", "会议室 预订", "年假", "报销"]
VOLATILE = {"created_at", "updated_at", "last_sync_seconds", "last_embed_seconds", "qdrant"}


@contextlib.contextmanager
def _workspace(home: Path) -> Iterator[Workspace]:
    workspace = Workspace.open(home)
    try:
        yield workspace
    finally:
        workspace.close()


def _home(root: Path, name: str, engine: str) -> Path:
    home = root / name
    home.mkdir()
    # Batches of two rows, and segmenting processes from the third text on: the pass feeds both
    # the dense worker and the segmenters several batches.
    (home / "config.toml").write_text(
        "[kb.import]\nbatch_size = 2\n"
        f'[index]\nbm25_engine = "{engine}"\nbm25_procs = 2\nbm25_multiproc_min_docs = 3\n',
        encoding="utf-8",
    )
    return home


def _import(home: Path, path: Path, *, index: bool = True, full: bool = True) -> ImportReport:
    with _workspace(home) as workspace:
        spec = ImportSpec(path=path, map=MAP, vector_field="embedding")
        return run_import(workspace, spec, index=index, full=full)


def _add_docs(home: Path, folder: Path, *, index: bool = True) -> None:
    with _workspace(home) as workspace:
        add_paths(workspace, [folder], index=index)


def _sync(home: Path, *, rebuild: bool = False) -> None:
    with _workspace(home) as workspace:
        (rebuild_indexes if rebuild else sync_indexes)(workspace)


def _snapshot(home: Path) -> dict[str, Any]:
    """What both indexes hold and answer: BM25 hashes and hits with scores, dense points, manifest."""
    with _workspace(home) as workspace:
        indexes = open_indexes(workspace)
        try:
            hashes = indexes.bm25.indexed_hashes()
            hits = {
                query: [(hit.chunk_id, round(hit.score, 5)) for hit in indexes.bm25.search(query, 20)[0]]
                for query in QUERIES
            }
        finally:
            indexes.close()
        state = index_status(workspace)["state"]
    manifest = json.loads(locations.manifest_path(home).read_text(encoding="utf-8"))
    return {
        "bm25": hashes,
        "hits": hits,
        "dense": _dense_points(home),
        "manifest": {key: value for key, value in manifest.items() if key not in VOLATILE},
        "state": state,
    }


@pytest.mark.parametrize("engine", ["whoosh", "bm25s"])
def test_imports_build_the_indexes_a_sync_from_the_store_builds(tmp_path: Path, engine: str) -> None:
    docs = write_markdown_docs(tmp_path / "docs")
    imported, scratch = _home(tmp_path, "imported", engine), _home(tmp_path, "scratch", engine)
    export = tmp_path / "chunks.jsonl"
    _add_docs(imported, docs)
    _add_docs(scratch, docs)
    second = _second_version(_rows())
    # A first import, a second with every kind of change, and the same file again (nothing to do).
    for version in (_rows(), second, second):
        _write(export, version)
        report = _import(imported, export)
        _import(scratch, export, index=False)
        _sync(scratch)  # loads every published chunk from SQL, as without the import's handoff

        assert report.adds_up and (report.index is None or report.index["embedded"] == 0)
        got, expected = _snapshot(imported), _snapshot(scratch)
        assert got == expected
        assert got["state"] == "up_to_date" and len(got["bm25"]) == len(got["dense"])
        assert any(chunk_id.startswith("travel") for chunk_id in got["bm25"])  # the kb add chunks stay
    assert report.index is None and report.unchanged == len(second) - 1  # one row is deleted
    if engine == "bm25s":
        # bm25s scores do not depend on the order of updates: a rebuild from scratch gives the same
        # scores (ties may list chunks in another order).
        _sync(scratch, rebuild=True)
        rebuilt = _snapshot(scratch)
        assert rebuilt["bm25"] == got["bm25"]
        assert {q: sorted(hits) for q, hits in rebuilt["hits"].items()} == {
            q: sorted(hits) for q, hits in got["hits"].items()
        }


@pytest.mark.parametrize("engine", ["whoosh", "bm25s"])
def test_an_import_into_stale_indexes_indexes_the_chunks_it_did_not_write(
    tmp_path: Path, engine: str
) -> None:
    """Chunks stored with --no-index are in no index: the next import's sync must find and index
    them (the indexes do not hold the KB as that import found it, so their hashes are not trusted)."""
    imported, scratch = _home(tmp_path, "imported", engine), _home(tmp_path, "scratch", engine)
    first = _write(tmp_path / "first.jsonl", _rows())
    others = [
        {**row, "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://kb.example/other/{n}")), "document_id": 7}
        for n, row in enumerate(_rows(seed=5))
    ]
    stored_only = _write(tmp_path / "others.jsonl", others)
    for home in (imported, scratch):
        _import(home, first, full=False)
        _import(home, stored_only, index=False, full=False)
    _write(first, _second_version(_rows()))

    report = _import(imported, first, full=False)
    _import(scratch, first, index=False, full=False)
    _sync(scratch)

    assert report.index is not None and report.index["added"] >= len(others)
    got = _snapshot(imported)
    # One row of the second version is deleted, one is new, and one (not in it) stays: 8 + 8.
    assert got == _snapshot(scratch) and len(got["bm25"]) == len(got["dense"]) == 2 * len(_rows())


def test_a_bm25s_re_import_loads_no_chunk_text_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The written chunks come from the pass (term ids included), the others' hashes from the index."""
    home = _home(tmp_path, "home", "bm25s")
    export = _write(tmp_path / "chunks.jsonl", _rows())
    _add_docs(home, write_markdown_docs(tmp_path / "docs"))
    loaded: list[list[str]] = []
    original = published.load_chunks

    def recording(workspace: Workspace, only: Any = None) -> Any:
        loaded.append(list(only) if only is not None else ["<every chunk>"])
        return original(workspace, only)

    monkeypatch.setattr(published, "load_chunks", recording)
    first = _import(home, export)
    again = _import(home, _write(export, _second_version(_rows())))

    assert first.index is not None and first.index["added"] == len(_rows())
    assert again.index is not None and again.changed >= 2 and again.added == 1
    assert loaded == []
