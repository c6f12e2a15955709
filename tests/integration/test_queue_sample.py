"""`queue sample`: stratified draws of unflagged requests on a real SQLite store with ingested logs."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.engine import Engine

from ragtriage.cli import cli
from ragtriage.eval.buckets import case_buckets
from ragtriage.eval.cases import EvalCase
from ragtriage.logs.ingest import ingest_files
from ragtriage.logs.queue import list_queue
from ragtriage.store.db import make_engine, read_session, sqlite_url
from ragtriage.store.log_tables import TriageAuditRow
from ragtriage.triage.sampling import allocate, sample_requests

SINCE = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _write_log(path: Path) -> list[str]:
    """30 unflagged requests over 3 days (20/6/4) with UUID ids, 2 versions, plus 3 bad-rated ones."""
    lines: list[dict[str, Any]] = []
    ids = []
    for day, count in ((2, 20), (3, 6), (4, 4)):
        for i in range(count):
            request_id = str(uuid.UUID(int=day * 1000 + i))
            ids.append(request_id)
            lines.append(
                {
                    "request_id": request_id,
                    "ts": f"2026-11-0{day}T0{i % 10}:00:00Z",
                    "raw_query": f"查询 {day}-{i}",
                    "pipeline_version": "v2" if i % 2 else "v1",
                    "bm25_results": ["c1"],
                }
            )
    for i in range(3):  # flagged by the bad-rating rule: never sampled
        lines.append(
            {
                "request_id": 900 + i,
                "ts": "2026-11-02T12:00:00Z",
                "raw_query": "差评",
                "user_feedback": "down",
            }
        )
    path.write_text(
        "\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\n", encoding="utf-8"
    )
    return ids


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = make_engine(sqlite_url(tmp_path / "store.db"))
    _write_log(tmp_path / "requests.jsonl")
    report = ingest_files(engine, [tmp_path / "requests.jsonl"])
    assert report.ingested == 33 and report.flagged == 3
    return engine


def test_allocation_is_proportional_and_adds_up() -> None:
    # Hand-computed: 10 over 20/6/4 → quotas 6.67/2/1.33 → floors 6/2/1, one more to the largest remainder.
    assert allocate({"a": 20, "b": 6, "c": 4}, 10) == {"a": 7, "b": 2, "c": 1}
    assert allocate({"a": 2, "b": 1}, 50) == {"a": 2, "b": 1}
    assert sum(allocate({"x": 7, "y": 7, "z": 7}, 10).values()) == 10


def test_sample_is_stratified_seeded_and_never_repeats(engine: Engine) -> None:
    first = sample_requests(engine, 10, since=SINCE, seed=7)
    assert first.population == 30 and first.drawn == 10
    assert {s.stratum: (s.population, s.drawn) for s in first.strata} == {
        "2026-11-02": (20, 7),
        "2026-11-03": (6, 2),
        "2026-11-04": (4, 1),
    }
    page = list_queue(engine, reason="sampled", limit=100)
    assert page.total == 10 and {item.request_id for item in page.items} == set(first.request_ids)
    assert all(item.status == "new" and item.reasons == ["sampled"] for item in page.items)
    # The same seed again draws from what is left: nothing repeats.
    second = sample_requests(engine, 10, since=SINCE, seed=7)
    assert second.population == 20 and not set(second.request_ids) & set(first.request_ids)
    with read_session(engine) as session:
        audit = session.execute(select(TriageAuditRow).where(TriageAuditRow.action == "flag")).scalars().all()
    assert len([a for a in audit if a.user == "sample"]) == 20


def test_same_seed_same_store_same_draw(tmp_path: Path) -> None:
    draws = []
    for name in ("a", "b"):
        engine = make_engine(sqlite_url(tmp_path / f"{name}.db"))
        _write_log(tmp_path / f"{name}.jsonl")
        ingest_files(engine, [tmp_path / f"{name}.jsonl"])
        draws.append(sample_requests(engine, 5, since=SINCE, by="version", seed=42).request_ids)
    assert draws[0] == draws[1]


def test_by_version_and_bad_flagged_requests_are_excluded(engine: Engine) -> None:
    report = sample_requests(engine, 100, since=SINCE, by="version", seed=1)
    assert {s.stratum: s.population for s in report.strata} == {
        "v1": 15,
        "v2": 15,
    }  # even i → v1, odd → v2 over 20/6/4
    assert report.drawn == 30 and not any(rid.startswith("90") for rid in report.request_ids)


def test_promoted_sample_carries_the_origin_bucket() -> None:
    case = EvalCase(case_id="c", query="怎么报销差旅费用", gold={"x": 1})
    assert "origin:sampled" in case_buckets(case, origin="sampled")
    assert not any(b.startswith("origin:") for b in case_buckets(case))


def test_cli_prints_strata_and_json(engine: Engine, tmp_path: Path) -> None:
    runner = CliRunner()
    home = ["--home", str(tmp_path / "home")]
    db_url = str(engine.url)
    env = {"RAGTRIAGE__STORE__URL": db_url}
    nothing = runner.invoke(cli, ["queue", "--reason", "sampled", *home], env=env)
    assert "sampled requests come from `ragtriage queue sample" in nothing.output  # before any draw
    result = runner.invoke(
        cli, ["queue", "sample", "--n", "3", "--since", "2026-11-01", "--seed", "5", *home], env=env
    )
    assert result.exit_code == 0, result.output
    assert "2026-11-02" in result.output and "seed 5" in result.output
    result = runner.invoke(
        cli, ["queue", "sample", "--n", "3", "--since", "2026-11-01", "--json", *home], env=env
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["drawn"] == 3
    listed = runner.invoke(cli, ["queue", "--reason", "sampled", *home], env=env)
    assert listed.exit_code == 0 and "of 6" in listed.output
    empty = runner.invoke(cli, ["queue", "sample", "--since", "2030-01-01", *home], env=env)
    assert empty.exit_code == 0
    # The hint says where the stored requests are, so the user's next command finds them.
    assert "no unflagged request since 2030-01-01 00:00 UTC" in empty.output
    assert "the stored requests are from 2026-11-02 to" in " ".join(empty.output.split())
    assert "try --since 2026-11-02" in " ".join(empty.output.split())


def test_a_draw_when_every_request_is_taken_says_so_not_try_a_longer_since(
    engine: Engine, tmp_path: Path
) -> None:
    env = {"RAGTRIAGE__STORE__URL": str(engine.url), "COLUMNS": "200"}
    home = ["--home", str(tmp_path / "home")]
    runner = CliRunner()
    first = runner.invoke(cli, ["queue", "sample", "--n", "1000", "--since", "2026-11-01", *home], env=env)
    assert first.exit_code == 0 and "drew" in first.output
    again = runner.invoke(cli, ["queue", "sample", "--n", "5", "--since", "2026-11-01", *home], env=env)
    assert again.exit_code == 0, again.output
    said = " ".join(again.output.split())
    assert "no unflagged request since 2026-11-01 00:00 UTC: every stored request from 2026-11-0" in said
    assert "is taken (flagged or drawn before); ingest newer logs" in said and "longer --since" not in said
