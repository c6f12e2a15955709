"""`label`, `confirm`, `dismiss`, `note`, `assign` through `ragtriage.cli.main` on a real SQLite store
(a small KB added without indexes, a few logged requests ingested)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtriage.kb.service import add_paths, list_chunks
from ragtriage.logs.ingest import ingest_files
from ragtriage.store import triage_repo
from ragtriage.workspace import Workspace
from tests.conftest import RunCli, copy_fixture_docs, triage_record, write_jsonl

DOCS = ["errors/e1001.md", "leave/comp-time.md"]


@pytest.fixture
def gold_ids(tmp_path: Path, home: Path) -> list[str]:
    """Two fixture documents in the store (no indexes: the workflow needs only SQL) and three requests."""
    kb = tmp_path / "kb"
    copy_fixture_docs(kb, DOCS)
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
    log = write_jsonl(tmp_path / "requests.jsonl", lines)
    workspace = Workspace.open(home)
    try:
        add_paths(workspace.engine, workspace.settings, [kb])
        ingest_files(workspace.engine, [log])
        return [
            c.chunk_id for c in list_chunks(workspace.engine, workspace.settings.kb.name, "leave/comp-time")
        ][:2]
    finally:
        workspace.close()


def test_label_gold_confirm_walks_the_statuses_with_an_audit_trail(
    home: Path, gold_ids: list[str], run_cli: RunCli
) -> None:
    assert triage_record(home, "r1").status == "new"
    code, out, _ = run_cli(["label", "r1", "alias_missing", "--user", "ann"])
    assert code == 0 and "r1: in_progress; primary alias_missing" in out
    code, out, _ = run_cli(["label", "r1", "bm25_miss", "--user", "ann"])
    assert code == 0 and "primary alias_missing (also bm25_miss)" in out

    code, _, err = run_cli(["confirm", "r1", "--user", "ann"])
    assert code == 2 and "has no gold chunk ids" in err and "--gold CHUNK_ID" in err

    code, out, _ = run_cli(
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
        ]
    )
    assert code == 0 and "primary bm25_miss (also alias_missing)" in out and gold_ids[0] in out
    code, out, _ = run_cli(["confirm", "r1", "--user", "bo", "--json"])
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

    code, _, err = run_cli(["dismiss", "r1"])
    assert code == 2 and "is confirmed; it cannot become dismissed" in err and "--reopen" in err
    code, _, err = run_cli(["label", "r1", "rerank_error"])
    assert code == 2 and "label it again with --reopen" in err
    code, out, _ = run_cli(["label", "r1", "rerank_error", "--reopen"])
    assert code == 0 and "r1: in_progress" in out


def test_labels_and_gold_are_validated(gold_ids: list[str], run_cli: RunCli) -> None:
    code, _, err = run_cli(["label", "r1", "alias_mising"])
    assert code == 2 and "unknown label 'alias_mising'; did you mean 'alias_missing'?" in err
    code, _, err = run_cli(["label", "r1", "alias_missing", "--gold", "nope#1"])
    assert code == 2 and "gold chunk id not in the KB: nope#1" in err
    code, _, err = run_cli(["label", "nope", "alias_missing"])
    assert code == 2 and "'nope'" in err
    code, _, err = run_cli(["confirm", "r2"])
    assert code == 2 and "is new; it cannot become confirmed: label it first" in err


def test_configured_label_set_is_used(home: Path, gold_ids: list[str], run_cli: RunCli) -> None:
    (home / "config.toml").write_text(
        '[triage]\nlabels = ["ocr_error", "no_answer_in_kb"]\n', encoding="utf-8"
    )
    code, _, err = run_cli(["label", "r1", "alias_missing"])
    assert code == 2 and "use one of ocr_error, no_answer_in_kb" in err
    code, out, _ = run_cli(["label", "r2", "no_answer_in_kb", "--primary"])
    assert code == 0
    code, out, _ = run_cli(["confirm", "r2"])
    assert code == 0 and "r2: confirmed" in out


def test_dismiss_note_assign_and_unflagged_requests(home: Path, gold_ids: list[str], run_cli: RunCli) -> None:
    code, out, _ = run_cli(["dismiss", "r2", "--reason", "not a retrieval question"])
    assert code == 0 and "r2: dismissed" in out
    assert triage_record(home, "r2").notes[0].text == "dismissed: not a retrieval question"
    # r3 was never flagged: a note opens a triage record for it.
    code, out, _ = run_cli(["note", "r3", "看起来没问题", "--user", "cy"])
    assert code == 0 and "r3: new" in out
    assert triage_record(home, "r3").reasons == ["manual"]
    code, out, _ = run_cli(["assign", "r3", "dee"])
    assert code == 0 and "assigned to dee" in out
    code, out, _ = run_cli(["assign", "r3", "-"])
    assert code == 0 and triage_record(home, "r3").assignee is None


def test_a_concurrent_edit_is_refused_naming_who_changed_what(
    home: Path, gold_ids: list[str], run_cli: RunCli
) -> None:
    seen = triage_record(home, "r1").revision
    code, _, _ = run_cli(["label", "r1", "dense_drift", "--user", "ann", "--revision", str(seen)])
    assert code == 0
    code, _, err = run_cli(["label", "r1", "rerank_error", "--user", "bo", "--revision", str(seen)])
    assert code == 2
    assert "conflict:" in err and "changed by ann" in err and "status → in_progress" in err
    assert triage_record(home, "r1").labels == ["dense_drift"]
