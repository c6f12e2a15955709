"""`ragtriage monitor` on a real SQLite store with ingested logs; every figure checked by hand.

Requests (UUID and integer ids, v1 and flat form):
  2026-11-02  A v1  fused c1 c2 c3, reranked c3 c1 c2, cited c1; rewrite fired; rating down
              B v1  final_context [] (empty); rewrite logged, not fired
              C v2  flat: fused c4 c5, reranked c5 c4, cited c5; escalated
              D v1  no stage, rating up
  2026-11-03  E v2  bm25 n1#0, dense n1#1 (no fused); sub-queries (fired); rating "1"
              F v1  fused c1 c2, reranked c2, cited c2
              G --  stored by an earlier version (no monitor columns): fused [] (empty)
Confirmed: A rerank_error gold c2; C bm25_miss gold c4; E alias_missing gold n1#1.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy.engine import Engine

from ragtriage.cli import cli
from ragtriage.logs.ingest import ingest_files
from ragtriage.store.db import make_engine, sqlite_url, write_session
from ragtriage.store.eval_tables import EvalRunRow
from ragtriage.store.kb_tables import ChunkRow, DocumentRow
from ragtriage.store.log_tables import RequestLogRow, TriageRow
from ragtriage.triage.monitor import DEFINITIONS, compute_monitor

A, C = str(uuid.UUID(int=0xA)), str(uuid.UUID(int=0xC))
NOW = datetime(2026, 11, 5, tzinfo=timezone.utc)
SINCE = datetime(2026, 11, 2, tzinfo=timezone.utc)


def _lines() -> list[dict[str, Any]]:
    return [
        {
            "request_id": A,
            "ts": "2026-11-02T01:00:00Z",
            "raw_query": "q",
            "pipeline_version": "v1",
            "rewrite": {"normalized_query": "q", "rewritten_query": "q2"},
            "stages": {"fused": ["c1", "c2", "c3"], "reranked": ["c3", "c1", "c2"]},
            "citations": ["c1"],
            "feedback": {"rating": "down"},
        },
        {
            "request_id": 17,
            "ts": "2026-11-02T02:00:00Z",
            "raw_query": "x",
            "pipeline_version": "v1",
            "rewrite": {"normalized_query": "x", "rewritten_query": "x"},
            "stages": {"final_context": []},
        },
        {
            "request_id": C,
            "ts": "2026-11-02T03:00:00Z",
            "raw_query": "c",
            "pipeline_version": "v2",
            "fused_results": ["c4", {"chunk_id": "c5", "score": 0.3}],
            "reranked_results": ["c5", "c4"],
            "citations": ["c5"],
            "user_feedback": {"escalated": True},
        },
        {
            "request_id": "d",
            "ts": "2026-11-02T04:00:00Z",
            "raw_query": "d",
            "pipeline_version": "v1",
            "feedback": {"rating": "up"},
        },
        {
            "request_id": "e",
            "ts": "2026-11-03T05:00:00Z",
            "raw_query": "e",
            "pipeline_version": "v2",
            "rewrite": {"sub_queries": ["e1"]},
            "stages": {"bm25": ["n1#0"], "dense": [{"chunk_id": "n1#1", "score": 0.8}]},
            "feedback": {"rating": 1},
        },
        {
            "request_id": "f",
            "ts": "2026-11-03T06:00:00Z",
            "raw_query": "f",
            "pipeline_version": "v1",
            "stages": {"fused": ["c1", "c2"], "reranked": ["c2"]},
            "citations": ["c2"],
        },
    ]


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in _lines()) + "\n", encoding="utf-8")
    engine = make_engine(sqlite_url(tmp_path / "store.db"))
    assert ingest_files(engine, [path]).ingested == 6
    at = datetime(2026, 11, 1, tzinfo=timezone.utc)
    with write_session(engine) as session:
        session.add(
            RequestLogRow(
                request_id="g",
                ts=datetime(2026, 11, 3, 7, tzinfo=timezone.utc),
                raw_query="g",
                body=json.dumps({"request_id": "g", "raw_query": "g", "stages": {"fused": []}}),
            )
        )
        for request_id, label, gold in (
            (A, "rerank_error", "c2"),
            (C, "bm25_miss", "c4"),
            ("e", "alias_missing", "n1#1"),
        ):
            session.merge(
                TriageRow(
                    request_id=request_id,
                    status="confirmed",
                    reasons=["bad_rating"],
                    labels=[label],
                    primary_label=label,
                    gold_chunk_ids=[gold],
                )
            )
        for doc_id, updated, chunk_ids in (
            ("n1", datetime(2026, 11, 3, tzinfo=timezone.utc), ["n1#0", "n1#1", "n1#2"]),
            ("docs/guide", datetime(2026, 11, 2, 12, tzinfo=timezone.utc), ["docs/guide#0", "docs/guide#1"]),
            ("late", datetime(2026, 11, 4, 23, tzinfo=timezone.utc), ["late#0"]),
        ):
            session.add(DocumentRow(doc_id=doc_id, updated_at=updated))
            for chunk_id in chunk_ids:
                session.add(ChunkRow(chunk_id=chunk_id, doc_id=doc_id, updated_at=updated))
        for name, recall in (("ablate:C", 0.5), ("ablate:E", 0.7)):
            session.add(
                EvalRunRow(
                    name=name,
                    dataset="default",
                    dataset_version=3,
                    status="complete",
                    finished_at=datetime(2026, 11, 3, 9, tzinfo=timezone.utc),
                    started_at=at,
                    aggregates={"means": {"recall@10": recall}},
                )
            )
    return engine


def _values(group: Any) -> dict[str, float | None]:
    return {name: None if f.value is None else round(f.value, 4) for name, f in group.figures.items()}


def test_figures_by_day_match_the_hand_computation(engine: Engine) -> None:
    report = compute_monitor(engine, since=SINCE, now=NOW, bad_ratings=["down", "1"])
    assert report.backfilled == 1
    day2, day3, day4 = report.groups
    assert (day2.key, day2.requests, day3.requests, day4.requests) == ("2026-11-02", 4, 3, 0)
    assert _values(day2) == {
        "empty_result_rate": round(1 / 3, 4),  # B of A, B, C (D logged no stage)
        "rewrite_trigger_rate": 0.5,  # A of A, B
        "rewrite_gain": None,
        "rank_shift": -1.0,  # gold c2 of A: 2 → 3; gold c4 of C: 1 → 2
        "bad_feedback_share": 0.5,  # A (down), C (escalated)
        "coverage": 1.0,  # c2 and c4 both in the fused lists
        "first_day_recall": 0.0,  # docs/guide: neither chunk retrieved on 11-02/03
    }
    assert _values(day3) == {
        "empty_result_rate": round(1 / 3, 4),  # G (backfilled) of E, F, G
        "rewrite_trigger_rate": 1.0,  # E (sub-queries) of E
        "rewrite_gain": 0.2,  # ablate:E 0.7 − ablate:C 0.5
        "rank_shift": 1.0,  # cited c2 of F: 2 → 1
        "bad_feedback_share": round(1 / 3, 4),  # E (rating 1)
        "coverage": None,  # E logged no fused list
        "first_day_recall": round(2 / 3, 4),  # n1#0 (bm25), n1#1 (dense) of 3
    }
    assert "no confirmed case" in (day3.figures["coverage"].reason or "")
    assert day4.figures["first_day_recall"].reason == "1 new document still in their first 24 h"
    assert day4.figures["empty_result_rate"].reason == "no stored request in this group"
    assert {k: (f.count, f.total) for k, f in day2.bad_feedback_by_label.items()} == {
        "bm25_miss": (1, 2),
        "rerank_error": (1, 2),
    }
    overall = _values(report.overall)
    assert overall["rank_shift"] == round(-1 / 3, 4) and overall["first_day_recall"] == 0.4  # 2 of 5
    assert report.overall.figures["rank_shift"].detail["moved_up"] == 1
    assert report.overall.requests == 7


def test_by_version_and_coverage_n(engine: Engine) -> None:
    report = compute_monitor(
        engine, by="version", since=SINCE, now=NOW, bad_ratings=["down", "1"], coverage_n=1
    )
    groups = {g.key: g for g in report.groups}
    assert {k: g.requests for k, g in groups.items()} == {"-": 1, "v1": 4, "v2": 2}
    assert _values(groups["v2"])["bad_feedback_share"] == 1.0  # C and E
    assert _values(groups["v1"])["empty_result_rate"] == round(1 / 3, 4)  # B of A, B, F
    # coverage@1: A's gold c2 is second in its fused list (miss), C's c4 first (hit).
    assert _values(report.overall)["coverage"] == 0.5
    assert groups["v1"].figures["rewrite_gain"].reason.startswith("eval runs carry no pipeline_version")
    assert _values(report.overall)["rewrite_gain"] == 0.2


def test_a_version_group_without_any_rewrite_gain_does_not_point_at_an_empty_all_row(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in _lines()) + "\n", encoding="utf-8")
    no_runs = make_engine(sqlite_url(tmp_path / "no-runs.db"))
    ingest_files(no_runs, [path])
    report = compute_monitor(no_runs, by="version", since=SINCE, now=NOW, bad_ratings=["down"])
    assert report.overall.figures["rewrite_gain"].value is None
    reason = next(g for g in report.groups if g.key == "v1").figures["rewrite_gain"].reason
    assert reason == (
        "eval runs carry no pipeline_version, and there is no pair of replays with and without "
        "rewriting (run `ragtriage eval ablate`)"
    )


def test_no_data_is_na_with_a_reason_never_zero(tmp_path: Path) -> None:
    empty = make_engine(sqlite_url(tmp_path / "empty.db"))
    report = compute_monitor(empty, since=SINCE, now=NOW)
    for group in [*report.groups, report.overall]:
        for name, figure in group.figures.items():
            assert figure.value is None and figure.reason, (group.key, name)


def test_cli_table_json_and_help(engine: Engine, tmp_path: Path) -> None:
    env = {"RAGTRIAGE__STORE__URL": str(engine.url), "COLUMNS": "80"}
    home = ["--home", str(tmp_path / "home")]
    runner = CliRunner()
    result = runner.invoke(cli, ["monitor", "--since", "2026-11-02", *home], env=env)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(line.startswith("2026-11-02") and "33.3%" in line for line in lines)
    assert "rates per day" in result.output and "\x1b[" not in result.output  # a pipe: no colour codes
    result = runner.invoke(
        cli, ["monitor", "--since", "2026-11-02", "--by", "version", "--json", *home], env=env
    )
    data = json.loads(result.output)
    assert data["by"] == "version" and set(data["definitions"]) == set(DEFINITIONS)
    assert data["overall"]["figures"]["first_day_recall"]["count"] >= 0
    helped = runner.invoke(cli, ["monitor", "--help"], env=env)
    assert all(name in helped.output for name in DEFINITIONS)


def test_an_empty_window_names_where_the_stored_requests_are(engine: Engine, tmp_path: Path) -> None:
    env = {"RAGTRIAGE__STORE__URL": str(engine.url), "COLUMNS": "80"}
    home = ["--home", str(tmp_path / "home")]
    result = CliRunner().invoke(cli, ["monitor", "--since", "2026-12-01", "--no-charts", *home], env=env)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "no stored request since 2026-12-01 00:00 UTC" in text
    assert "the stored requests are from 2026-11-02 to 2026-11-03: try --since 2026-11-02" in text

    empty_home = ["--home", str(tmp_path / "empty")]
    result = CliRunner().invoke(cli, ["monitor", "--no-charts", *empty_home], env={"COLUMNS": "80"})
    assert "the store holds no request yet: ingest logs with `ragtriage logs ingest FILE`" in " ".join(
        result.output.split()
    )


def test_days_without_requests_or_figures_are_named_once_not_one_row_each(
    engine: Engine, tmp_path: Path
) -> None:
    env = {"RAGTRIAGE__STORE__URL": str(engine.url), "COLUMNS": "80"}
    home = ["--home", str(tmp_path / "home")]
    result = CliRunner().invoke(cli, ["monitor", "--since", "2026-10-25", "--no-charts", *home], env=env)
    assert result.exit_code == 0, result.output
    rows = [m.group(1) for m in re.finditer(r"^(\d{4}-\d\d-\d\d|all) +\d", result.output, re.M)]
    assert rows[0] == "2026-11-02" and rows[-1] == "all" and "2026-10-25" not in rows
    assert "no stored request in this group (2026-10-25 … 2026-11-01," in " ".join(result.output.split())
    # The JSON keeps every day.
    data = json.loads(
        CliRunner().invoke(cli, ["monitor", "--since", "2026-10-25", "--json", *home], env=env).output
    )
    assert data["groups"][0]["key"] == "2026-10-25" and data["groups"][0]["requests"] == 0


def test_requests_without_a_pipeline_version_are_shown_as_unversioned(engine: Engine, tmp_path: Path) -> None:
    env = {"RAGTRIAGE__STORE__URL": str(engine.url), "COLUMNS": "80"}
    home = ["--home", str(tmp_path / "home")]
    result = CliRunner().invoke(
        cli, ["monitor", "--since", "2026-11-02", "--by", "version", "--no-charts", *home], env=env
    )
    assert result.exit_code == 0, result.output
    rows = re.findall(r"^(\S+) +(\d+) ", result.output, re.M)
    assert ("unversioned", "1") in rows and not any(key == "-" for key, _ in rows)
    assert "unversioned = requests that logged no pipeline_version" in " ".join(result.output.split())
    sampled = CliRunner().invoke(
        cli, ["queue", "sample", "--n", "7", "--since", "2026-11-02", "--by", "version", *home], env=env
    )
    assert sampled.exit_code == 0, sampled.output
    assert re.search(r"^unversioned +│", sampled.output, re.M) and not re.search(r"^- ", sampled.output, re.M)


def test_a_cjk_pipeline_version_is_measured_in_terminal_cells(engine: Engine) -> None:
    from rich.cells import cell_len

    from ragtriage.render.fit import plain_lines
    from ragtriage.render.monitor_view import monitor_renderable

    report = compute_monitor(engine, by="version", since=SINCE, now=NOW)
    wide = "生产版本二〇二六年十一月发布"  # 14 characters, 28 cells
    report = report.model_copy(
        update={"groups": [g.model_copy(update={"key": wide}) if g.key == "v1" else g for g in report.groups]}
    )
    lines = plain_lines([monitor_renderable(report, 80, color=False, charts=False)], 80)
    assert any(wide in line for line in lines)
    assert all(cell_len(line) <= 80 for line in lines), lines
    assert "…" not in "\n".join(lines)  # nothing cut to make it fit
