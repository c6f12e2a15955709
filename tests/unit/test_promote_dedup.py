"""Promotion: confirmed records only, PII redacted before storing, no duplicate cases, provenance kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragtriage.errors import InputError
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.db import write_session
from ragtriage.store.log_tables import RequestLogRow, TriageRow
from ragtriage.triage.promote import promote_request
from ragtriage.workspace import Workspace


def _record(
    workspace: Workspace,
    request_id: str,
    query: str,
    *,
    status: str = "confirmed",
    gold: list[object] | None = None,
    labels: list[str] | None = None,
) -> None:
    body = {"request_id": request_id, "raw_query": query, "config_hash": "online-abc"}
    with write_session(workspace.engine) as session:
        session.add(
            RequestLogRow(request_id=request_id, raw_query=query, body=json.dumps(body, ensure_ascii=False))
        )
        session.flush()
        labels = labels if labels is not None else ["alias_missing"]
        session.add(
            TriageRow(
                request_id=request_id,
                status=status,
                labels=labels,
                primary_label=labels[0] if labels else None,
                gold_chunk_ids=gold or [],
            )
        )


def test_promote_redacts_pii_and_records_provenance(workspace: Workspace) -> None:
    _record(
        workspace, "r1", "手机13812345678 报账流程", gold=["chunk-a", {"chunk_id": "chunk-b", "grade": 2}]
    )
    result = promote_request(workspace, "r1", intent_type="howto", tags=["finance"], must_have=["v2"])
    assert result.created and result.query == "手机<PHONE> 报账流程"
    assert result.redacted == {"phone": 1}
    stored = eval_store.dataset_cases(workspace.engine, "default")
    assert len(stored) == 1
    case = stored[0]
    assert "13812345678" not in case.case.query
    assert case.case.gold == {"chunk-a": 1, "chunk-b": 2}
    assert (case.case.intent_type, case.case.tags, case.case.must_have) == ("howto", ["finance"], ["v2"])
    assert case.provenance["request_id"] == "r1" and case.provenance["label"] == "alias_missing"
    assert case.provenance["config_hash"] == workspace.settings.config_hash()
    assert case.provenance["logged_config_hash"] == "online-abc"
    assert "kb_revision" in case.provenance and "index_manifest" in case.provenance


def test_same_normalized_query_and_gold_is_not_added_twice(workspace: Workspace) -> None:
    _record(workspace, "r1", "报账流程 ", gold=["chunk-a"])
    _record(workspace, "r2", "　报账流程", gold=["chunk-a"])  # ideographic space: same after NFKC + strip
    _record(workspace, "r3", "报账流程", gold=["chunk-z"])
    first = promote_request(workspace, "r1")
    again = promote_request(workspace, "r2")
    other_gold = promote_request(workspace, "r3")
    assert not again.created and again.case_id == first.case_id
    assert other_gold.created and other_gold.case_id != first.case_id
    assert len(eval_store.dataset_cases(workspace.engine, "default")) == 2
    assert eval_store.dataset_version(workspace.engine, "default") == 2


def test_duplicate_check_runs_on_the_redacted_query(workspace: Workspace) -> None:
    _record(workspace, "r1", "我的手机13812345678收不到验证码", gold=["c"])
    _record(workspace, "r2", "我的手机13912345678收不到验证码", gold=["c"])
    assert promote_request(workspace, "r1").created
    assert not promote_request(workspace, "r2").created


def test_redaction_can_be_turned_off(home: Path) -> None:
    opened = Workspace.open(home, None, overrides={"eval": {"redact_pii": False}})
    try:
        _record(opened, "r1", "手机13812345678", gold=["c"])
        assert promote_request(opened, "r1").query == "手机13812345678"
    finally:
        opened.close()


def test_only_confirmed_records_with_gold_are_promoted(workspace: Workspace) -> None:
    _record(workspace, "new", "q1", status="new", gold=["c"])
    _record(workspace, "nogold", "q2", gold=[])
    _record(workspace, "refuse", "q3", gold=[], labels=["no_answer_in_kb"])
    with pytest.raises(InputError, match="only confirmed"):
        promote_request(workspace, "new")
    with pytest.raises(InputError, match="no gold"):
        promote_request(workspace, "nogold")
    refusal = promote_request(workspace, "refuse")
    assert refusal.created and refusal.gold == {}
