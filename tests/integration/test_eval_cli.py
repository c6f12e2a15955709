"""End to end through the CLI on a tiny real KB: promote → run → compare → gate, runs, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.workspace import Workspace
from tests.service_home import add_confirmed_request

DOCS = {
    "travel.md": "---\ndoc_id: travel\ntitle: 差旅报销\n---\n"
    "# 差旅报销\n\n出差结束后十五天内提交发票原件和行程单。\n",
    "leave.md": "---\ndoc_id: leave\ntitle: 请假流程\n---\n"
    "# 请假流程\n\n请假需要提前在系统提交申请，由直属主管审批。\n",
}


@pytest.fixture
def setup(tmp_path: Path, home: Path) -> dict[str, str]:
    """A KB, two confirmed triage records (one with a phone number), and a config that turns routes off."""
    from ragtriage.index.kb_sync import add_paths
    from ragtriage.kb.service import list_chunks

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    workspace = Workspace.open(home, None)
    add_paths(workspace.home, workspace.settings, workspace.engine, [docs])
    chunks = {c.doc_id: c.chunk_id for c in list_chunks(workspace.engine, workspace.settings.kb.name)}
    for request_id, query, doc in (
        ("r1", "出差发票多久内交 电话13812345678", "travel"),
        ("r2", "请假谁审批", "leave"),
    ):
        add_confirmed_request(workspace, request_id, query, [chunks[doc]], "bm25_miss")
    workspace.close()
    dense_only = tmp_path / "dense_only.toml"
    dense_only.write_text('[retrieval]\nroutes = ["dense_raw"]\n', encoding="utf-8")
    return {"dense_only": str(dense_only), **chunks}


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_promote_run_compare_gate_end_to_end(setup: dict[str, str]) -> None:
    code, out = _invoke("promote", "r1", "--tag", "finance", "--intent", "policy")
    assert code == 0 and "redacted 1 phone" in out, out
    code, out = _invoke("promote", "r1")
    assert code == 0 and "already in default" in out
    assert _invoke("promote", "r2", "--json")[0] == 0

    code, out = _invoke("eval", "run", "--name", "base", "--json")
    assert code == 0, out
    base = json.loads(out)
    assert base["status"] == "complete" and base["cases_done"] == 2 and base["dataset_version"] == 2
    code, out = _invoke("eval", "run", "--name", "dense", "--config", setup["dense_only"], "--json")
    assert code == 0, out
    assert json.loads(out)["config_hash"] != base["config_hash"]

    code, out = _invoke("eval", "runs", "--json")
    runs = json.loads(out)
    assert [r["name"] for r in runs] == ["dense", "base"] and all(r["status"] == "complete" for r in runs)

    code, out = _invoke("eval", "compare", "base", "dense", "--json")
    assert code == 0, out
    comparison = json.loads(out)
    assert comparison["paired_cases"] == 2
    assert {t["metric"] for t in comparison["tests"]} >= {"mrr", "recall@5", "ndcg@10"}
    assert all("p_value" in t["test"] and t["test"]["n"] == 2 for t in comparison["tests"])
    code, out = _invoke("eval", "compare", "base", "dense")
    assert code == 0 and "paired randomization test" in out

    code, out = _invoke(
        "eval",
        "gate",
        "--run",
        "dense",
        "--baseline",
        "base",
        "--min",
        "recall@5=0.5",
        "--max-drop",
        "mrr=0.5",
        "--no-regress",
        "confirmed",
    )
    assert code == 0 and "gate passed" in out, out
    code, out = _invoke("eval", "gate", "--run", "dense", "--min", "recall@5=1.01")
    assert code == 1 and "FAIL  --min recall@5=1.01: recall@5 = 1.0000 < floor 1.01" in out
    code, out = _main("eval", "gate", "--run", "dense", "--min", "recal@5=0.8")
    assert code == 2 and "bad gate rule: --min 'recal@5=0.8'" in out and "did you mean recall@5" in out


def _main(*args: str) -> tuple[int, str]:
    """Through `main()`, the way a shell sees it: expected errors become one stderr line and exit 2."""
    result = subprocess.run(
        [sys.executable, "-m", "ragtriage", *args], capture_output=True, text=True, timeout=120
    )
    return result.returncode, result.stdout + result.stderr


def test_unknown_dataset_and_run_exit_2_with_the_fix(setup: dict[str, str]) -> None:
    code, out = _main("eval", "run", "--dataset", "nope")
    assert code == 2 and "eval import" in out
    code, out = _main("eval", "compare", "1", "2")
    assert code == 2 and "eval runs" in out
