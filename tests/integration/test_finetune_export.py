"""`eval export --format finetune` on a real tiny KB and a real eval run; sampled-origin buckets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.eval.cases import EvalCase
from ragtriage.eval.finetune import finetune_records, run_order
from ragtriage.store import eval_repo as eval_store
from ragtriage.workspace import Workspace
from tests.service_home import add_confirmed_request
from tests.tiny_kb import add_tiny_kb


def _snapshot(*candidates: tuple[str, int | None, int | None, int | None]) -> dict[str, object]:
    return {
        "candidates": [
            {
                "chunk_id": cid,
                "final_rank": final,
                "reranked": None if rr is None else [rr, 0.5],
                "fused": [fu, 0.1],
            }
            for cid, final, rr, fu in candidates
        ]
    }


def test_negatives_are_ranked_above_gold_then_topped_up_never_gold() -> None:
    # Foreign ids (UUID-like, int-like). Run order: a, b, GOLD, c (final), then d (pool only).
    snap = _snapshot(
        ("7f3e-a", 1, 1, 3), ("42", 2, 2, 1), ("gold-1", 3, 3, 2), ("c", 4, 4, 4), ("d", None, None, 5)
    )
    assert run_order(snap) == ["7f3e-a", "42", "gold-1", "c", "d"]
    text = {"7f3e-a": "A", "42": "B", "gold-1": "G", "c": "C", "d": "G"}  # d repeats the gold text
    cases = [
        EvalCase(case_id="q1", query="问", gold={"gold-1": 1}),
        EvalCase(case_id="q2", query="无答案"),
        EvalCase(case_id="q3", query="文档级", gold={"doc": 1}, gold_granularity="doc"),
        EvalCase(case_id="q4", query="没跑", gold={"x": 1}),
    ]
    records, report = finetune_records(
        cases, {"q1": snap}, lambda ids: {i: text[i] for i in ids if i in text}, negatives=3, run_id=9
    )
    assert records == [{"query": "问", "pos": ["G"], "neg": ["A", "B", "C"]}]
    assert (
        report.written,
        report.skipped_no_answer,
        report.skipped_doc_granularity,
        report.skipped_not_in_run,
    ) == (
        1,
        1,
        1,
        1,
    )
    assert report.cases == 4 and report.short_of_negatives == 0
    records, report = finetune_records(
        cases[:1], {"q1": snap}, lambda ids: {i: text[i] for i in ids if i in text}, negatives=7, run_id=9
    )
    assert records[0]["neg"] == ["A", "B", "C"] and report.short_of_negatives == 1  # d has the gold's text


@pytest.fixture
def workspace_with_run(tmp_path: Path, home: Path) -> dict[str, str]:
    """Tiny KB; a sampled and a complained request confirmed and promoted; a no-answer case; one run."""
    from ragtriage.triage.promote import promote_request

    workspace = Workspace.open(home, None)
    chunks = add_tiny_kb(workspace, tmp_path / "docs")
    for request_id, query, doc, reason in (
        ("0b6f4c1e-9d7a-4d8e-a1f2-3c4d5e6f7a8b", "出差发票多久内交", "travel", "sampled"),
        ("1024", "红字发票怎么开", "invoice", "bad_rating"),
    ):
        add_confirmed_request(workspace, request_id, query, [chunks[doc]], "rerank_error", reasons=[reason])
    promote_request(workspace, "0b6f4c1e-9d7a-4d8e-a1f2-3c4d5e6f7a8b")
    promote_request(workspace, "1024")
    eval_store.add_cases(workspace.engine, "default", [EvalCase(case_id="none", query="食堂几点开门")])
    workspace.close()
    result = CliRunner().invoke(cli, ["eval", "run", "--name", "base"])
    assert result.exit_code == 0, result.output
    return chunks


def test_cli_export_finetune_from_a_real_run(
    workspace_with_run: dict[str, str], home: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ft" / "train.jsonl"
    result = CliRunner().invoke(cli, ["eval", "export", "--format", "finetune", "--negatives", "3", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 of 3 cases" in result.output and "skipped 1 no-answer" in result.output
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["query"] for line in lines] == ["出差发票多久内交", "红字发票怎么开"]
    workspace = Workspace.open(home, None)
    try:
        from ragtriage.kb.service import list_chunks

        text_of = {
            c.doc_id: c.content
            for c in list_chunks(workspace.engine, workspace.settings.kb.name, include_content=True)
        }
        run = eval_store.get_run(workspace.engine, "base")
        results = {r.case_id: r for r in eval_store.run_case_results(workspace.engine, int(run.id or 0))}
    finally:
        workspace.close()
    for line, doc in zip(lines, ("travel", "invoice"), strict=True):
        assert line["pos"] == [text_of[doc]]
        assert text_of[doc] not in line["neg"] and len(line["neg"]) == 3
    # The sampled case carries origin:sampled, the complaint origin:complaint.
    buckets = {case_id: r.buckets for case_id, r in results.items()}
    assert sorted(b for bs in buckets.values() for b in bs if b.startswith("origin:")) == [
        "origin:complaint",
        "origin:sampled",
    ]


def test_an_export_with_nothing_to_train_on_says_what_to_do(
    workspace_with_run: dict[str, str], home: Path, tmp_path: Path
) -> None:
    workspace = Workspace.open(home, None)
    try:
        eval_store.add_cases(workspace.engine, "refusals", [EvalCase(case_id="n1", query="火星天气怎么样")])
    finally:
        workspace.close()
    runner = CliRunner()
    assert runner.invoke(cli, ["eval", "run", "--dataset", "refusals"]).exit_code == 0
    out = tmp_path / "train.jsonl"
    result = runner.invoke(cli, ["eval", "export", "--format", "finetune", "--dataset", "refusals", str(out)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "0 of 1 cases" in said and "skipped 1 no-answer" in said
    assert "nothing to train on" in said and "ragtriage promote REQUEST_ID" in said
    assert out.read_text(encoding="utf-8") == ""


def test_eval_show_says_a_gold_that_was_never_dropped_reached_final(
    workspace_with_run: dict[str, str],
) -> None:
    result = CliRunner().invoke(cli, ["eval", "show", "base"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    # The gold journey's own words: "dropped at: reached" read as if it dropped somewhere.
    assert "reached final" in result.output
    assert not any(line.rstrip(" │").endswith(" reached") for line in result.output.splitlines())
