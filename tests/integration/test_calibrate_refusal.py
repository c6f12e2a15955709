"""`eval calibrate-refusal`: a hand-computed sweep, and end to end on a real tiny KB without a
cross-encoder: calibrate, --write, and the next run refuses exactly what the sweep said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.eval.cases import EvalCase
from ragtriage.eval.refusal_calibration import calibrate, snapshot_scores, write_threshold
from ragtriage.store import eval_repo as eval_store
from ragtriage.workspace import Workspace
from tests.tiny_kb import add_tiny_kb

CASES = [(True, 0.9), (True, 0.8), (True, 0.7), (True, 0.4), (False, 0.5), (False, 0.3), (False, None)]


def test_sweep_by_hand() -> None:
    report = calibrate(1, "dense_cosine", CASES, max_wrong=0.05)
    # Scores 0.3 0.4 0.5 0.7 0.8 0.9 (spread 0.6): below-min, midpoints, above-max.
    assert [row.threshold for row in report.rows] == [0.294, 0.35, 0.45, 0.6, 0.75, 0.85, 0.906]
    by_threshold = {row.threshold: row for row in report.rows}
    assert (by_threshold[0.294].refused_no_answer, by_threshold[0.294].refused_answerable) == (
        1,
        0,
    )  # None only
    assert (by_threshold[0.45].refusal_accuracy, by_threshold[0.45].wrongly_refused) == (
        pytest.approx(2 / 3),
        0.25,
    )
    assert (by_threshold[0.6].refusal_accuracy, by_threshold[0.6].wrongly_refused) == (1.0, 0.25)
    assert report.proposed is not None and report.proposed.threshold == 0.35  # 2/3 refused, none wrongly
    assert calibrate(1, "dense_cosine", CASES, max_wrong=0.25).proposed.threshold == 0.6  # type: ignore[union-attr]
    none = calibrate(1, "fused", [(True, 0.2)], max_wrong=0.05)
    assert none.proposed is None and "no no-answer case" in (none.reason or "")


def test_an_eval_set_without_no_answer_cases_prints_the_reason_not_a_table_of_dashes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ragtriage.commands.eval_refusal import _print

    report = calibrate(3, "dense_cosine", [(True, 0.9), (True, 0.7), (True, 0.5)])
    assert report.rows and report.proposed is None
    _print(report)
    shown = " ".join(capsys.readouterr().out.split())
    assert shown == (
        "run 3: dense_cosine score; 0 no-answer and 3 answerable cases no threshold proposed: the eval "
        "set has no no-answer case (label one no_answer_in_kb and promote it, or import one)"
    )


def test_lexical_support_n_a_cases_are_never_refused() -> None:
    # The pipeline does not refuse a run whose lexical support is n/a; the sweep must agree.
    report = calibrate(1, "lexical_support", CASES, max_wrong=0.05)
    assert report.rows[0].refused_no_answer == 0  # below the lowest score: the None case is kept
    assert report.proposed is not None and report.proposed.threshold == 0.35
    assert report.proposed.refused_no_answer == 1  # 0.3 only; the None case is not refused


def test_old_snapshots_give_dense_and_fused_scores() -> None:
    snapshot = {
        "candidates": [
            {"chunk_id": "a", "routes": {"dense_raw": [1, 0.81], "bm25_raw": [1, 7.0]}, "fused": [2, 0.03]},
            {
                "chunk_id": "b",
                "routes": {"dense_rewritten": [1, 0.86]},
                "fused": [1, 0.032],
                "reranked": [1, 0.5],
            },
        ]
    }
    assert snapshot_scores(snapshot) == {
        "cross_encoder": None,
        "dense_cosine": 0.86,
        "fused": 0.032,
        "final": 0.5,
        "lexical_support": None,
    }


def test_write_keeps_comments(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "# team settings\n[rerank]\ntop_n = 5  # keep five\n\n[retrieval]\nbm25_k = 20\n", encoding="utf-8"
    )
    write_threshold(path, 0.8123, "dense_cosine")
    text = path.read_text(encoding="utf-8")
    assert "# team settings" in text and "top_n = 5  # keep five" in text and "bm25_k = 20" in text
    assert "refusal_threshold = 0.8123" in text and 'refusal_score = "dense_cosine"' in text


def test_calibrate_write_then_the_next_run_refuses_as_swept(tmp_path: Path, home: Path) -> None:
    workspace = Workspace.open(home, None)
    chunk = add_tiny_kb(workspace, tmp_path / "docs")
    cases = [
        EvalCase(case_id="a1", query="出差发票多久内要提交", gold={chunk["travel"]: 1}),
        EvalCase(case_id="a2", query="请假要谁审批", gold={chunk["leave"]: 1}),
        EvalCase(case_id="a3", query="VPN 连不上怎么办", gold={chunk["vpn"]: 1}),
        EvalCase(case_id="a4", query="红字发票怎么开", gold={chunk["invoice"]: 1}),
        EvalCase(case_id="n1", query="火星上的天气怎么样"),
        EvalCase(case_id="n2", query="公司股票期权怎么行权"),
    ]
    eval_store.add_cases(workspace.engine, "default", cases)
    workspace.close()
    # The team refuses by the dense cosine (the default score is lexical support).
    (home / "config.toml").write_text(
        '# tuned by the team\n[rerank]\ntop_n = 3\nrefusal_score = "dense_cosine"\n', encoding="utf-8"
    )
    runner = CliRunner()
    assert runner.invoke(cli, ["eval", "run", "--name", "before"]).exit_code == 0
    result = runner.invoke(cli, ["eval", "calibrate-refusal", "--max-wrong-refusals", "0.25", "--json"])
    assert result.exit_code == 0, result.output
    sweep = json.loads(result.output)
    assert (
        sweep["score"] == "dense_cosine" and sweep["no_answer_cases"] == 2 and sweep["answerable_cases"] == 4
    )
    proposed = sweep["proposed"]
    assert proposed is not None and proposed["wrongly_refused"] <= 0.25
    # Every run records lexical support too, so it can be swept without running again.
    result = runner.invoke(cli, ["eval", "calibrate-refusal", "--score", "lexical_support", "--json"])
    assert result.exit_code == 0, result.output
    lexical = json.loads(result.output)
    assert lexical["score"] == "lexical_support" and lexical["unscored_cases"] == 0
    assert lexical["rows"] and all(
        -0.02 <= row["threshold"] <= 1.02 for row in lexical["rows"]
    )  # shares in [0, 1]
    # A score the run never had: one reason with the way out, no empty table, no "6 always refused".
    result = runner.invoke(
        cli, ["eval", "calibrate-refusal", "--score", "cross_encoder"], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "threshold" not in said.split("no threshold proposed")[0] and "always refused" not in said
    assert "ran without a cross-encoder, so it has no cross_encoder score; drop --score" in said
    # Six cases cannot make any gain significant out of fold: --write refuses, --force writes.
    result = runner.invoke(cli, ["eval", "calibrate-refusal", "--max-wrong-refusals", "0.25", "--write"])
    assert result.exit_code == 1 and "not significant at p < 0.05; add --force" in result.output
    assert "refusal_threshold" not in (home / "config.toml").read_text(encoding="utf-8")
    result = runner.invoke(
        cli, ["eval", "calibrate-refusal", "--max-wrong-refusals", "0.25", "--write", "--force"]
    )
    assert result.exit_code == 0, result.output
    assert "← proposed" in result.output and "objective: maximise refusal accuracy" in result.output
    text = (home / "config.toml").read_text(encoding="utf-8")
    assert text.startswith("# tuned by the team") and f"refusal_threshold = {proposed['threshold']}" in text
    # The next run (features-only rerank, no cross-encoder) refuses exactly what the sweep predicted.
    assert runner.invoke(cli, ["eval", "run", "--name", "after"]).exit_code == 0
    workspace = Workspace.open(home, None)
    try:
        assert workspace.settings.rerank.refusal_threshold == proposed["threshold"]
        run = eval_store.get_run(workspace.engine, "after")
        results = eval_store.run_case_results(workspace.engine, int(run.id or 0))
    finally:
        workspace.close()
    refused_no_answer = sum(1 for r in results if not r.has_gold and r.refused)
    refused_answerable = sum(1 for r in results if r.has_gold and r.refused)
    assert (refused_no_answer, refused_answerable) == (
        proposed["refused_no_answer"],
        proposed["refused_answerable"],
    )
    assert all(r.snapshot["refusal_score_kind"] == "dense_cosine" for r in results)
