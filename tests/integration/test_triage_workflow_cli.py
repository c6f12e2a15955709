"""`label`, `confirm`, `dismiss`, `note`, `assign` through `ragtriage.cli.main` on a real SQLite store
(a small KB added without indexes, a few logged requests ingested)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from ragtriage.cli import main
from ragtriage.kb.service import add_paths, list_chunks
from ragtriage.logs.ingest import ingest_files
from ragtriage.store import triage_repo
from ragtriage.workspace import Workspace
from tests.conftest import FIXTURES_DIR

DOCS = ["errors/e1001.md", "leave/comp-time.md"]


@pytest.fixture
def gold_ids(tmp_path: Path, home: Path) -> list[str]:
    """Two fixture documents in the store (no indexes: the workflow needs only SQL) and three requests."""
    kb = tmp_path / "kb"
    for relative in DOCS:
        (kb / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES_DIR / "kb" / relative, kb / relative)
    lines = [
        {
            "request_id": "r1",
            "ts": "2026-11-02T08:00:00Z",
            "raw_query": "补休能攒多久",
            "feedback": {"rating": "down"},
        },
        {"request_id": "r2", "ts": "2026-11-02T09:00:00Z", "raw_query": "会议室怎么订", "citations": []},
        {
            "request_id": "r3",
            "ts": "2026-11-02T10:00:00Z",
            "raw_query": "E1001",
            "feedback": {"rating": "up"},
        },
    ]
    log = tmp_path / "requests.jsonl"
    log.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    workspace = Workspace.open(home)
    try:
        add_paths(workspace, [kb], index=False)
        ingest_files(workspace.engine, [log])
        return [c.chunk_id for c in list_chunks(workspace, "leave/comp-time")][:2]
    finally:
        workspace.close()


def run(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """Run the console entry point; (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["ragtriage", *args])
    try:
        main()
        code = 0
    except SystemExit as stop:
        code = int(stop.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _record(home: Path, request_id: str) -> triage_repo.TriageRecord:
    workspace = Workspace.open(home)
    try:
        return triage_repo.get_record(workspace.engine, request_id)
    finally:
        workspace.close()


def test_label_gold_confirm_walks_the_statuses_with_an_audit_trail(
    home: Path, gold_ids: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _record(home, "r1").status == "new"
    code, out, _ = run(["label", "r1", "alias_missing", "--user", "ann"], monkeypatch, capsys)
    assert code == 0 and "r1: in_progress; primary alias_missing" in out
    code, out, _ = run(["label", "r1", "bm25_miss", "--user", "ann"], monkeypatch, capsys)
    assert code == 0 and "primary alias_missing (also bm25_miss)" in out

    code, _, err = run(["confirm", "r1", "--user", "ann"], monkeypatch, capsys)
    assert code == 2 and "has no gold chunk ids" in err and "--gold CHUNK_ID" in err

    code, out, _ = run(
        [
            "label",
            "r1",
            "bm25_miss",
            "--primary",
            "--gold",
            gold_ids[0],
            "--note",
            "补休 = 调休",
            "--user",
            "bo",
        ],
        monkeypatch,
        capsys,
    )
    assert code == 0 and "primary bm25_miss (also alias_missing)" in out and gold_ids[0] in out
    code, out, _ = run(["confirm", "r1", "--user", "bo", "--json"], monkeypatch, capsys)
    record = json.loads(out)
    assert code == 0 and record["status"] == "confirmed" and record["primary_label"] == "bm25_miss"
    assert record["notes"][0]["text"] == "补休 = 调休" and record["notes"][0]["user"] == "bo"

    workspace = Workspace.open(home)
    try:
        audit = triage_repo.audit_log(workspace.engine, "r1")
    finally:
        workspace.close()
    assert [(e.user, e.action) for e in audit] == [
        ("ann", "labels"),
        ("ann", "status"),
        ("ann", "labels"),
        ("bo", "labels"),
        ("bo", "gold"),
        ("bo", "note"),
        ("bo", "status"),
    ]
    assert audit[-1].change == {"before": "in_progress", "after": "confirmed"}

    code, _, err = run(["dismiss", "r1"], monkeypatch, capsys)
    assert code == 2 and "is confirmed; it cannot become dismissed" in err and "--reopen" in err
    code, _, err = run(["label", "r1", "rerank_error"], monkeypatch, capsys)
    assert code == 2 and "add --reopen" in err
    code, out, _ = run(["label", "r1", "rerank_error", "--reopen"], monkeypatch, capsys)
    assert code == 0 and "r1: in_progress" in out


def test_labels_and_gold_are_validated(
    gold_ids: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["label", "r1", "alias_mising"], monkeypatch, capsys)
    assert code == 2 and "unknown label 'alias_mising'; did you mean 'alias_missing'?" in err
    code, _, err = run(["label", "r1", "alias_missing", "--gold", "nope#1"], monkeypatch, capsys)
    assert code == 2 and "gold chunk id not in the KB: nope#1" in err
    code, _, err = run(["label", "nope", "alias_missing"], monkeypatch, capsys)
    assert code == 2 and "'nope'" in err
    code, _, err = run(["confirm", "r2"], monkeypatch, capsys)
    assert code == 2 and "is new; it cannot become confirmed: label it first" in err


def test_configured_label_set_is_used(
    home: Path, gold_ids: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "config.toml").write_text(
        '[triage]\nlabels = ["ocr_error", "no_answer_in_kb"]\n', encoding="utf-8"
    )
    code, _, err = run(["label", "r1", "alias_missing"], monkeypatch, capsys)
    assert code == 2 and "use one of ocr_error, no_answer_in_kb" in err
    code, out, _ = run(["label", "r2", "no_answer_in_kb", "--primary"], monkeypatch, capsys)
    assert code == 0
    code, out, _ = run(["confirm", "r2"], monkeypatch, capsys)
    assert code == 0 and "r2: confirmed" in out


def test_dismiss_note_assign_and_unflagged_requests(
    home: Path, gold_ids: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["dismiss", "r2", "--reason", "not a retrieval question"], monkeypatch, capsys)
    assert code == 0 and "r2: dismissed" in out
    assert _record(home, "r2").notes[0].text == "dismissed: not a retrieval question"
    # r3 was never flagged: a note opens a triage record for it.
    code, out, _ = run(["note", "r3", "看起来没问题", "--user", "cy"], monkeypatch, capsys)
    assert code == 0 and "r3: new" in out
    assert _record(home, "r3").reasons == ["manual"]
    code, out, _ = run(["assign", "r3", "dee"], monkeypatch, capsys)
    assert code == 0 and "assigned to dee" in out
    code, out, _ = run(["assign", "r3", "-"], monkeypatch, capsys)
    assert code == 0 and _record(home, "r3").assignee is None


def test_a_concurrent_edit_is_refused_naming_who_changed_what(
    home: Path, gold_ids: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = _record(home, "r1").revision
    code, _, _ = run(
        ["label", "r1", "dense_drift", "--user", "ann", "--revision", str(seen)], monkeypatch, capsys
    )
    assert code == 0
    code, _, err = run(
        ["label", "r1", "rerank_error", "--user", "bo", "--revision", str(seen)], monkeypatch, capsys
    )
    assert code == 2
    assert "conflict:" in err and "changed by ann" in err and "status → in_progress" in err
    assert _record(home, "r1").labels == ["dense_drift"]
