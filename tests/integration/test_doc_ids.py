"""Document ids of `kb add`: folder-prefixed, collision-free, and stable for homes stored the old way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.kb import service
from ragtriage.kb.chunking import ChunkingParams
from ragtriage.kb.loaders import load_document
from ragtriage.store.kb_repo import store_document
from ragtriage.workspace import Workspace
from tests.conftest import SHARED_DIR

DEBS_DIR = SHARED_DIR / "data" / "debian-docs-zh"
INDEX_PAGE = "<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{body}</p></body></html>"


def _write(folder: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def two_folders(tmp_path: Path) -> tuple[Path, Path]:
    """faq/ and ref/ both holding index.zh-cn.html (as the Debian FAQ and Reference do)."""
    faq = _write(
        tmp_path / "faq",
        {
            "index.zh-cn.html": INDEX_PAGE.format(title="常见问题", body="本 FAQ 回答常见问题。"),
            "basics/what.md": "# 什么是 Debian\n\nDebian 是一个自由的操作系统。\n",
        },
    )
    ref = _write(
        tmp_path / "ref",
        {"index.zh-cn.html": INDEX_PAGE.format(title="参考手册", body="本手册介绍系统管理。")},
    )
    return faq, ref


def _add_the_old_way(workspace: Workspace, folder: Path) -> None:
    """Store `folder` as `kb add` did before ids had a folder prefix: id = bare relative path."""
    root = folder.resolve()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        store_document(
            workspace.engine,
            load_document(path),
            doc_id=path.relative_to(root).with_suffix("").as_posix(),
            kb=workspace.settings.kb.name,
            status="published",
            updated_at=service._updated_at(None, path),  # noqa: SLF001 (the same file-time rule)
            params=ChunkingParams.from_settings(workspace.settings.kb),
            source_root=str(root),
        )


def _chunk_ids(workspace: Workspace) -> dict[str, list[str]]:
    ids: dict[str, list[str]] = {}
    for chunk in service.list_chunks(workspace.engine, workspace.settings.kb.name, include_deleted=True):
        ids.setdefault(chunk.doc_id, []).append(chunk.chunk_id)
    return ids


def test_two_folders_with_the_same_file_name_get_prefixed_ids(
    workspace: Workspace, two_folders: tuple[Path, Path]
) -> None:
    report = service.add_paths(workspace.engine, workspace.settings, list(two_folders))

    assert report.failed == [] and report.adds_up
    assert sorted(report.added_doc_ids) == ["faq/basics/what", "faq/index.zh-cn", "ref/index.zh-cn"]
    titles = {
        c.doc_id: c.heading_path[0] for c in service.list_chunks(workspace.engine, workspace.settings.kb.name)
    }
    assert titles["faq/index.zh-cn"] == "常见问题" and titles["ref/index.zh-cn"] == "参考手册"
    assert all(
        c.chunk_id.startswith(f"{c.doc_id}#")
        for c in service.list_chunks(workspace.engine, workspace.settings.kb.name)
    )


def test_a_home_stored_with_bare_ids_keeps_them_on_the_next_add(
    workspace: Workspace, two_folders: tuple[Path, Path]
) -> None:
    faq, _ = two_folders
    _add_the_old_way(workspace, faq)
    before = _chunk_ids(workspace)
    revision = service.kb_stats(workspace.engine, workspace.settings.kb.name).revision
    assert sorted(before) == ["basics/what", "index.zh-cn"]

    report = service.add_paths(workspace.engine, workspace.settings, [faq])

    assert (report.added, report.changed, report.unchanged, report.deleted) == (0, 0, 2, 0)
    assert _chunk_ids(workspace) == before, "gold chunk ids of existing eval sets must survive"
    assert service.kb_stats(workspace.engine, workspace.settings.kb.name).revision == revision

    (faq / "basics" / "what.md").write_text("# 什么是 Debian\n\nDebian 是自由软件。\n", encoding="utf-8")
    (faq / "new.md").write_text("# 新页\n\n新内容。\n", encoding="utf-8")
    edited = service.add_paths(workspace.engine, workspace.settings, [faq])
    assert (edited.changed_doc_ids, edited.added_doc_ids, edited.deleted) == (["basics/what"], ["faq/new"], 0)


def test_a_bare_id_home_can_now_add_the_colliding_folder(
    workspace: Workspace, two_folders: tuple[Path, Path]
) -> None:
    faq, ref = two_folders
    _add_the_old_way(workspace, faq)

    report = service.add_paths(workspace.engine, workspace.settings, [faq, ref])

    assert (report.unchanged, report.added_doc_ids, report.failed) == (2, ["ref/index.zh-cn"], [])
    assert service.kb_stats(workspace.engine, workspace.settings.kb.name).documents == {"published": 3}


def test_a_moved_bare_id_folder_keeps_its_ids(workspace: Workspace, two_folders: tuple[Path, Path]) -> None:
    faq, _ = two_folders
    _add_the_old_way(workspace, faq)
    before = _chunk_ids(workspace)
    moved = faq.parent / "elsewhere" / "faq"
    moved.parent.mkdir()
    faq.rename(moved)

    report = service.add_paths(workspace.engine, workspace.settings, [moved])

    assert (report.added, report.changed, report.deleted, report.failed) == (0, 2, 0, [])
    assert _chunk_ids(workspace) == before
    assert {c.source_path for c in service.list_chunks(workspace.engine, workspace.settings.kb.name)} == {
        str(moved / "index.zh-cn.html"),
        str(moved / "basics" / "what.md"),
    }


def test_a_bare_id_of_another_folder_that_still_exists_is_not_taken(
    workspace: Workspace, tmp_path: Path
) -> None:
    one = _write(tmp_path / "a" / "docs", {"guide.md": "# 指南\n\n甲。\n"})
    two = _write(tmp_path / "b" / "docs", {"guide.md": "# 指南\n\n乙。\n"})
    _add_the_old_way(workspace, one)

    report = service.add_paths(workspace.engine, workspace.settings, [two])

    assert report.added_doc_ids == ["docs/guide"]
    assert sorted(_chunk_ids(workspace)) == ["docs/guide", "guide"]


def test_re_adding_one_nested_file_keeps_its_folder_id(
    workspace: Workspace, two_folders: tuple[Path, Path]
) -> None:
    faq, _ = two_folders
    service.add_paths(workspace.engine, workspace.settings, [faq])

    alone = service.add_paths(workspace.engine, workspace.settings, [faq / "basics" / "what.md"])

    assert (alone.unchanged, alone.added_doc_ids) == (1, [])
    assert sorted(_chunk_ids(workspace)) == ["faq/basics/what", "faq/index.zh-cn"]


@pytest.mark.realdata
@pytest.mark.skipif(
    not any(DEBS_DIR.glob("debian-reference-zh-cn_*.deb"))
    or not any(DEBS_DIR.glob("debian-faq-zh-cn_*.deb")),
    reason=f"Debian doc packages not found in {DEBS_DIR} (apt-get download debian-faq-zh-cn debian-reference-zh-cn)",
)
def test_kb_add_of_the_debian_faq_and_reference_together_succeeds(tmp_path: Path) -> None:
    from ragtriage_demo.debian_docs import extract

    report = extract(DEBS_DIR, tmp_path / "debian")
    faq, reference = Path(report["faq"]["dir"]), Path(report["reference"]["dir"])
    assert "index.zh-cn.html" in report["faq"]["files"] and "index.zh-cn.html" in report["reference"]["files"]

    result = CliRunner().invoke(cli, ["kb", "add", str(faq), str(reference), "--no-index", "--json"])

    assert result.exit_code == 0, result.output
    added = json.loads(result.stdout)
    html_files = len(report["faq"]["files"]) + len(report["reference"]["files"])
    assert (added["files_seen"], added["added"], added["failed"]) == (html_files, html_files, [])
    assert {"faq/index.zh-cn", "reference/index.zh-cn"} <= set(added["added_doc_ids"])
