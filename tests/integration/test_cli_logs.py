"""`ragtriage logs ingest`, `queue` and `show` through CliRunner, plus real subprocesses for exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ragtriage.cli import cli
from ragtriage.errors import LogFormatError, NotFoundError
from ragtriage.store import triage_repo
from ragtriage.workspace import Workspace
from tests.conftest import FIXTURES_DIR, REPO_ROOT

BROKEN = FIXTURES_DIR / "logs" / "broken_lines.jsonl"
EXPECTED = json.loads((FIXTURES_DIR / "logs" / "broken_lines.expected.json").read_text(encoding="utf-8"))


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def _log(tmp_path: Path) -> Path:
    lines = [
        {
            "request_id": "q1",
            "ts": "2026-11-01T08:00:00Z",
            "raw_query": "怎么 [bold]重启[/bold] 服务",
            "feedback": {"rating": "down"},
        },
        {"request_id": "q2", "ts": "2026-11-02T08:00:00Z", "raw_query": "apt 源", "citations": []},
        {"request_id": "q3", "ts": "2026-11-03T08:00:00Z", "raw_query": "没问题的请求", "citations": ["c1"]},
        {
            "request_id": "q4",
            "ts": "2026-11-04T08:00:00Z",
            "raw_query": "人工",
            "feedback": {"escalated": True},
        },
    ]
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    return path


def test_ingest_prints_the_counts_and_json(tmp_path: Path) -> None:
    result = _run("logs", "ingest", str(BROKEN))
    assert result.exit_code == 0, result.output
    for name in ("read", "ingested", "flagged", "duplicates", "conflicts", "quarantined", "blank"):
        assert f"{name}: {EXPECTED[name]}" in result.stdout
    again = _run("logs", "ingest", str(BROKEN), "--json")
    counts = json.loads(again.stdout)
    assert counts["read"] == EXPECTED["read"] and counts["ingested"] == 0
    assert counts["read"] == sum(
        counts[k] for k in ("ingested", "duplicates", "conflicts", "quarantined", "blank")
    )
    assert counts["flagged"] == 0 and "recovered" in counts


def test_strict_ingest_fails_with_file_and_line(tmp_path: Path) -> None:
    result = _run("logs", "ingest", "--strict", str(BROKEN))
    assert isinstance(result.exception, LogFormatError)
    assert f"{BROKEN}:2: NaN is not valid JSON" in str(result.exception)


def test_queue_table_filters_and_true_total(tmp_path: Path) -> None:
    assert _run("logs", "ingest", str(_log(tmp_path))).exit_code == 0
    result = _run("queue", "--limit", "2")
    assert result.exit_code == 0, result.output
    assert "q4" in result.stdout and "q2" in result.stdout and "q1" not in result.stdout
    assert "1–2 of 3" in result.stdout
    page = json.loads(_run("queue", "--json", "--offset", "2").stdout)
    assert page["total"] == 3 and [i["request_id"] for i in page["items"]] == ["q1"]
    assert page["items"][0]["raw_query"] == "怎么 [bold]重启[/bold] 服务"
    assert [
        i["request_id"] for i in json.loads(_run("queue", "--json", "--reason", "escalated").stdout)["items"]
    ] == ["q4"]
    since = json.loads(_run("queue", "--json", "--since", "2026-11-02").stdout)
    assert since["total"] == 2
    assert json.loads(_run("queue", "--json", "--status", "confirmed").stdout)["total"] == 0


def test_logged_markup_is_printed_literally(tmp_path: Path) -> None:
    _run("logs", "ingest", str(_log(tmp_path)))
    table = _run("queue", "--reason", "bad_rating").stdout
    assert "[bold]" in table and "[/bold]" in table
    assert "query: 怎么 [bold]重启[/bold] 服务" in _run("show", "q1").stdout


def test_queue_label_and_status_after_triage(tmp_path: Path, home: Path) -> None:
    _run("logs", "ingest", str(_log(tmp_path)))
    workspace = Workspace.open(home)
    try:
        triage_repo.set_labels(workspace.engine, "q2", ["bm25_miss"], user="t")
        triage_repo.set_status(workspace.engine, "q2", "confirmed", user="t")
    finally:
        workspace.close()
    page = json.loads(_run("queue", "--json", "--label", "bm25_miss").stdout)
    assert [(i["request_id"], i["status"], i["primary_label"]) for i in page["items"]] == [
        ("q2", "confirmed", "bm25_miss")
    ]
    assert "bm25_miss" in _run("queue", "--status", "confirmed").stdout


def test_show_prints_the_request_and_its_triage_record(tmp_path: Path) -> None:
    _run("logs", "ingest", str(BROKEN))
    result = _run("show", "bl-016")
    assert result.exit_code == 0, result.output
    assert "query: 怎么联系人工客服" in result.stdout
    assert "bm25: faq/contact#c0" in result.stdout
    assert "reasons: bad_rating, escalated" in result.stdout
    assert "feedback: rating down · escalated to a human\n" in result.stdout
    assert "False" not in result.stdout and "None" not in result.stdout
    view = json.loads(_run("show", "bl-016", "--json").stdout)
    assert view["request"]["record"]["tenant"] == "acme"
    assert view["triage"]["status"] == "new"
    assert "conflicts: 1" in _run("show", "bl-001").stdout
    assert "triage: not flagged" in _run("show", "bl-018").stdout


def test_show_unknown_id_and_bad_since_are_user_errors(tmp_path: Path) -> None:
    assert isinstance(_run("show", "nope").exception, NotFoundError)
    assert _run("queue", "--since", "last tuesday").exit_code != 0
    assert _run("queue", "--status", "open").exit_code == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["logs", "ingest", "--strict", str(BROKEN)], "log format error: "),
        (["show", "missing-id"], "not found: no logged request"),
        (["queue", "--since", "yesterday-ish"], "input error: --since"),
    ],
)
def test_errors_exit_2_with_one_line_on_stderr(args: list[str], message: str, home: Path) -> None:
    env = {**os.environ, "RAGTRIAGE_HOME": str(home)}
    result = subprocess.run(
        [sys.executable, "-m", "ragtriage", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(message) and "Traceback" not in result.stderr


def test_quarantined_lines_are_named_after_ingest_and_listed_on_demand() -> None:
    broken = FIXTURES_DIR / "logs" / "broken_lines.jsonl"
    ingest = CliRunner().invoke(cli, ["logs", "ingest", str(broken)], catch_exceptions=False)
    assert ingest.exit_code == 0, ingest.output
    assert "10 lines quarantined" in ingest.stderr
    assert f"{broken.resolve()}:2: NaN is not valid JSON" in ingest.stderr
    listed = _run("logs", "quarantine", str(broken), "--limit", "3")
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines()[0].startswith(f"{broken.resolve()}:2: [nan]")
    assert "3 of 10 quarantined lines" in listed.stdout
    as_json = json.loads(_run("logs", "quarantine", "--json").stdout)
    assert as_json["total"] == 10 and [line["line_no"] for line in as_json["lines"]][:3] == [2, 3, 4]
