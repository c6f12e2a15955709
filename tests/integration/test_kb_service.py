"""KB service on a real SQLite store: stable re-adds, versioned edits, deletions, bad files, indexing."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from ragtriage.errors import InputError, NotFoundError
from ragtriage.index import kb_sync
from ragtriage.kb import service
from ragtriage.store.db import read_session
from ragtriage.store.kb_tables import ChunkRow, DocumentRow
from ragtriage.workspace import Workspace
from tests.conftest import SHARED_DIR, TEST_DATA_DIR

INVOICE = """---
title: 发票
product_line: 财务
version: v2.3
updated_at: 2024-05-01
---
# 发票

## 红字发票

开具红字发票前须先申请红字信息表。信息表审核通过后才能开票。

## 电子发票

电子发票与纸质发票具有同等法律效力。
"""

REFUND = "# 退款\n\n## 到账时间\n\n退款在七个工作日内到账。\n\n## 失败处理\n\n退款失败时请联系客服。\n"
TERMS = "服务条款\n\n本条款适用于全部用户。\n"


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "kb"
    (folder / "billing").mkdir(parents=True)
    (folder / "billing" / "invoice.md").write_text(INVOICE, encoding="utf-8")
    (folder / "refund.md").write_text(REFUND, encoding="utf-8")
    (folder / "terms.txt").write_text(TERMS, encoding="utf-8")
    (folder / ".hidden.md").write_text("# 隐藏\n\n不该被读。\n", encoding="utf-8")
    (folder / "image.png").write_bytes(b"\x89PNG\x00\x00")
    return folder


def _rows(workspace: Workspace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every document and chunk row as plain data (to compare before/after)."""
    with read_session(workspace.engine) as session:
        docs = [r.model_dump() for r in session.exec(select(DocumentRow).order_by(DocumentRow.doc_id))]
        chunks = [r.model_dump() for r in session.exec(select(ChunkRow).order_by(ChunkRow.chunk_id))]
    return docs, chunks


def test_add_folder_derives_doc_ids_and_counts_add_up(workspace: Workspace, kb_dir: Path) -> None:
    progress: list[tuple[int, int]] = []
    report = service.add_paths(
        workspace.engine, workspace.settings, [kb_dir], on_progress=lambda d, t: progress.append((d, t))
    )

    assert (report.files_seen, report.added, report.changed, report.unchanged, report.failed) == (
        3,
        3,
        0,
        0,
        [],
    )
    assert report.adds_up
    assert sorted(report.added_doc_ids) == ["kb/billing/invoice", "kb/refund", "kb/terms"]
    assert progress == [(1, 3), (2, 3), (3, 3)]
    assert report.kb_revision == 3
    chunks = service.list_chunks(workspace.engine, workspace.settings.kb.name)
    assert {c.doc_id for c in chunks} == {"kb/billing/invoice", "kb/refund", "kb/terms"}
    assert all(c.content == "" for c in chunks)
    invoice = service.list_chunks(
        workspace.engine, workspace.settings.kb.name, "kb/billing/invoice", include_content=True
    )
    assert [(c.title, c.anchor, c.ordinal) for c in invoice] == [
        ("红字发票", "红字发票", 0),
        ("电子发票", "电子发票", 1),
    ]
    assert invoice[0].heading_path == ["发票", "红字发票"]
    assert invoice[0].content == "开具红字发票前须先申请红字信息表。信息表审核通过后才能开票。"
    assert (invoice[0].product_line, invoice[0].doc_version) == ("财务", "v2.3")
    assert invoice[0].updated_at == "2024-05-01T00:00:00+00:00"
    assert invoice[0].source_path == str(kb_dir / "billing" / "invoice.md")


def test_re_adding_unchanged_documents_changes_nothing(workspace: Workspace, kb_dir: Path) -> None:
    service.add_paths(workspace.engine, workspace.settings, [kb_dir])
    before = _rows(workspace)
    revision = service.kb_stats(workspace.engine, workspace.settings.kb.name).revision
    (kb_dir / "refund.md").touch()  # a newer mtime alone is not a change

    report = service.add_paths(workspace.engine, workspace.settings, [kb_dir])

    assert (report.added, report.changed, report.unchanged, report.deleted) == (0, 0, 3, 0)
    assert _rows(workspace) == before
    assert service.kb_stats(workspace.engine, workspace.settings.kb.name).revision == revision


def test_editing_one_section_bumps_the_version_and_changes_only_that_documents_chunks(
    workspace: Workspace, kb_dir: Path
) -> None:
    service.add_paths(workspace.engine, workspace.settings, [kb_dir])
    docs_before, chunks_before = _rows(workspace)
    old_refund = {
        c.anchor: c.chunk_id
        for c in service.list_chunks(workspace.engine, workspace.settings.kb.name, "kb/refund")
    }
    (kb_dir / "refund.md").write_text(REFUND.replace("七个工作日", "三个工作日"), encoding="utf-8")

    report = service.add_paths(workspace.engine, workspace.settings, [kb_dir])

    assert (report.changed, report.unchanged, report.changed_doc_ids) == (1, 2, ["kb/refund"])
    docs_after, chunks_after = _rows(workspace)
    assert [d for d in docs_after if d["doc_id"] != "kb/refund"] == [
        d for d in docs_before if d["doc_id"] != "kb/refund"
    ]
    assert [c for c in chunks_after if c["doc_id"] != "kb/refund"] == [
        c for c in chunks_before if c["doc_id"] != "kb/refund"
    ]
    assert next(d for d in docs_after if d["doc_id"] == "kb/refund")["version"] == 2
    new_refund = {
        c.anchor: c
        for c in service.list_chunks(
            workspace.engine, workspace.settings.kb.name, "kb/refund", include_content=True
        )
    }
    assert new_refund["失败处理"].chunk_id == old_refund["失败处理"]  # untouched section keeps its id
    assert new_refund["失败处理"].version == 2
    assert new_refund["到账时间"].chunk_id != old_refund["到账时间"]
    assert "三个工作日" in new_refund["到账时间"].content
    old_chunk = service.get_chunks(workspace.engine, [old_refund["到账时间"]])[old_refund["到账时间"]]
    assert old_chunk.status == "deleted"
    assert service.kb_stats(workspace.engine, workspace.settings.kb.name).revision == 4


def test_a_file_gone_from_the_folder_is_marked_deleted_with_its_chunks(
    workspace: Workspace, kb_dir: Path
) -> None:
    service.add_paths(workspace.engine, workspace.settings, [kb_dir])
    refund_ids = [
        c.chunk_id for c in service.list_chunks(workspace.engine, workspace.settings.kb.name, "kb/refund")
    ]
    (kb_dir / "refund.md").unlink()

    report = service.add_paths(workspace.engine, workspace.settings, [kb_dir])

    assert (report.files_seen, report.unchanged, report.deleted, report.deleted_doc_ids) == (
        2,
        2,
        1,
        ["kb/refund"],
    )
    assert "kb/refund" not in {
        c.doc_id for c in service.list_chunks(workspace.engine, workspace.settings.kb.name)
    }
    assert service.list_chunks(workspace.engine, workspace.settings.kb.name, "kb/refund") == []
    deleted = service.list_chunks(
        workspace.engine, workspace.settings.kb.name, "kb/refund", include_deleted=True
    )
    assert [c.chunk_id for c in deleted] == refund_ids and {c.status for c in deleted} == {"deleted"}
    stats = service.kb_stats(workspace.engine, workspace.settings.kb.name)
    assert stats.documents == {"published": 2, "deleted": 1}
    assert stats.retrievable_chunks == stats.chunks["published"] and stats.chunks["deleted"] == len(
        refund_ids
    )

    (kb_dir / "refund.md").write_text(REFUND, encoding="utf-8")
    again = service.add_paths(workspace.engine, workspace.settings, [kb_dir])
    assert again.added_doc_ids == ["kb/refund"]
    assert [
        c.chunk_id for c in service.list_chunks(workspace.engine, workspace.settings.kb.name, "kb/refund")
    ] == refund_ids


def test_adding_a_single_file_never_deletes_the_folder_documents(workspace: Workspace, kb_dir: Path) -> None:
    service.add_paths(workspace.engine, workspace.settings, [kb_dir])
    extra = kb_dir.parent / "faq.md"
    extra.write_text("# 常见问题\n\n问答。\n", encoding="utf-8")

    report = service.add_paths(workspace.engine, workspace.settings, [extra])

    assert (report.added_doc_ids, report.deleted) == (["faq"], 0)
    assert service.kb_stats(workspace.engine, workspace.settings.kb.name).documents == {"published": 4}


def test_remove_documents_marks_deleted_and_rejects_unknown_ids(workspace: Workspace, kb_dir: Path) -> None:
    service.add_paths(workspace.engine, workspace.settings, [kb_dir])
    revision = service.kb_stats(workspace.engine, workspace.settings.kb.name).revision

    with pytest.raises(NotFoundError, match="nope"):
        service.remove_documents(workspace.engine, workspace.settings.kb.name, ["kb/terms", "nope"])
    assert service.kb_stats(workspace.engine, workspace.settings.kb.name).revision == revision

    report = service.remove_documents(workspace.engine, workspace.settings.kb.name, ["kb/terms"])
    assert (report.removed, report.chunks_deleted, report.kb_revision) == (["kb/terms"], 1, revision + 1)
    assert "kb/terms" not in {
        c.doc_id for c in service.list_chunks(workspace.engine, workspace.settings.kb.name)
    }
    again = service.remove_documents(workspace.engine, workspace.settings.kb.name, ["kb/terms"])
    assert (again.removed, again.already_deleted, again.kb_revision) == ([], ["kb/terms"], revision + 1)


def test_ready_documents_are_stored_but_not_published(workspace: Workspace, tmp_path: Path) -> None:
    draft = tmp_path / "draft.md"
    draft.write_text("---\ndoc_id: drafts/new\nstatus: ready\n---\n# 草稿\n\n尚未发布。\n", encoding="utf-8")

    service.add_paths(workspace.engine, workspace.settings, [draft])

    [chunk] = service.list_chunks(workspace.engine, workspace.settings.kb.name)
    assert (chunk.doc_id, chunk.status) == ("drafts/new", "ready")
    assert service.kb_stats(workspace.engine, workspace.settings.kb.name).retrievable_chunks == 0


def test_bad_files_are_reported_and_the_rest_is_added(workspace: Workspace, tmp_path: Path) -> None:
    folder = tmp_path / "bad"
    shutil.copytree(TEST_DATA_DIR / "kb_bad", folder)

    report = service.add_paths(workspace.engine, workspace.settings, [folder])

    assert report.adds_up
    assert sorted(report.added_doc_ids) == ["bad/no_headings", "billing/invoice"]
    failed = {Path(f.path).name: f for f in report.failed}
    assert sorted(failed) == ["binary.txt", "broken_front_matter.md", "empty.md", "undecodable.txt"]
    assert failed["broken_front_matter.md"].line == 4
    assert all(f.fix for f in report.failed)
    assert [(Path(w.path).name, "no h1–h6 headings" in w.message) for w in report.warnings] == [
        ("no_headings.html", True)
    ]


def test_a_file_that_breaks_later_keeps_its_stored_version(workspace: Workspace, kb_dir: Path) -> None:
    service.add_paths(workspace.engine, workspace.settings, [kb_dir])
    before = [
        c.chunk_id for c in service.list_chunks(workspace.engine, workspace.settings.kb.name, "kb/refund")
    ]
    (kb_dir / "refund.md").write_text("---\ntitle: [broken\n---\n# 退款\n", encoding="utf-8")

    report = service.add_paths(workspace.engine, workspace.settings, [kb_dir])

    assert [Path(f.path).name for f in report.failed] == ["refund.md"]
    assert report.deleted == 0
    assert [
        c.chunk_id for c in service.list_chunks(workspace.engine, workspace.settings.kb.name, "kb/refund")
    ] == before


def test_two_files_claiming_one_doc_id_fail_the_second(workspace: Workspace, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\ndoc_id: same\n---\n# A\n\n甲。\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("---\ndoc_id: same\n---\n# B\n\n乙。\n", encoding="utf-8")

    report = service.add_paths(workspace.engine, workspace.settings, [tmp_path])

    assert (report.added, len(report.failed)) == (1, 1)
    assert "doc_id 'same' is also used by" in report.failed[0].reason


def test_missing_path_is_an_input_error_before_anything_is_stored(
    workspace: Workspace, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match="no such file or folder"):
        service.add_paths(workspace.engine, workspace.settings, [tmp_path / "nope"])
    assert service.kb_stats(workspace.engine, workspace.settings.kb.name).revision == 0


def test_neighbours_and_get_chunks(workspace: Workspace, tmp_path: Path) -> None:
    doc = tmp_path / "steps.md"
    doc.write_text("# 步骤\n\n## 一\n\n甲。\n\n## 二\n\n乙。\n\n## 三\n\n丙。\n", encoding="utf-8")
    service.add_paths(workspace.engine, workspace.settings, [doc])
    first, second, third = service.list_chunks(workspace.engine, workspace.settings.kb.name, "steps")

    assert [c.chunk_id for c in service.neighbours(workspace.engine, second.chunk_id)] == [
        first.chunk_id,
        third.chunk_id,
    ]
    assert [c.chunk_id for c in service.neighbours(workspace.engine, first.chunk_id)] == [second.chunk_id]
    found = service.get_chunks(workspace.engine, [third.chunk_id, "missing#x"])
    assert list(found) == [third.chunk_id] and found[third.chunk_id].content == "丙。"
    with pytest.raises(NotFoundError):
        service.neighbours(workspace.engine, "missing#x")


def test_add_paths_calls_the_indexer_with_the_home_settings_and_store(
    workspace: Workspace, kb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragtriage.index import indexer

    calls: list[tuple[object, ...]] = []

    def fake_sync(*args: object) -> indexer.IndexReport:
        calls.append(args)
        return indexer.IndexReport(added=4, chunk_count=4)

    monkeypatch.setattr(kb_sync, "sync_indexes", fake_sync)
    report = kb_sync.add_paths(workspace.home, workspace.settings, workspace.engine, [kb_dir])

    assert calls and calls[0][:3] == (workspace.home, workspace.settings, workspace.engine)
    assert report.index is not None and report.index["chunk_count"] == 4
    assert report.index_skipped is None


def test_add_paths_builds_real_indexes_that_match_the_kb(workspace: Workspace, tmp_path: Path) -> None:
    from ragtriage.index.index_state import index_status

    doc = tmp_path / "one.md"
    doc.write_text("# 发票\n\n## 红字发票\n\n红字发票需要信息表。\n", encoding="utf-8")

    report = kb_sync.add_paths(workspace.home, workspace.settings, workspace.engine, [doc])

    assert report.index is not None and report.index["chunk_count"] == 1
    status = index_status(workspace.home, workspace.settings, workspace.engine)
    assert (status["state"], status["kb_chunks"], status["kb_revision"]) == ("up_to_date", 1, 1)


FAQ_DEB = SHARED_DIR / "data" / "debian-docs-zh" / "debian-faq-zh-cn_11.1_all.deb"


@pytest.mark.skipif(not FAQ_DEB.exists(), reason="Debian FAQ package not available")
def test_real_debian_faq_chapter_keeps_question_anchors(workspace: Workspace, tmp_path: Path) -> None:
    from tests.integration.test_extract_debian_docs import extractor

    member = "./usr/share/doc/debian/FAQ/zh-cn/basic-defs.zh-cn.html"
    with extractor.data_tar(FAQ_DEB) as archive:
        extracted = archive.extractfile(member)
        assert extracted is not None
        (tmp_path / "basic-defs.zh-cn.html").write_bytes(extracted.read())

    report = service.add_paths(workspace.engine, workspace.settings, [tmp_path / "basic-defs.zh-cn.html"])

    assert report.added_doc_ids == ["basic-defs.zh-cn"] and report.warnings == []
    chunks = service.list_chunks(workspace.engine, workspace.settings.kb.name, include_content=True)
    anchors = list(dict.fromkeys(c.anchor for c in chunks))
    assert anchors == [
        "whatisfaq",
        "whatisdebian",
        "linux",
        "non-linux",
        "difference",
        "gnu",
        "pronunciation",
    ]
    assert chunks[0].title == "1.1. 本 FAQ 文档是什么？"
    assert chunks[0].heading_path == ["第 1 章 定义和概览", "1.1. 本 FAQ 文档是什么？"]
    assert all(len(c.content) <= workspace.settings.kb.max_chars for c in chunks)
    assert not any("上一页" in c.content or "起始页" in c.content for c in chunks)


def test_re_adding_one_file_of_a_folder_alone_is_unchanged_and_stays_tracked(
    workspace: Workspace, kb_dir: Path
) -> None:
    service.add_paths(workspace.engine, workspace.settings, [kb_dir])
    revision = service.kb_stats(workspace.engine, workspace.settings.kb.name).revision

    alone = service.add_paths(workspace.engine, workspace.settings, [kb_dir / "terms.txt"])
    (kb_dir / "terms.txt").unlink()
    walk = service.add_paths(workspace.engine, workspace.settings, [kb_dir])

    assert (alone.unchanged, service.kb_stats(workspace.engine, workspace.settings.kb.name).revision) == (
        1,
        revision + 1,
    )
    assert walk.deleted_doc_ids == ["kb/terms"]
