"""Doctor on a real KB: every kind of broken gold is reported with its case ids and the fix."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.eval.cases import EvalCase
from ragtriage.eval.doctor import best_overlap, run_doctor
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.db import write_session
from ragtriage.store.kb_tables import ChunkRow
from ragtriage.workspace import Workspace

TRAVEL = (
    "---\ndoc_id: travel\ntitle: 差旅报销\n---\n"
    "# 差旅报销\n\n## 时限\n\n出差结束后十五天内提交发票原件和行程单。\n\n## 标准\n\n{standard}\n"
)
DOCS = {
    "leave.md": "---\ndoc_id: leave\ntitle: 请假流程\n---\n"
    "# 请假流程\n\n请假需要提前在系统提交申请，由直属主管审批。\n",
    "rooms.md": "---\ndoc_id: rooms\ntitle: 会议室预订\n---\n"
    "# 会议室预订\n\n会议室可以提前七天在内网预订。\n",
    "draft.md": "---\ndoc_id: draft\ntitle: 新制度草案\nstatus: ready\n---\n"
    "# 新制度草案\n\n远程办公每周最多两天。\n",
}


@pytest.fixture
def workspace(tmp_path: Path, home: Path) -> Iterator[Workspace]:
    from ragtriage.index.kb_sync import add_paths

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    (docs / "travel.md").write_text(
        TRAVEL.format(standard="一线城市住宿每晚不超过五百元。"), encoding="utf-8"
    )
    opened = Workspace.open(home, None)
    add_paths(opened.home, opened.settings, opened.engine, [docs])
    try:
        yield opened
    finally:
        opened.close()


def _chunks(workspace: Workspace, doc_id: str) -> list[str]:
    from ragtriage.kb.service import list_chunks

    return [
        c.chunk_id
        for c in list_chunks(workspace.engine, workspace.settings.kb.name, include_deleted=True)
        if c.doc_id == doc_id
    ]


def test_every_finding_kind_with_case_ids_and_fix(workspace: Workspace, tmp_path: Path) -> None:
    from ragtriage.index.kb_sync import add_paths, remove_documents

    travel_chunks = _chunks(workspace, "travel")
    rooms, draft, leave = (
        _chunks(workspace, "rooms")[0],
        _chunks(workspace, "draft")[0],
        _chunks(workspace, "leave")[0],
    )
    with write_session(workspace.engine) as session:
        session.add(
            ChunkRow(chunk_id="hr#foreign", doc_id="hr", kb="hr-kb", title="x", content="x", content_hash="h")
        )
    eval_store.add_cases(
        workspace.engine,
        "default",
        [
            EvalCase(case_id="doc-as-chunk", query="请假找谁", gold={"leave": 1}),
            EvalCase(case_id="unknown", query="不存在", gold={"nope#123": 1}),
            EvalCase(case_id="foreign", query="别的库", gold={"hr#foreign": 1}),
            EvalCase(case_id="unpublished", query="远程办公", gold={draft: 1}),
            EvalCase(case_id="deleted", query="会议室", gold={rooms: 1}),
            EvalCase(case_id="rechunked", query="住宿标准", gold={travel_chunks[-1]: 1}),
            EvalCase(case_id="dup-a", query="请假 流程", gold={leave: 1}),
            EvalCase(case_id="dup-b", query="请假　流程", gold={leave: 1}),
            EvalCase(case_id="no-gold", query="年终奖", gold={}),
            EvalCase(case_id="fine", query="请假", gold={leave: 1}),
        ],
    )
    remove_documents(workspace.home, workspace.settings, workspace.engine, ["rooms"])
    (tmp_path / "docs" / "rooms.md").unlink()
    (tmp_path / "docs" / "travel.md").write_text(
        TRAVEL.format(standard="一线城市住宿每晚不超过六百元。"), encoding="utf-8"
    )
    add_paths(workspace.home, workspace.settings, workspace.engine, [tmp_path / "docs"])

    report = run_doctor(workspace, "default")
    by_kind = {f.kind: f for f in report.findings}
    assert by_kind["doc_id_as_chunk"].case_ids == ["doc-as-chunk"]
    assert "--granularity doc" in by_kind["doc_id_as_chunk"].fix
    assert by_kind["unknown_gold"].case_ids == ["unknown"]
    assert by_kind["other_kb"].case_ids == ["foreign"]
    assert by_kind["unpublished_gold"].case_ids == ["unpublished"]
    assert by_kind["deleted_gold"].case_ids == ["deleted"]
    rechunked = by_kind["rechunked_gold"].items[0]
    new_standard = [c for c in _chunks(workspace, "travel") if c not in travel_chunks]
    assert rechunked.case_id == "rechunked" and rechunked.proposal in new_standard
    assert rechunked.overlap is not None and rechunked.overlap > 0.8
    assert [(i.case_id, i.proposal) for i in by_kind["duplicate_case"].items] == [("dup-b", "dup-a")]
    assert by_kind["no_gold"].case_ids == ["no-gold"]
    assert all("fine" not in f.case_ids for f in report.findings)
    assert not report.ok

    result = CliRunner().invoke(cli, ["doctor", "--json"])
    assert result.exit_code == 1
    assert '"kind": "rechunked_gold"' in result.output


def test_best_overlap_prefers_the_edited_chunk() -> None:
    old = "出差结束后十五天内提交发票原件和行程单。"
    best, score = best_overlap(
        old, [("a", "会议室可以提前七天预订。"), ("b", "出差结束后十五天内提交发票原件、行程单。")]
    )
    assert best == "b" and score > 0.8


IMPORT_MAP = "chunk_id=id,doc_id=document_id,content=text,title=section_title"
# Production ids: UUID chunks of integer documents.
U_LATE, U_ARCHIVED, U_KEPT, U_OLD_VPN, U_VPN_1, U_VPN_2, U_BORN_ARCHIVED, U_WIFI = (
    f"5d0c3a8e-0000-4000-8000-00000000000{n}" for n in range(1, 9)
)
VPN_TEXT = "VPN 连接失败时先检查客户端版本，再确认账号没有被锁定。"


def _row(chunk_id: str, doc: int, text: str, status: str = "published") -> dict[str, object]:
    return {"id": chunk_id, "document_id": doc, "text": text, "section_title": "s", "status": status}


def _import_rows(path: Path, rows: list[dict[str, object]], *extra: str) -> None:
    import json

    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["kb", "import", str(path), "--map", IMPORT_MAP, "--no-index", "--json", *extra]
    )
    assert result.exit_code == 0, result.output


def test_import_full_tells_deleted_gold_from_rechunked_gold(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "chunks.jsonl"
    _import_rows(
        source,
        [
            _row(U_LATE, 7, "逾期报销需要部门负责人审批。"),
            _row(U_ARCHIVED, 7, "旧的纸质报销单已经停用。"),
            _row(U_KEPT, 7, "出差结束后十五天内提交发票原件。"),
            _row(U_OLD_VPN, 8, VPN_TEXT),
            # Archived before ragtriage ever saw it, in a document that is new here too.
            _row(U_BORN_ARCHIVED, 9, "旧无线网络已经下线。", status="ARCHIVED"),
            _row(U_WIFI, 9, "无线网络名称为 corp，使用域账号登录。"),
        ],
    )
    workspace = Workspace.open(home, None)
    try:
        eval_store.add_cases(
            workspace.engine,
            "default",
            [
                EvalCase(case_id="late", query="逾期报销谁审批", gold={U_LATE: 1}),
                EvalCase(case_id="archived", query="纸质报销单", gold={U_ARCHIVED: 1}),
                EvalCase(case_id="vpn", query="VPN 连不上", gold={U_OLD_VPN: 1}),
                EvalCase(case_id="kept", query="报销时限", gold={U_KEPT: 1}),
                EvalCase(case_id="born-archived", query="旧无线网络", gold={U_BORN_ARCHIVED: 1}),
            ],
        )
    finally:
        workspace.close()
    # Production dropped one chunk of document 7, archived another, and re-chunked document 8.
    _import_rows(
        source,
        [
            _row(U_ARCHIVED, 7, "旧的纸质报销单已经停用。", status="ARCHIVED"),
            _row(U_KEPT, 7, "出差结束后十五天内提交发票原件。"),
            _row(U_VPN_1, 8, VPN_TEXT[:16]),
            _row(U_VPN_2, 8, VPN_TEXT[16:]),
            _row(U_BORN_ARCHIVED, 9, "旧无线网络已经下线。", status="ARCHIVED"),
            _row(U_WIFI, 9, "无线网络名称为 corp，使用域账号登录。"),
        ],
        "--full",
    )

    workspace = Workspace.open(home, None)
    try:
        report = run_doctor(workspace, "default")
    finally:
        workspace.close()
    by_kind = {f.kind: f for f in report.findings}
    # Imported with --no-index: the live gold is also reported as missing from the indexes.
    assert set(by_kind) == {"deleted_gold", "rechunked_gold", "not_indexed"}
    assert [item.case_id for item in by_kind["not_indexed"].items] == ["kept"]
    deleted = {item.case_id: item for item in by_kind["deleted_gold"].items}
    assert set(deleted) == {"late", "archived", "born-archived"}
    assert deleted["late"].gold_id == U_LATE and deleted["late"].proposal is None
    assert "ragtriage kb chunks --doc 7" in (deleted["late"].note or "")
    assert "kb chunks --doc" in by_kind["deleted_gold"].fix and "kb show" in by_kind["deleted_gold"].fix
    (rechunked,) = by_kind["rechunked_gold"].items
    assert (rechunked.case_id, rechunked.proposal) == ("vpn", U_VPN_1)

    result = CliRunner().invoke(cli, ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert "'" not in result.output  # ids as they are, no Python repr
    assert U_LATE in result.output and U_OLD_VPN in result.output


def test_kb_add_of_a_removed_section_is_deleted_gold(workspace: Workspace, tmp_path: Path) -> None:
    from ragtriage.index.kb_sync import add_paths

    standard = _chunks(workspace, "travel")[-1]
    eval_store.add_cases(
        workspace.engine, "default", [EvalCase(case_id="standard", query="住宿标准", gold={standard: 1})]
    )
    (tmp_path / "docs" / "travel.md").write_text(TRAVEL.split("## 标准")[0], encoding="utf-8")
    add_paths(workspace.home, workspace.settings, workspace.engine, [tmp_path / "docs"])

    by_kind = {f.kind: f for f in run_doctor(workspace, "default").findings}
    assert "rechunked_gold" not in by_kind
    assert [(i.case_id, i.gold_id) for i in by_kind["deleted_gold"].items] == [("standard", standard)]
