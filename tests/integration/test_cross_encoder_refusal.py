"""A local cross-encoder named by `[rerank] model` alone, recalibrated for by `eval calibrate-refusal`.

Real parts: the tiny KB in SQLite, Whoosh, the bundled embedder, and a tiny BERT cross-encoder
built in tmp_path and loaded by sentence-transformers (its scores are meaningless; the setting,
the run, the sweep, the write and the refusal by the written threshold are the real paths).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ragtriage.cli import cli
from ragtriage.eval.cases import EvalCase
from ragtriage.store import eval_repo as eval_store
from ragtriage.workspace import Workspace
from tests.tiny_bert import save_tiny_cross_encoder
from tests.tiny_kb import TINY_DOCS, add_tiny_kb

pytestmark = pytest.mark.model

NO_ANSWER = "火星上的天气怎么样"


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _replay(query: str) -> dict[str, Any]:
    result = _run("replay", "--query", query, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _setup(tmp_path: Path, home: Path, config: str) -> None:
    """The tiny KB and four answerable and three no-answer cases (one on a topic the KB touches)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")
    workspace = Workspace.open(home, None)
    try:
        chunk = add_tiny_kb(workspace, tmp_path / "docs")
        cases = [
            EvalCase(case_id="a1", query="出差发票多久内要提交", gold={chunk["travel"]: 1}),
            EvalCase(case_id="a2", query="请假要谁审批", gold={chunk["leave"]: 1}),
            EvalCase(case_id="a3", query="会议室可以提前几天预订", gold={chunk["rooms"]: 1}),
            EvalCase(case_id="a4", query="红字发票怎么开", gold={chunk["invoice"]: 1}),
            EvalCase(case_id="n1", query=NO_ANSWER),
            EvalCase(case_id="n2", query="公司股票期权怎么行权"),
            EvalCase(case_id="n3", query="会议室可以带宠物吗"),
        ]
        eval_store.add_cases(workspace.engine, "default", cases)
    finally:
        workspace.close()


def test_one_model_setting_runs_the_cross_encoder_and_calibrate_refusal_recalibrates_for_it(
    tmp_path: Path, home: Path
) -> None:
    corpus = [title + text for title, text in TINY_DOCS.values()] * 10
    model = save_tiny_cross_encoder(tmp_path / "bge-reranker-v2-m3", corpus)
    _setup(tmp_path, home, f'# team settings\n[rerank]\nmodel = "{model}"\n')

    # `model` alone picks the sentence-transformers CrossEncoder; the shipped threshold (lexical
    # support's) does not judge its probability.
    trace = _replay(NO_ANSWER)
    assert trace["refusal_score_kind"] == "cross_encoder"
    assert any(flag.startswith("refusal not judged") for flag in trace["flags"])
    assert _run("eval", "run", "--name", "ce").exit_code == 0

    sweep = _run("eval", "calibrate-refusal", "--max-wrong-refusals", "0.25", "--write", "--force", "--json")
    assert sweep.exit_code == 0, sweep.output
    report = json.loads(sweep.stdout)
    assert report["score"] == "cross_encoder"
    threshold = report["proposed"]["threshold"]
    written = (home / "config.toml").read_text(encoding="utf-8")
    assert 'refusal_threshold_score = "cross_encoder"' in written and f'model = "{model}"' in written

    assert _run("eval", "run", "--name", "ce-calibrated").exit_code == 0
    for query in (NO_ANSWER, "请假要谁审批"):
        trace = _replay(query)
        assert not any(flag.startswith("refusal not judged") for flag in trace["flags"])
        assert trace["refused"] == (trace["refusal_score"] < threshold)
    workspace = Workspace.open(home, None)
    try:
        latest = eval_store.list_runs(workspace.engine)[0]
        results = eval_store.run_case_results(workspace.engine, int(latest.id or 0))
    finally:
        workspace.close()
    assert latest.name == "ce-calibrated" and len(results) == 7
    decisions = [(r.snapshot["refused"], r.snapshot["refusal_scores"]["cross_encoder"]) for r in results]
    assert all(refused == (score < threshold) for refused, score in decisions)
    assert any(refused for refused, _ in decisions)  # the threshold judges: something is refused


def test_doctor_says_what_refusal_without_a_cross_encoder_costs_on_the_eval_set(
    tmp_path: Path, home: Path
) -> None:
    _setup(tmp_path, home, "# team settings\n")
    assert _run("eval", "run", "--name", "lexical").exit_code == 0
    report = json.loads(_run("doctor", "--json").stdout)
    finding = next(f for f in report["findings"] if f["kind"] == "refusal_without_cross_encoder")
    # Lexical support judges every off-topic question of this tiny KB supported (score 1.0).
    assert finding["severity"] == "warning" and report["ok"]
    assert finding["summary"].startswith(
        "refusal judges by lexical_support, not a cross-encoder: in run 1 (lexical) it refused "
        "0 of 4 (0.0%) answerable cases and kept 3 of 3 (100.0%) no-answer cases"
    )
    assert [(i["case_id"], i["note"]) for i in finding["items"]] == [
        ("n1", "no answer, kept"),
        ("n2", "no answer, kept"),
        ("n3", "no answer, kept"),
    ]
    text = " ".join(_run("doctor").output.split())
    assert "[warning] refusal_without_cross_encoder: refusal judges by lexical_support" in text
    assert (
        'fix: add a cross-encoder: [rerank] model = "/models/bge-reranker-v2-m3" (a local folder; or '
        '[rerank] backend = "http" with url), then run `ragtriage eval run` and '
        "`ragtriage eval calibrate-refusal --write`" in text
    )

    # With a cross-encoder configured, refusal no longer runs without one.
    model = save_tiny_cross_encoder(tmp_path / "reranker", [body for _, body in TINY_DOCS.values()] * 10)
    (home / "config.toml").write_text(f'[rerank]\nmodel = "{model}"\n', encoding="utf-8")
    kinds = [f["kind"] for f in json.loads(_run("doctor", "--json").stdout)["findings"]]
    assert "refusal_without_cross_encoder" not in kinds
