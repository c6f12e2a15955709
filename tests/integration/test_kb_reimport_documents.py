"""A re-import that moves chunks to other documents (first without `--map doc_id=…`, then with it)
removes the documents it leaves with no chunk, in the import's transaction, and says how many; the
indexes keep every chunk. `doctor` reports the live documents without a chunk that older imports
left behind, with their ids and how to remove them. Real SQLite home, real indexes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from sqlmodel import select

from ragtriage import locations
from ragtriage.cli import cli
from ragtriage.eval.cases import EvalCase
from ragtriage.eval.doctor import run_doctor
from ragtriage.index.manifest import read_manifest
from ragtriage.kb.service import kb_stats, list_chunks
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.db import write_session
from ragtriage.store.kb_tables import ChunkRow
from ragtriage.workspace import Workspace

DOCS = 16
PER_DOC = 3
WITHOUT_DOC = "chunk_id=id,content=text,title=section_title"
WITH_DOC = WITHOUT_DOC + ",doc_id=document_id"


def _rows() -> list[dict[str, Any]]:
    topics = ["报销", "请假", "VPN", "会议室", "打印机", "门禁", "邮箱", "工资条"]
    return [
        {
            "id": f"c-{doc}-{part}",
            "document_id": 1000 + doc,
            "text": f"{topics[doc % len(topics)]}第{doc}篇第{part}段：请先在内网提交申请，编号 {doc * 10 + part}。",
            "section_title": f"{topics[doc % len(topics)]} {part}",
        }
        for doc in range(DOCS)
        for part in range(PER_DOC)
    ]


def _import(path: Path, mapping: str, *extra: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["kb", "import", str(path), "--map", mapping, "--json", *extra])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_mapping_doc_id_on_a_reimport_leaves_no_empty_documents(home: Path, tmp_path: Path) -> None:
    source = _write(tmp_path / "chunks.jsonl", _rows())
    first = _import(source, WITHOUT_DOC)
    workspace = Workspace.open(home, None)
    try:
        assert kb_stats(workspace.engine, "default").documents == {"published": DOCS * PER_DOC}
    finally:
        workspace.close()

    again = _import(source, WITH_DOC)
    assert again["documents_removed"] == DOCS * PER_DOC and again["changed"] == DOCS * PER_DOC
    workspace = Workspace.open(home, None)
    try:
        assert kb_stats(workspace.engine, "default").documents == {"published": DOCS}
        chunks = list_chunks(workspace.engine, "default")
        assert len(chunks) == DOCS * PER_DOC and all(
            c.doc_id == str(1000 + int(c.chunk_id.split("-")[1])) for c in chunks
        )
        manifest = read_manifest(locations.manifest_path(home))
        assert manifest is not None and set(manifest.content_hashes) == {c.chunk_id for c in chunks}
        assert manifest.kb_revision == again["kb_revision"] > first["kb_revision"]
    finally:
        workspace.close()

    # Half of one document moves to a document of its own: the document it left keeps its other chunks.
    rows = _rows()
    rows[0]["document_id"] = 9999
    moved = _import(_write(tmp_path / "moved.jsonl", rows), WITH_DOC, "--no-index")
    assert moved["documents_removed"] == 0
    workspace = Workspace.open(home, None)
    try:
        assert kb_stats(workspace.engine, "default").documents == {"published": DOCS + 1}
    finally:
        workspace.close()

    shown = CliRunner().invoke(cli, ["kb", "import", str(source), "--map", WITH_DOC, "--no-index"])
    assert shown.exit_code == 0 and "documents removed: 1, left with no chunk" in shown.output


def test_doctor_reports_the_empty_documents_an_older_import_left(home: Path, tmp_path: Path) -> None:
    source = _write(tmp_path / "chunks.jsonl", _rows()[:6])
    _import(source, WITHOUT_DOC, "--no-index")
    workspace = Workspace.open(home, None)
    try:
        # What a re-import before this version left: chunks under new documents, the old ones empty.
        with write_session(workspace.engine) as session:
            for row in session.exec(select(ChunkRow)).all():
                row.doc_id = f"doc-{row.chunk_id.split('-')[1]}"
                session.add(row)
        eval_store.add_cases(
            workspace.engine, "default", [EvalCase(case_id="q1", query="报销怎么办", gold={"c-0-0": 1})]
        )
        report = run_doctor(workspace, "default")
    finally:
        workspace.close()
    [finding] = [f for f in report.findings if f.kind == "empty_documents"]
    assert finding.severity == "warning" and finding.ids == [f"c-{d}-{p}" for d in range(2) for p in range(3)]
    assert "6 live documents of KB default have no chunk" in finding.summary
    assert "ragtriage kb remove" in finding.fix

    result = CliRunner().invoke(cli, ["doctor"], env={"COLUMNS": "200"})
    assert "empty_documents" in result.output and "ids: c-0-0 c-0-1 c-0-2 c-1-0" in result.output
    removed = CliRunner().invoke(cli, ["kb", "remove", *finding.ids, "--no-index"])
    assert removed.exit_code == 0, removed.output
    workspace = Workspace.open(home, None)
    try:
        assert "empty_documents" not in {f.kind for f in run_doctor(workspace, "default").findings}
    finally:
        workspace.close()
