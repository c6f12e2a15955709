"""`logs ingest` says why requests were flagged: a per-reason breakdown, in the printed counts and in
`--json`, whose counts add up to `flagged` (in one process and with worker processes alike)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from rich.cells import cell_len

from ragtriage.cli import cli
from ragtriage.logs.ingest import ingest_files
from ragtriage.store.db import make_engine, sqlite_url
from tests.conftest import write_jsonl

UUID_IDS = [
    "0d4c6f7e-1a2b-4c3d-8e9f-0a1b2c3d4e5f",
    "1e5d7a8f-2b3c-4d4e-9f0a-1b2c3d4e5f60",
    "2f6e8b9a-3c4d-4e5f-8a1b-2c3d4e5f6071",
]

REQUESTS: list[dict[str, Any]] = [
    {
        "request_id": UUID_IDS[0],
        "ts": "2026-11-02T08:00:00Z",
        "raw_query": "差旅报销",
        "feedback": {"rating": "down"},
    },
    {
        "request_id": UUID_IDS[1],
        "ts": "2026-11-02T08:01:00Z",
        "raw_query": "请假审批",
        "feedback": {"rating": "thumbs_down", "escalated": True},
    },
    {"request_id": UUID_IDS[2], "ts": "2026-11-02T08:02:00Z", "raw_query": "发票", "citations": []},
    {
        "request_id": "1048576",
        "ts": "2026-11-02T08:03:00Z",
        "raw_query": "会议室",
        "answer": "抱歉，没有找到相关内容",
    },
    {"request_id": "42", "ts": "2026-11-02T08:04:00Z", "raw_query": "电脑领用", "citations": ["c1"]},
    # The same session within five minutes: the earlier request is flagged as followed up.
    {"request_id": "s-1", "ts": "2026-11-02T09:00:00Z", "raw_query": "vpn 连不上", "session": "s"},
    {"request_id": "s-2", "ts": "2026-11-02T09:02:00Z", "raw_query": "vpn 还是连不上", "session": "s"},
]
EXPECTED = {
    "bad_rating": 1,
    "bad_rating+escalated": 1,
    "empty_citations": 1,
    "refusal": 1,
    "follow_up": 1,
}


def _ingest(home: Path, path: Path, *more: str) -> Any:
    return CliRunner().invoke(
        cli,
        ["--home", str(home), "logs", "ingest", str(path), *more],
        env={"COLUMNS": "80"},
        catch_exceptions=False,
    )


def test_the_breakdown_names_each_reason_and_adds_up(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "requests.jsonl", REQUESTS)
    result = _ingest(tmp_path / "home", path)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index("    flagged: 5")
    assert lines[start + 1 : start + 7] == [
        "             bad_rating: 1",
        "             bad_rating + escalated: 1",
        "             empty_citations: 1",
        "             follow_up: 1",
        "             refusal: 1",
        "             (list them: ragtriage queue --reason REASON)",
    ]
    assert all(cell_len(line) <= 80 for line in lines), result.stdout

    again = json.loads(_ingest(tmp_path / "other-home", path, "--json").stdout)
    assert again["flagged_by_reason"] == EXPECTED
    assert sum(again["flagged_by_reason"].values()) == again["flagged"] == 5


def test_a_request_followed_up_in_a_later_ingest_counts_there(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = write_jsonl(tmp_path / "first.jsonl", REQUESTS[5:6])
    second = write_jsonl(tmp_path / "second.jsonl", REQUESTS[6:])
    report = json.loads(_ingest(home, first, "--json").stdout)
    assert (report["flagged"], report["flagged_by_reason"]) == (0, {})
    report = json.loads(_ingest(home, second, "--json").stdout)
    assert (report["flagged"], report["flagged_by_reason"]) == (1, {"follow_up": 1})


def test_nothing_flagged_says_which_rules_ran(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "quiet.jsonl", [REQUESTS[4]])
    result = _ingest(tmp_path / "home", path)
    assert "    flagged: 0" in result.stdout
    assert "no new request had a bad rating" in result.stdout and "[logs.flagging]" in result.stdout
    assert all(cell_len(line) <= 80 for line in result.stdout.splitlines()), result.stdout
    again = _ingest(tmp_path / "home", path)
    assert "no new request" not in again.stdout, "a re-ingest adds nothing, so there is nothing to explain"


def test_reasons_add_up_when_the_follow_up_rule_crosses_batches(tmp_path: Path) -> None:
    # Many sessions so the follow-up rule crosses the batches.
    lines = [
        {
            "request_id": f"r{i}",
            "ts": f"2026-11-02T10:{i // 2:02d}:{(i % 2) * 30:02d}Z",
            "raw_query": f"q{i}",
            "session": f"s{i % 4}",
            **({"feedback": {"rating": "down", "escalated": i % 6 == 0}} if i % 3 == 0 else {}),
            **({"citations": []} if i % 5 == 0 else {}),
        }
        for i in range(60)
    ]
    path = write_jsonl(tmp_path / "many.jsonl", lines)
    report = ingest_files(make_engine(sqlite_url(tmp_path / "many.db")), [path], batch_size=7)
    assert sum(report.flagged_by_reason.values()) == report.flagged > 0
    assert {"bad_rating+escalated+follow_up+empty_citations", "follow_up"} <= set(report.flagged_by_reason)
