"""`kill -9` in the middle of writing: the store stays intact and the work can be finished exactly.

- ingest: a generated log file (valid lines, every tenth flagged, every thousandth broken) is
  ingested by `python -m ragtriage logs ingest`, killed once rows appear. Afterwards
  `PRAGMA integrity_check` is `ok`; re-running the ingest reaches exactly the counts of a clean
  ingest (every request once, every flag once, every bad line quarantined once), and a third run
  changes nothing.
- eval: `python -m ragtriage eval run` is killed after its first stored results. The run reads
  `incomplete`; `eval run --resume RUN` finishes it with every case exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ragtriage import locations
from tests.conftest import REPO_ROOT
from tests.integration.test_bad_input_corpus import run_cli
from tests.tiny_kb import TINY_DOCS, write_markdown_docs

BIG_LOG_LINES = 100_000
FLAG_EVERY = 10
BAD_EVERY = 1000
EVAL_CASES = 40
DOCS = TINY_DOCS


def _spawn(*args: str | Path, home: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RAGTRIAGE_HOME": str(home), "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "ragtriage", *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def _count(db: Path, sql: str) -> int:
    if not db.exists():
        return 0
    connection = sqlite3.connect(db, timeout=30)
    try:
        return int(connection.execute(sql).fetchone()[0])
    except sqlite3.OperationalError:  # tables not created yet
        return 0
    finally:
        connection.close()


def _kill_when(process: subprocess.Popen[bytes], ready: Callable[[], bool], timeout_s: float = 120) -> None:
    """SIGKILL `process` as soon as `ready()` is true."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if process.poll() is not None:
            pytest.fail(f"the process ended (exit {process.returncode}) before it could be killed mid-write")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the process did not start writing in time")
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


def _integrity(db: Path) -> str:
    connection = sqlite3.connect(db)
    try:
        return str(connection.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        connection.close()


def _write_big_log(path: Path) -> tuple[int, int, int]:
    """(valid lines, flagged lines, bad lines) of a generated log file."""
    valid = flagged = bad = 0
    with path.open("w", encoding="utf-8") as handle:
        for n in range(BIG_LOG_LINES):
            if n % BAD_EVERY == BAD_EVERY - 1:
                handle.write('{"request_id": "broken-%d", "raw_query": NaN}\n' % n)
                bad += 1
                continue
            record = {
                "request_id": f"r{n:07d}",
                "ts": f"2026-11-{1 + n % 28:02d}T{n % 24:02d}:{n % 60:02d}:00Z",
                "raw_query": f"第 {n} 个请求 怎么配置 VPN",
                "stages": {"bm25": [f"c{n % 97}", f"c{n % 89}"], "final": [f"c{n % 97}"]},
            }
            if n % FLAG_EVERY == 0:
                record["feedback"] = {"rating": "down"}
                flagged += 1
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            valid += 1
    return valid, flagged, bad


@pytest.mark.slow
def test_ingest_killed_mid_write_recovers_exactly(home: Path, tmp_path: Path) -> None:
    log = tmp_path / "big.jsonl"
    valid, flagged, bad = _write_big_log(log)
    db = locations.db_path(home)
    process = _spawn("logs", "ingest", log, home=home)
    _kill_when(process, lambda: _count(db, "SELECT count(*) FROM request_log") > 0)
    stored_at_kill = _count(db, "SELECT count(*) FROM request_log")
    assert 0 < stored_at_kill < valid, "the kill must land in the middle of the ingest"
    assert _integrity(db) == "ok"

    rerun = run_cli("logs", "ingest", "--json", log)
    assert rerun.exit_code == 0, rerun.output
    counts = json.loads(rerun.stdout)
    assert counts["read"] == BIG_LOG_LINES
    assert counts["ingested"] + counts["duplicates"] == valid and counts["conflicts"] == 0
    assert counts["duplicates"] >= stored_at_kill and counts["quarantined"] == bad
    assert _count(db, "SELECT count(*) FROM request_log") == valid
    assert _count(db, "SELECT count(DISTINCT request_id) FROM triage_record") == flagged
    assert _count(db, "SELECT count(*) FROM triage_record") == flagged
    assert _count(db, "SELECT count(*) FROM log_quarantine") == bad

    again = json.loads(run_cli("logs", "ingest", "--json", log).stdout)
    assert again["ingested"] == 0 and again["duplicates"] == valid and again["flagged"] == 0
    assert _count(db, "SELECT count(*) FROM request_log") == valid
    assert _count(db, "SELECT count(*) FROM log_quarantine") == bad
    assert _integrity(db) == "ok"


@pytest.fixture(scope="module")
def eval_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny indexed KB with a 40-case eval set, built once."""
    from ragtriage.eval.cases import EvalCase
    from ragtriage.index.kb_sync import add_paths
    from ragtriage.store import eval_repo as eval_store
    from ragtriage.workspace import Workspace

    root = tmp_path_factory.mktemp("crash-eval")
    write_markdown_docs(root / "docs")
    workspace = Workspace.open(root / "home", None)
    try:
        add_paths(workspace.home, workspace.settings, workspace.engine, [root / "docs"])
        doc_ids = sorted(DOCS)
        cases = [
            EvalCase(
                case_id=f"case-{i:03d}",
                query=f"{DOCS[doc_ids[i % len(doc_ids)]][0]} 第 {i} 问",
                gold={doc_ids[i % len(doc_ids)]: 1},
                gold_granularity="doc",
            )
            for i in range(EVAL_CASES)
        ]
        eval_store.add_cases(workspace.engine, "default", cases)
    finally:
        workspace.close()
    return root / "home"


@pytest.mark.slow
def test_eval_run_killed_mid_run_is_incomplete_and_resumes_exactly(eval_home: Path, home: Path) -> None:
    shutil.copytree(eval_home, home)
    db = locations.db_path(home)
    process = _spawn("eval", "run", "--batch-size", "2", "--name", "crashy", home=home)
    _kill_when(process, lambda: _count(db, "SELECT count(*) FROM eval_run_case") >= 2)
    stored_at_kill = _count(db, "SELECT count(*) FROM eval_run_case")
    assert 0 < stored_at_kill < EVAL_CASES, "the kill must land in the middle of the run"
    assert _integrity(db) == "ok"

    runs = json.loads(run_cli("eval", "runs", "--json").stdout)
    assert len(runs) == 1 and runs[0]["status"] == "incomplete"
    run_id = runs[0]["run_id"]

    resumed = run_cli("eval", "run", "--resume", str(run_id), "--json")
    assert resumed.exit_code == 0, resumed.output
    summary = json.loads(resumed.stdout)
    assert summary["status"] == "complete" and summary["cases_done"] == summary["case_count"] == EVAL_CASES
    assert summary["cases_this_attempt"] == EVAL_CASES - stored_at_kill
    assert _count(db, f"SELECT count(*) FROM eval_run_case WHERE run_id = {run_id}") == EVAL_CASES
    assert (
        _count(db, f"SELECT count(DISTINCT case_id) FROM eval_run_case WHERE run_id = {run_id}") == EVAL_CASES
    )
    assert _count(db, "SELECT count(*) FROM eval_run") == 1
    again = run_cli("eval", "run", "--resume", str(run_id))
    assert again.exit_code == 2 and "already complete" in again.stderr
    assert _integrity(db) == "ok"
