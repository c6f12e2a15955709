"""Graded gold on a triage record (`label --from` with `{chunk_id, grade}`): `diagnose` and the
case screen take the chunk ids with a grade above 0, `show` prints `CHUNK_ID=GRADE`. Production's
UUID chunks in a real SQLite KB with real Whoosh and Qdrant indexes, a flat-form request log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtriage.store.gold import gold_ids, gold_text
from ragtriage.tui.case_data import load_case
from ragtriage.workspace import Workspace
from tests.conftest import RunCli, write_jsonl

MAP = "chunk_id=id,doc_id=document_id,content=text,title=section_title"
ANSWER, JUDGED_OFF, OTHER = (f"0c5e8f3a-2b1d-4c7e-9f60-00000000000{n}" for n in range(1, 4))
REQUEST = "5a0b6c7d-0000-4000-8000-0000000000aa"
GOLD = [{"chunk_id": ANSWER, "grade": 2}, {"chunk_id": JUDGED_OFF, "grade": 0}]


@pytest.fixture
def home(home: Path, tmp_path: Path, run_cli: RunCli) -> Path:
    rows = [
        {
            "id": ANSWER,
            "document_id": 1,
            "text": "电子发票需要在开票后三十天内提交报销。",
            "section_title": "报销",
        },
        {"id": JUDGED_OFF, "document_id": 1, "text": "纸质发票请粘贴在报销单背面。", "section_title": "报销"},
        {"id": OTHER, "document_id": 2, "text": "会议室可以提前七天在内网预订。", "section_title": "会议"},
    ]
    code, _, err = run_cli(["kb", "import", str(write_jsonl(tmp_path / "chunks.jsonl", rows)), "--map", MAP])
    assert code == 0, err
    request = {
        "request_id": REQUEST,
        "ts": "2026-11-20T09:00:00Z",
        "query": "电子发票多久内要报销",
        "bm25_results": [OTHER],
        "vector_results": [OTHER],
        "fused_results": [OTHER],
        "reranked_results": [OTHER],
        "final_context_docs": [OTHER],
        "user_feedback": "thumbs_down",
    }
    code, _, err = run_cli(["logs", "ingest", str(write_jsonl(tmp_path / "requests.jsonl", [request]))])
    assert code == 0, err
    labels = write_jsonl(
        tmp_path / "labels.jsonl", [{"request_id": REQUEST, "label": "bm25_miss", "gold": GOLD}]
    )
    code, out, err = run_cli(["label", "--from", str(labels)])
    assert code == 0, out + err
    return home


def test_diagnose_show_and_case_screen_read_graded_gold(home: Path, run_cli: RunCli) -> None:
    code, out, err = run_cli(["diagnose", REQUEST, "--no-counterfactuals", "--json"])
    assert code == 0, err
    diagnosis = json.loads(out)
    assert [g["chunk_id"] for g in diagnosis["journeys"]["logged"]["gold"]] == [ANSWER]
    assert diagnosis["suggestion"]["label"] != "label_error", diagnosis["suggestion"]

    code, out, err = run_cli(["show", REQUEST])
    assert code == 0, err
    assert f"{ANSWER}=2 {JUDGED_OFF}=0" in " ".join(out.split())

    workspace = Workspace.open(home)
    try:
        assert load_case(workspace, REQUEST).gold == [ANSWER]
    finally:
        workspace.close()


def test_stored_gold_helpers() -> None:
    stored = [
        "c1",
        {"chunk_id": "c2", "grade": 3},
        {"chunk_id": "c3", "grade": 0},
        {"chunk_id": "c4", "grade": -1},
    ]
    assert gold_ids(stored) == ["c1", "c2"]
    assert gold_text(stored, " ") == "c1 c2=3 c3=0 c4=-1"
    assert gold_ids([]) == [] and gold_text([], ", ") == ""
