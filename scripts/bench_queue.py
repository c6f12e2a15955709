"""Benchmark `queue`: first page with N requests stored and N/10 flagged (target ≤ 200 ms at 1M/100k).

The store is filled directly with driver executemany (the queue's speed does not depend on how
rows arrived); then `list_queue` is timed for the common filters, and the CLI once end to end.

    .venv/bin/python scripts/bench_queue.py --requests 1000000 --workdir /tmp/ragtriage-bench
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ragtriage.logs.queue import list_queue, parse_since
from ragtriage.store.db import make_engine, sqlite_url, write_session

STATUSES = ("new", "new", "new", "in_progress", "confirmed", "dismissed")
LABELS = ("bm25_miss", "dense_drift", "rerank_error", "alias_missing", "rewrite_error")
REASONS = ("bad_rating", "escalated", "follow_up", "empty_citations", "refusal")


def _time_text(moment: datetime) -> str:
    return moment.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def fill(db_path: Path, requests: int, flagged_every: int = 10, batch: int = 20_000) -> None:
    """Create the store and insert `requests` logged requests, every `flagged_every`-th flagged."""
    engine = make_engine(sqlite_url(db_path))
    rng = random.Random(3)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    now = _time_text(datetime.now(timezone.utc))
    for offset in range(0, requests, batch):
        request_rows: list[tuple[Any, ...]] = []
        triage_rows: list[tuple[Any, ...]] = []
        for i in range(offset, min(offset + batch, requests)):
            request_id = f"{rng.getrandbits(128):032x}"
            ts = _time_text(start + timedelta(seconds=i * 3))
            query = f"如何配置第 {i} 号服务的 apt 源"
            body = json.dumps({"request_id": request_id, "raw_query": query, "ts": ts}, ensure_ascii=False)
            request_rows.append((request_id, ts, f"{rng.getrandbits(64):016x}", query, body, now))
            if i % flagged_every == 0:
                status = rng.choice(STATUSES)
                labels = [rng.choice(LABELS)] if status != "new" else []
                reasons = json.dumps(rng.sample(REASONS, rng.randint(1, 2)))
                triage_rows.append(
                    (
                        request_id,
                        status,
                        reasons,
                        json.dumps(labels),
                        labels[0] if labels else None,
                        "[]",
                        "[]",
                        ts,
                        now,
                        now,
                        1,
                    )
                )
        with write_session(engine) as session:
            connection = session.connection()
            connection.exec_driver_sql(
                "INSERT INTO request_log (request_id, ts, session_hash, raw_query, body, ingested_at, "
                "escalated, "
                "recovered) VALUES (?, ?, ?, ?, ?, ?, 0, 0)",
                request_rows,  # type: ignore[arg-type]
            )
            connection.exec_driver_sql(
                "INSERT INTO triage_record (request_id, status, reasons, labels, primary_label, "
                "gold_chunk_ids, notes, request_ts, created_at, updated_at, revision) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                triage_rows,  # type: ignore[arg-type]
            )
    with engine.connect() as connection:
        connection.exec_driver_sql("ANALYZE")
    engine.dispose()


def _timed(call: Any, repeat: int = 5) -> tuple[float, float, int]:
    """(first call ms, median of the next calls ms, total)."""
    started = time.perf_counter()
    page = call()
    first = (time.perf_counter() - started) * 1000
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        runs.append((time.perf_counter() - started) * 1000)
    return first, statistics.median(runs), page.total


def main(argv: list[str] | None = None) -> int:
    """Fill (once) and time the queue's first page for the common filters."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ragtriage-bench"))
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    home = args.workdir / f"queue-home-{args.requests}"
    db_path = home / "ragtriage.db"
    if args.rebuild and home.exists():
        for path in home.iterdir():
            path.unlink()
    if not db_path.exists():
        home.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        fill(db_path, args.requests)
        print(f"filled {args.requests:,} requests in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    engine = make_engine(sqlite_url(db_path))
    cases = {
        "first page": lambda: list_queue(engine),
        "--status new": lambda: list_queue(engine, status="new"),
        "--status confirmed": lambda: list_queue(engine, status="confirmed"),
        "--reason escalated": lambda: list_queue(engine, reason="escalated"),
        "--label bm25_miss": lambda: list_queue(engine, label="bm25_miss"),
        "--since 2026-01-20": lambda: list_queue(engine, since=parse_since("2026-01-20")),
        "--offset 50000": lambda: list_queue(engine, offset=50_000),
    }
    figures: dict[str, Any] = {"requests": args.requests}
    for name, call in cases.items():
        first, median, total = _timed(call)
        figures[name] = {"first_ms": round(first, 1), "median_ms": round(median, 1), "total": total}
    engine.dispose()
    env = {**os.environ, "RAGTRIAGE_HOME": str(home)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ragtriage", "queue"], env=env, capture_output=True, check=True)
    figures["cli `ragtriage queue` wall ms (incl. interpreter start)"] = round(
        (time.perf_counter() - started) * 1000
    )
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:>28}: {value}")
        # Machine-readable lines for scripts/bench.py (see docs/benchmarks.md).
        first_page = figures["first page"]["median_ms"]
        worst = max(v["median_ms"] for v in figures.values() if isinstance(v, dict))
        print(f"RESULT name=queue_first_page value={first_page} unit=ms target=<=200 "
              f"requests={args.requests}")  # fmt: skip
        print(f"RESULT name=queue_worst_filter value={worst} unit=ms target=<=200 "
              f"requests={args.requests}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
