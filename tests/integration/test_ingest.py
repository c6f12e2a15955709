"""Ingest into a real SQLite store: reconciling counts, idempotency, conflicts, flags, dialects."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, inspect, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine

from ragtriage.config.settings import FlaggingSettings
from ragtriage.errors import LogFormatError
from ragtriage.logs.ingest import ingest_files, ingest_lines
from ragtriage.logs.requests import get_request, iter_requests
from ragtriage.store.db import make_engine, read_session, sqlite_url
from ragtriage.store.ingest_sql import insert_ignoring_existing
from ragtriage.store.log_tables import (
    OLD_REQUEST_LOG_SESSION_INDEX,
    REQUEST_LOG_TS_INDEX,
    LogConflictRow,
    QuarantinedLineRow,
    RequestLogRow,
    TriageRow,
)
from ragtriage.store.triage_repo import find_record
from tests.conftest import FIXTURES_DIR, live_postgres_engine

BROKEN = FIXTURES_DIR / "logs" / "broken_lines.jsonl"
EXPECTED = json.loads((FIXTURES_DIR / "logs" / "broken_lines.expected.json").read_text(encoding="utf-8"))
COUNTS = ("read", "ingested", "flagged", "duplicates", "conflicts", "quarantined", "blank", "recovered")


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return make_engine(sqlite_url(tmp_path / "store.db"))


def _line(request_id: str, **fields: Any) -> str:
    return json.dumps(
        {"request_id": request_id, "raw_query": fields.pop("raw_query", "q"), **fields}, ensure_ascii=False
    )


def _count(engine: Engine, table: Any) -> int:
    with read_session(engine) as session:
        return int(session.execute(select(func.count()).select_from(table)).scalar_one())


@pytest.mark.parametrize("name", ["broken_lines.jsonl", "broken_lines.jsonl.gz"])
def test_broken_lines_file_gives_the_expected_counts(engine: Engine, name: str) -> None:
    report = ingest_files(engine, [FIXTURES_DIR / "logs" / name], batch_size=4)
    assert {k: getattr(report, k) for k in COUNTS} == {k: EXPECTED[k] for k in COUNTS}
    assert report.quarantined_by_kind == EXPECTED["quarantined_by_kind"]
    assert report.reconciles()
    with read_session(engine) as session:
        quarantined = (
            session.execute(select(QuarantinedLineRow).order_by(QuarantinedLineRow.line_no)).scalars().all()
        )
        ids = sorted(session.execute(select(RequestLogRow.request_id)).scalars())
        flagged = {row.request_id: row.reasons for row in session.execute(select(TriageRow)).scalars()}
    assert [q.line_no for q in quarantined] == EXPECTED["quarantined_lines"]
    raw_lines = BROKEN.read_bytes().split(b"\n")
    assert all(q.raw == raw_lines[q.line_no - 1] for q in quarantined), "quarantine keeps the exact bytes"
    assert all(
        q.source_file.endswith("broken_lines.jsonl" if name.endswith("l") else name) for q in quarantined
    )
    assert ids == EXPECTED["ingested_request_ids"]
    assert flagged == EXPECTED["flagged_reasons"]
    assert get_request(engine, "bl-009").raw_query == "第一行\u2028第二行 的查询"
    assert get_request(engine, "bl-016").model_extra == {"timestamp_ms": 1762070400000, "tenant": "acme"}


def test_flat_logs_naming_the_query_and_time_their_own_way_are_ingested(
    engine: Engine, tmp_path: Path
) -> None:
    # A team's own flat JSONL (not written by ragtriage): `query`, `timestamp`, integer request ids.
    chunk = "3f1c0d2e-8a4b-4c6d-9e0f-1a2b3c4d5e6f"
    lines = [
        {
            "request_id": 1017,
            "timestamp": "2026-11-20T10:00:00Z",
            "query": "怎么安装非debian的程序",
            "vector_results": [{"chunk_id": chunk, "score": 0.88}],
            "final_context_docs": [chunk],
            "user_feedback": {"rating": "thumbs_down"},
        },
        {
            "request_id": 1018,
            "created_at": 1763632800,
            "question": "aptitude是什么",
            "bm25_results": [chunk],
            "user_feedback": "thumbs_up",
        },
    ]
    path = tmp_path / "flat.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    report = ingest_files(engine, [path])
    assert (report.read, report.ingested, report.quarantined, report.flagged) == (2, 2, 0, 1)
    first, second = get_request(engine, "1017"), get_request(engine, "1018")
    assert first.raw_query == "怎么安装非debian的程序"
    assert first.ts == datetime(2026, 11, 20, 10, tzinfo=timezone.utc)
    assert second.raw_query == "aptitude是什么"
    assert second.ts == datetime(2025, 11, 20, 10, tzinfo=timezone.utc)


def test_strict_mode_stops_at_the_first_bad_line_and_keeps_what_came_before(engine: Engine) -> None:
    with pytest.raises(LogFormatError) as caught:
        ingest_files(engine, [BROKEN], strict=True)
    assert str(caught.value).startswith(str(BROKEN) + ":2: NaN is not valid JSON — ")
    assert EXPECTED["first_strict_error"].split(":", 1)[1] in str(caught.value)
    assert _count(engine, RequestLogRow) == 1
    assert _count(engine, QuarantinedLineRow) == 0


def test_same_file_again_changes_nothing(engine: Engine) -> None:
    first = ingest_files(engine, [BROKEN])
    before = {
        t.__name__: _count(engine, t) for t in (RequestLogRow, TriageRow, QuarantinedLineRow, LogConflictRow)
    }
    again = ingest_files(engine, [BROKEN])
    after = {
        t.__name__: _count(engine, t) for t in (RequestLogRow, TriageRow, QuarantinedLineRow, LogConflictRow)
    }
    assert before == after
    assert again.ingested == 0 and again.flagged == 0
    assert again.duplicates == first.ingested + first.duplicates
    assert again.reconciles()


def test_mixed_file_reconciles_across_batches(engine: Engine, tmp_path: Path) -> None:
    lines = [_line(f"m{i}", feedback={"rating": "down" if i % 5 == 0 else "up"}) for i in range(23)]
    # m3 again without its feedback adds nothing (a duplicate); m4 with another query is a conflict.
    lines += ["", "{not json", _line("m3"), _line("m4", raw_query="changed"), "[]", "  "]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = ingest_files(engine, [path], batch_size=3)
    assert (
        report.read,
        report.ingested,
        report.merged,
        report.duplicates,
        report.conflicts,
        report.quarantined,
        report.blank,
    ) == (29, 23, 0, 1, 1, 2, 2)
    assert report.reconciles()
    assert report.flagged == 5
    assert _count(engine, LogConflictRow) == 1


def test_conflict_keeps_the_stored_body_and_the_new_one_aside(engine: Engine) -> None:
    ingest_lines(engine, [_line("c1", raw_query="first")])
    report = ingest_lines(engine, [_line("c1", raw_query="second"), _line("c1", raw_query="second")])
    assert (report.conflicts, report.duplicates, report.ingested) == (2, 0, 0)
    assert get_request(engine, "c1").raw_query == "first"
    with read_session(engine) as session:
        conflict = session.execute(select(LogConflictRow)).scalars().one()
    assert json.loads(conflict.body)["raw_query"] == "second"


def test_duplicates_inside_one_batch(engine: Engine) -> None:
    report = ingest_lines(engine, [_line("d1"), _line("d1"), _line("d1", raw_query="other")])
    assert (report.ingested, report.duplicates, report.conflicts) == (1, 1, 1)


def _ts(minutes: float) -> str:
    return (datetime(2026, 11, 2, 8, 0, tzinfo=timezone.utc) + timedelta(minutes=minutes)).isoformat()


def test_follow_up_flags_the_earlier_request_across_batches_and_files(engine: Engine) -> None:
    flagging = FlaggingSettings(follow_up_minutes=5)
    ingest_lines(
        engine, [_line("f1", session="s", ts=_ts(0)), _line("f9", session="t", ts=_ts(0))], flagging=flagging
    )
    assert find_record(engine, "f1") is None
    # f2 arrives in a later ingest, 3 minutes after f1: f1 is flagged; f3 comes 20 minutes later: nothing.
    report = ingest_lines(
        engine,
        [_line("f2", session="s", ts=_ts(3)), _line("f3", session="s", ts=_ts(23))],
        flagging=flagging,
        batch_size=1,
    )
    record = find_record(engine, "f1")
    assert record is not None and record.reasons == ["follow_up"]
    assert find_record(engine, "f2") is None and find_record(engine, "f3") is None
    assert report.flagged == 1
    # An older request of the same session logged late is followed by f1 within the window.
    ingest_lines(engine, [_line("f0", session="s", ts=_ts(-2))], flagging=flagging)
    earlier = find_record(engine, "f0")
    assert earlier is not None and earlier.reasons == ["follow_up"]


def test_follow_up_adds_a_reason_to_an_already_flagged_request(engine: Engine) -> None:
    flagging = FlaggingSettings(follow_up_minutes=5)
    ingest_lines(
        engine, [_line("g1", session="s", ts=_ts(0), feedback={"rating": "down"})], flagging=flagging
    )
    ingest_lines(engine, [_line("g2", session="s", ts=_ts(1))], flagging=flagging)
    record = find_record(engine, "g1")
    assert record is not None and record.reasons == ["bad_rating", "follow_up"] and record.revision == 2


@pytest.mark.parametrize(
    ("fields", "reasons"),
    [
        ({"feedback": {"rating": "thumbs_down"}}, ["bad_rating"]),
        ({"feedback": {"rating": 1}}, ["bad_rating"]),
        ({"feedback": {"rating": "up", "escalated": True}}, ["escalated"]),
        ({"feedback": {"follow_up": "还是不行"}}, ["follow_up"]),
        ({"citations": []}, ["empty_citations"]),
        ({"answer": "抱歉，没有找到相关内容"}, ["refusal"]),
        ({"answer": "fine", "confidence": 0.1}, ["low_confidence"]),
        ({"answer": "fine", "citations": ["c1"], "feedback": {"rating": "up"}}, []),
    ],
)
def test_flagging_rules(engine: Engine, fields: dict[str, Any], reasons: list[str]) -> None:
    ingest_lines(engine, [_line("x", **fields)], flagging=FlaggingSettings(min_confidence=0.5))
    record = find_record(engine, "x")
    assert (record.reasons if record else []) == reasons
    if record is not None:
        assert record.status == "new"


def test_rules_can_be_switched_off(engine: Engine) -> None:
    flagging = FlaggingSettings(bad_ratings=[], escalation=False, empty_citations=False, refusal_markers=[])
    line = _line("y", citations=[], answer="抱歉", feedback={"rating": "down", "escalated": True})
    assert ingest_lines(engine, [line], flagging=flagging).flagged == 0


def test_iter_requests_pages_through_everything(engine: Engine) -> None:
    ingest_lines(engine, [_line(f"p{i:03d}") for i in range(25)])
    assert [r.request_id for r in iter_requests(engine, batch_size=7)] == [f"p{i:03d}" for i in range(25)]


def test_insert_statement_per_dialect() -> None:
    table = RequestLogRow.__table__  # type: ignore[attr-defined]
    pg = postgresql.insert(table).on_conflict_do_nothing().compile(dialect=postgresql.dialect())
    lite = sqlite.insert(table).on_conflict_do_nothing().compile(dialect=sqlite.dialect())
    assert "ON CONFLICT DO NOTHING" in str(pg) and "ON CONFLICT DO NOTHING" in str(lite)
    assert "%(request_id)s" in str(pg) and "?" in str(lite)


def test_unsupported_dialect_is_a_store_error(tmp_path: Path) -> None:
    from ragtriage.errors import StoreError

    class FakeConnection:
        class dialect:  # noqa: N801
            name = "mysql"

    with pytest.raises(StoreError, match="SQLite and PostgreSQL"):
        insert_ignoring_existing(FakeConnection(), RequestLogRow.__table__, [{"x": 1}])  # type: ignore[arg-type, attr-defined]


def test_postgresql_url_is_accepted_without_connecting() -> None:
    from sqlalchemy.engine import make_url

    url = make_url("postgresql+psycopg://triage:secret@db.internal:5432/ragtriage")
    assert url.get_backend_name() == "postgresql" and url.get_driver_name() == "psycopg"


@pytest.mark.postgres
def test_ingest_into_live_postgresql() -> None:
    engine = live_postgres_engine()
    suffix = os.urandom(4).hex()
    lines = [_line(f"pg-{suffix}-{i}", feedback={"rating": "down"}) for i in range(5)]
    first = ingest_lines(engine, lines)
    again = ingest_lines(engine, lines)
    assert (first.ingested, first.flagged, again.duplicates) == (5, 5, 5)
    assert get_request(engine, f"pg-{suffix}-0").raw_query == "q"


def test_a_store_from_before_the_time_index_gets_it_on_the_next_ingest(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DROP INDEX {REQUEST_LOG_TS_INDEX}")
        connection.exec_driver_sql(
            f"CREATE INDEX {OLD_REQUEST_LOG_SESSION_INDEX} ON request_log (session_hash, ts)"
        )
    flagging = FlaggingSettings(follow_up_minutes=5)
    ingest_lines(
        engine, [_line("m1", session="s", ts=_ts(0)), _line("m2", session="s", ts=_ts(2))], flagging=flagging
    )
    names = {index["name"] for index in inspect(engine).get_indexes("request_log")}
    assert REQUEST_LOG_TS_INDEX in names and OLD_REQUEST_LOG_SESSION_INDEX not in names
    record = find_record(engine, "m1")
    assert record is not None and record.reasons == ["follow_up"]


@pytest.mark.postgres
def test_files_into_live_postgresql_count_what_sqlite_counts(tmp_path: Path) -> None:
    engine = live_postgres_engine()
    suffix = os.urandom(4).hex()
    lines = [
        _line(f"pgw-{suffix}-{i}", session=f"s-{suffix}-{i % 3}", ts=_ts(i), feedback={"rating": "down"})
        for i in range(30)
    ]
    lines += [_line(f"pgw-{suffix}-1", raw_query="changed"), "{broken"]
    path = tmp_path / "pg.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    flagging = FlaggingSettings(follow_up_minutes=5)
    report = ingest_files(engine, [path], batch_size=4, flagging=flagging)
    alone = ingest_files(
        make_engine(sqlite_url(tmp_path / "alone.db")), [path], batch_size=4, flagging=flagging
    )
    counts = ("read", "ingested", "flagged", "duplicates", "conflicts", "quarantined")
    assert [getattr(report, k) for k in counts] == [getattr(alone, k) for k in counts]
    assert report.reconciles() and report.conflicts == 1 and report.ingested == 30
    record = find_record(engine, f"pgw-{suffix}-0")
    assert record is not None and record.reasons == ["bad_rating", "follow_up"]
