"""Ingesting with worker processes (each parses and writes, in file order) gives exactly what
ingesting in one process gives.

Same counts, same stored rows (request bodies, columns, source lines, flags with their request
times, quarantined bytes and reasons), same strict-mode and cut-gzip errors, and the workers end
when the ingest stops early or fails.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from ragtriage.errors import InputError, LogFormatError
from ragtriage.logs import ingest as ingest_module
from ragtriage.logs import worker_process
from ragtriage.logs.batch_writer import BatchWriter
from ragtriage.logs.batches import ParsedBatch
from ragtriage.logs.ingest import ingest_files
from ragtriage.logs.ingest_workers import FORK_AVAILABLE
from ragtriage.store.db import make_engine, sqlite_url
from tests.conftest import FIXTURES_DIR, TEST_DATA_DIR

pytestmark = pytest.mark.skipif(not FORK_AVAILABLE, reason="ingest workers need the fork start method")

BROKEN = FIXTURES_DIR / "logs" / "broken_lines.jsonl"
CUT_GZIP = TEST_DATA_DIR / "bad" / "logs" / "gzip_truncated.jsonl.gz"
COUNTS = ("read", "ingested", "flagged", "duplicates", "conflicts", "quarantined", "blank", "recovered")
SNAPSHOT = {
    "request_log": "SELECT request_id, ts, kb, session_hash, user_hash, raw_query, rating, escalated, body, "
    "source_line, recovered FROM request_log ORDER BY request_id",
    # A request without a time is queued at its ingest time, which differs between two runs.
    "triage_record": "SELECT t.request_id, status, reasons, CASE WHEN l.ts IS NULL THEN 'ingest time' "
    "ELSE t.request_ts END, revision FROM triage_record t JOIN request_log l USING (request_id) "
    "ORDER BY t.request_id",
    "log_quarantine": "SELECT line_no, kind, reason, raw, raw_hash FROM log_quarantine ORDER BY line_no",
    "log_conflict": "SELECT request_id, line_no, body, body_hash FROM log_conflict ORDER BY line_no",
}


def _engine(tmp_path: Path, name: str) -> Engine:
    return make_engine(sqlite_url(tmp_path / f"{name}.db"))


def _snapshot(engine: Engine) -> dict[str, list[Any]]:
    with engine.connect() as connection:
        return {
            table: [tuple(row) for row in connection.execute(text(sql))] for table, sql in SNAPSHOT.items()
        }


def _follow_up_file(tmp_path: Path) -> Path:
    """Sessions whose follow-ups cross batch boundaries, a duplicate, a conflict and bad lines."""
    lines = []
    for i in range(40):
        minute = 3 * i
        lines.append(
            f'{{"request_id":"f{i}","raw_query":"q{i}","session":"s{i % 3}",'
            f'"ts":"2026-10-01T10:{minute // 60:02d}:{minute % 60:02d}+08:00"}}'
        )
    lines += ['{"request_id":"f1","raw_query":"changed","session":"s1","ts":"2026-10-01T10:00:03+08:00"}']
    lines += ['{"request_id":"f2","raw_query":"q2","session":"s2","ts":"2026-10-01T10:00:06+08:00"}']
    lines += ["", "{broken", '{"request_id":"nan","raw_query":"q","latency_ms":NaN}']
    path = tmp_path / "follow_ups.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["broken_lines.jsonl", "broken_lines.jsonl.gz", "follow_ups"])
def test_worker_and_in_process_parsing_store_the_same(tmp_path: Path, name: str) -> None:
    path = _follow_up_file(tmp_path) if name == "follow_ups" else FIXTURES_DIR / "logs" / name
    results = []
    for mode in (False, True):
        engine = _engine(tmp_path, f"mode-{mode}")
        report = ingest_files(engine, [path], batch_size=4, use_workers=mode)
        again = ingest_files(engine, [path], batch_size=4, use_workers=mode)
        assert report.reconciles() and again.reconciles() and again.ingested == 0
        results.append(
            ({k: getattr(report, k) for k in COUNTS}, report.quarantined_by_kind, _snapshot(engine))
        )
    assert results[0] == results[1]
    assert results[1][2]["triage_record"], "the fixture must flag something"


def test_strict_mode_in_the_worker_stops_at_the_same_line(tmp_path: Path) -> None:
    messages = []
    for mode in (False, True):
        engine = _engine(tmp_path, f"strict-{mode}")
        with pytest.raises(LogFormatError) as caught:
            ingest_files(engine, [BROKEN], strict=True, use_workers=mode)
        messages.append((str(caught.value), _snapshot(engine)))
    assert messages[0] == messages[1]
    assert messages[1][0].startswith(f"{BROKEN}:2: NaN is not valid JSON")
    assert multiprocessing.active_children() == []


def test_cut_gzip_in_the_worker_is_an_input_error_after_storing_what_came_before(tmp_path: Path) -> None:
    outcomes = []
    for mode in (False, True):
        engine = _engine(tmp_path, f"gzip-{mode}")
        with pytest.raises(InputError) as caught:
            ingest_files(engine, [CUT_GZIP], use_workers=mode)
        outcomes.append((str(caught.value), _snapshot(engine)))
    assert outcomes[0] == outcomes[1]
    assert "cut off after line" in outcomes[1][0]


def test_stop_request_ends_the_worker(tmp_path: Path) -> None:
    path = _follow_up_file(tmp_path)
    engine = _engine(tmp_path, "stop")
    report = ingest_files(engine, [path], batch_size=4, use_workers=True, should_stop=lambda: True)
    assert report.stopped and report.read == 4 and report.reconciles()
    assert multiprocessing.active_children() == []


def test_a_small_file_then_a_big_one_share_one_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The small file is written in this process, the big one by workers: the first must be
    # committed before the workers take the write lock (else they would wait for it in vain).
    monkeypatch.setattr(ingest_module, "PARALLEL_MIN_BYTES", 2000)
    small = tmp_path / "small.jsonl"
    small.write_text('{"request_id":"s0","raw_query":"q","feedback":{"rating":"down"}}\n', encoding="utf-8")
    big = _follow_up_file(tmp_path)
    assert big.stat().st_size >= 2000 > small.stat().st_size
    engine = _engine(tmp_path, "mixed")
    report = ingest_files(engine, [small, big], batch_size=8)
    alone = ingest_files(_engine(tmp_path, "big-alone"), [big], batch_size=8, use_workers=False)
    assert report.reconciles() and report.read == alone.read + 1
    assert report.ingested == alone.ingested + 1 and report.flagged == alone.flagged + 1
    assert multiprocessing.active_children() == []


def test_a_failing_worker_raises_with_its_traceback_and_leaves_no_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_write(self: BatchWriter, source: str, batch: ParsedBatch, *rest: object) -> None:
        raise OSError("disk on fire")

    # Workers are forked, so they inherit the patched writer (a fake for the failure path only).
    monkeypatch.setattr(BatchWriter, "write", broken_write)
    engine = _engine(tmp_path, "crash")
    with pytest.raises(RuntimeError, match="(?s)an ingest worker failed.*disk on fire"):
        ingest_files(engine, [_follow_up_file(tmp_path)], batch_size=4, use_workers=True)
    assert multiprocessing.active_children() == []


def test_a_file_that_shrinks_under_the_workers_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def short_read(fd: int, length: int, offset: int) -> bytes:
        return b""  # what a file truncated after its pieces were found gives

    # Workers are forked, so they inherit the patched read (a fake for the failure path only).
    monkeypatch.setattr(worker_process.os, "pread", short_read)
    engine = _engine(tmp_path, "shrunk")
    with pytest.raises(InputError, match="changed while it was being ingested"):
        ingest_files(engine, [_follow_up_file(tmp_path)], batch_size=4, use_workers=True)
    assert multiprocessing.active_children() == []
