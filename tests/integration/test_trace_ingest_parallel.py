"""Trace files read by forked readers and assembled by a forked assembler (`formats.parallel`)
give exactly what one process gives: the same requests and rejections in the same order, the same
stored rows, notes that name only a span id resolved across processes, and the same errors.

Pieces are made tiny here (two lines), so that traces cross pieces, readers and spill rows.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from ragtriage.config.settings import OtelSettings
from ragtriage.errors import InputError, LogFormatError
from ragtriage.logs.formats import parallel
from ragtriage.logs.formats.assemble import Assembled, Rejected
from ragtriage.logs.formats.detect import detect
from ragtriage.logs.formats.read import read_traces
from ragtriage.logs.ingest import ingest_files
from ragtriage.store.db import make_engine, sqlite_url
from tests.conftest import FIXTURES_DIR
from tests.trace_producers import make_tracer, otlp_lines, phoenix_annotations, phoenix_page, record_request

OTLP_FIXTURE = FIXTURES_DIR / "logs" / "requests.otlp.jsonl.gz"

pytestmark = pytest.mark.skipif(not parallel.FORK_AVAILABLE, reason="needs fork")


@pytest.fixture(autouse=True)
def _tiny_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "PIECE_LINES", 2)


def _spans(count: int, seed: int = 5) -> Any:
    tracer, exporter = make_tracer(seed=seed, service_version="svc-2")
    for i in range(count):
        record_request(
            tracer,
            {
                "request_id": f"7d0c{i:04d}-5b7e-4c1e-9a51-3d2f8e6b7c10",
                "ts": f"2026-11-03T09:{i % 60:02d}:00.5Z",
                "session": f"s-{i % 3}",
                "raw_query": f"年假怎么休 {i}",
                "answer": "见制度第三条。",
                "stages": {
                    "bm25": [
                        {"chunk_id": f"hr/leave#{i % 7}", "score": 3.5},
                        {"chunk_id": 40 + i, "score": 1.0},
                    ],
                    "dense": [{"chunk_id": f"hr/leave#{i % 5}", "score": 0.8}],
                    "fused": [f"hr/leave#{i % 7}", f"hr/leave#{i % 5}"],
                    "reranked": [{"chunk_id": f"hr/leave#{i % 5}", "score": 0.7}],
                    "final_context": [f"hr/leave#{i % 5}"],
                },
                "feedback": {"rating": "thumbs_down" if i % 4 == 0 else "up"},
            },
        )
    return exporter.get_finished_spans()


def _both(files: list[Path], **kw: Any) -> tuple[list[Assembled | Rejected], list[Assembled | Rejected]]:
    specs = [(f, *detect(f)) for f in files]
    serial = list(read_traces(specs, OtelSettings(), **kw))
    forked = list(parallel.read_traces_parallel(specs, OtelSettings(), **kw))
    return serial, forked


def test_split_files_bad_lines_and_gzip_read_the_same(tmp_path: Path) -> None:
    spans = _spans(12)
    lines = otlp_lines(spans, per_line=4).splitlines(keepends=True)
    part_a, part_b, zipped = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl.gz"
    # Odd lines in one file, even in another (every trace crosses files); a bad line and a blank
    # line in the middle, a byte-order mark first.
    part_a.write_bytes(b"\xef\xbb\xbf" + "".join(lines[0:8:2]).encode() + b"{not json\n\n")
    part_b.write_text("".join(lines[1::2]) + '{"hello": 1}\n' + "".join(lines[8::2]))
    with gzip.open(zipped, "wt") as handle:  # one piece: a gzip file is read in order
        handle.write(otlp_lines(_spans(3, seed=9), per_line=2))
    serial, forked = _both([part_a, part_b, zipped], memory_spans=5)
    assert forked == serial
    # With room for whole traces, most come from the readers' digests, the rest are assembled
    # from spans read back; one process holding everything in memory gives the same.
    assert _both([part_a, part_b, zipped]) == (serial, serial)
    assert sum(isinstance(i, Assembled) for i in serial) == 15
    assert [(i.kind, i.source, i.line_no) for i in serial if isinstance(i, Rejected)] == [
        ("invalid_json", str(part_a), 5),
        ("not_otlp", str(part_b), len(lines[1::2]) + 1),
    ]


def test_span_id_notes_find_their_trace_across_processes(tmp_path: Path) -> None:
    spans = _spans(6)
    kept, notes = phoenix_annotations(spans)
    phoenix_spans, phoenix_notes = tmp_path / "spans.json", tmp_path / "annotations.json"
    phoenix_spans.write_text(json.dumps(phoenix_page(kept), ensure_ascii=False, indent=2))
    phoenix_notes.write_text(json.dumps(notes, indent=2))
    # The annotations file is read by the other reader, and the spans are spilled by the first.
    serial, forked = _both([phoenix_spans, phoenix_notes], memory_spans=3)
    assert forked == serial
    assert len(serial) == 6 and all(isinstance(i, Assembled) for i in serial)
    assert sum(b'"rating":"down"' in i.body for i in serial if isinstance(i, Assembled)) == 2


def _rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(db) as connection:
        return {
            "requests": connection.execute(
                "SELECT request_id, ts, session_hash, raw_query, rating, body, source_file, source_line "
                "FROM request_log ORDER BY rowid"
            ).fetchall(),
            "quarantine": connection.execute(
                "SELECT source_file, line_no, kind, reason FROM log_quarantine ORDER BY id"
            ).fetchall(),
            "flags": connection.execute(
                "SELECT request_id, status, reasons, request_ts FROM triage_record ORDER BY request_id"
            ).fetchall(),
        }


def test_ingest_in_processes_stores_the_same_rows(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_lines(_spans(20), per_line=7) + "{cut\n")
    results = {}
    for use_workers in (False, True):
        db = tmp_path / f"store-{use_workers}.db"
        engine = make_engine(sqlite_url(db))
        report = ingest_files(engine, [path, OTLP_FIXTURE], use_workers=use_workers)
        again = ingest_files(engine, [path, OTLP_FIXTURE], use_workers=use_workers)
        engine.dispose()
        assert report.reconciles() and again.reconciles()
        assert (report.ingested, report.quarantined, again.duplicates) == (287, 1, 287)
        results[use_workers] = (_rows(db), report.flagged, report.quarantined_by_kind)
    assert results[True] == results[False]


def test_unreadable_gzip_raises_the_same_error(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(otlp_lines(_spans(4), per_line=2))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(otlp_lines(_spans(8, seed=4), per_line=2).encode())[:-200])
    specs = [(good, "otlp", "lines"), (cut, "otlp", "lines")]
    messages = []
    for read in (read_traces, parallel.read_traces_parallel):
        with pytest.raises(InputError, match="gzip stream is corrupt or cut off") as caught:
            list(read(specs, OtelSettings()))
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def _child_pids(parent: str | int = "self") -> list[str]:
    return [
        pid
        for task in Path(f"/proc/{parent}/task").iterdir()
        for pid in (task / "children").read_text().split()
    ]


def test_strict_mode_and_a_stop_request_end_the_same_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    tracer, exporter = make_tracer(seed=8)
    good = {"request_id": "ok-1", "ts": "2026-11-02T08:00:00Z", "raw_query": "q", "stages": {"bm25": ["c1"]}}
    record_request(tracer, good)
    record_request(tracer, {**good, "request_id": "no-retriever", "stages": {}})
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_lines(exporter.get_finished_spans(), per_line=3))
    messages = []
    for use_workers in (False, True):
        engine = make_engine(sqlite_url(tmp_path / f"strict-{use_workers}.db"))
        with pytest.raises(LogFormatError, match="no RETRIEVER") as caught:
            ingest_files(engine, [path], strict=True, use_workers=use_workers)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    # A stop request after the first batch: that batch is stored, the reading process ends.
    path.write_text(otlp_lines(_spans(30), per_line=4))
    engine = make_engine(sqlite_url(tmp_path / "stop.db"))
    report = ingest_files(engine, [path], batch_size=10, use_workers=True, should_stop=lambda: True)
    assert report.stopped and (report.read, report.ingested) == (10, 10) and report.reconciles()
    # The reading processes are gone, and so is their spill file.
    assert _child_pids() == [] and list(scratch.iterdir()) == []


# An ingest whose storing is slow (a stop check that sleeps), so it can be killed midway.
_SLOW_INGEST = """
import sys, time
from pathlib import Path
from ragtriage.logs.ingest import ingest_files
from ragtriage.store.db import make_engine, sqlite_url
engine = make_engine(sqlite_url(Path(sys.argv[2])))
ingest_files(engine, [Path(sys.argv[1])], batch_size=2, use_workers=True, should_stop=lambda: time.sleep(0.5) or False)
"""


def _wait_for(condition: Any, what: str, seconds: float = 60.0) -> Any:
    deadline = time.monotonic() + seconds
    found = None
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):  # a /proc entry that went while it was read
            found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _ended(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_killed_ingest_leaves_no_reader_and_the_next_ingest_removes_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_lines(_spans(40), per_line=2))
    environ = {**os.environ, "TMPDIR": str(scratch)}
    args = [sys.executable, "-c", _SLOW_INGEST, str(path), str(tmp_path / "killed.db")]
    ingest = subprocess.Popen(args, env=environ)
    try:
        (folder,) = _wait_for(lambda: list(scratch.glob("ragtriage-trace-ingest-*")), "the spill folder")
        readers = _wait_for(lambda: _child_pids(ingest.pid), "the reading process")
    finally:
        ingest.kill()
        ingest.wait()
    assert folder.name.startswith(f"ragtriage-trace-ingest-{ingest.pid}@{socket.gethostname()}-")
    # The reading process notices its parent is gone, removes its spill file and ends.
    _wait_for(lambda: all(_ended(pid) for pid in readers), "the reading process to end")
    assert list(folder.iterdir()) == []

    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    live_owner = scratch / f"ragtriage-trace-ingest-{os.getpid()}@{socket.gethostname()}-abcd1234"
    other_host = scratch / f"ragtriage-trace-ingest-{ingest.pid}@another-host-abcd1234"
    unknown = scratch / "ragtriage-trace-ingest-abcd1234"
    for kept in (live_owner, other_host, unknown):
        kept.mkdir()
    engine = make_engine(sqlite_url(tmp_path / "next.db"))
    report = ingest_files(engine, [path], use_workers=False)
    engine.dispose()
    assert report.reconciles() and report.ingested == 40
    assert sorted(scratch.iterdir()) == sorted([live_owner, other_host, unknown])
