"""Benchmark Parquet and CSV request logs: the same synthetic requests as JSONL, Parquet and CSV,
each ingested in this process into a fresh SQLite store.

Prints rows/s per format and the ratio to the JSONL ingest of the same rows in the same run (the
in-run baseline), CPU µs per row and the peak RSS of each ingest (each runs in its own process).
The Parquet file is written by Arrow's own JSON reader (structs and lists inferred), the CSV by
the csv module (objects and lists as JSON text).

    .venv/bin/python scripts/bench_ingest_tables.py --lines 100000 --workdir /tmp/rt-bench-tables
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import generate  # noqa: E402 (the same synthetic lines as the JSONL benchmark)

from ragtriage.logs.ingest import ingest_files  # noqa: E402
from ragtriage.store.db import make_engine, sqlite_url  # noqa: E402


def write_tables(jsonl: Path) -> tuple[Path, Path]:
    """The JSONL as Parquet (Arrow infers the nested types) and as CSV (nested values as JSON)."""
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    parquet, table_csv = jsonl.with_suffix(".parquet"), jsonl.with_suffix(".csv")
    if not parquet.exists():
        pq.write_table(pa_json.read_json(jsonl), parquet)
    if not table_csv.exists():
        with jsonl.open(encoding="utf-8") as lines:
            columns = list(dict.fromkeys(key for line in lines for key in json.loads(line)))
        with jsonl.open(encoding="utf-8") as lines, table_csv.open("w", encoding="utf-8", newline="") as out:
            writer = csv.DictWriter(out, columns)
            writer.writeheader()
            for line in lines:
                record = json.loads(line)
                writer.writerow(
                    {
                        k: json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v
                        for k, v in record.items()
                    }
                )
    return parquet, table_csv


def ingest_once(path: Path, workdir: Path) -> dict[str, float]:
    """Ingest `path` into a fresh store in a child process (so that its peak memory is its own)."""
    child = subprocess.run(
        [sys.executable, __file__, "--ingest-one", str(path), "--workdir", str(workdir)],
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(child.stdout.splitlines()[-1]))


def _peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: its own since exec, unlike ru_maxrss, which a child inherits)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _ingest_here(path: Path, workdir: Path) -> dict[str, float]:
    db_path = workdir / f"bench-tables-{path.suffix[1:]}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    engine = make_engine(sqlite_url(db_path))
    started, cpu_started = time.perf_counter(), time.process_time()
    report = ingest_files(engine, [path])
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    engine.dispose()
    return {
        "seconds": seconds,
        "cpu": cpu,
        "rows": report.read,
        "flagged": report.flagged,
        "reconciles": report.reconciles() and report.ingested == report.read,
        "peak_rss_mb": _peak_rss_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    """Generate (once), convert (once), ingest each format, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ragtriage-bench"))
    parser.add_argument("--ingest-one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.ingest_one is not None:
        print(json.dumps(_ingest_here(args.ingest_one, args.workdir)))
        return 0
    jsonl = args.workdir / f"requests-{args.lines}.jsonl"
    if not jsonl.exists():
        generate(jsonl, args.lines)
    parquet, table_csv = write_tables(jsonl)
    figures = {
        name: ingest_once(path, args.workdir)
        for name, path in (("jsonl", jsonl), ("parquet", parquet), ("csv", table_csv))
    }
    base = figures["jsonl"]
    base_rate = base["rows"] / base["seconds"]
    for name, run in figures.items():
        rate = run["rows"] / run["seconds"]
        print(
            f"{name:>8}: {rate:,.0f} rows/s  {rate / base_rate:.2f} × jsonl  "
            f"{run['cpu'] / run['rows'] * 1e6:.0f} CPU µs/row  peak RSS {run['peak_rss_mb']:.0f} MB  "
            f"flagged {run['flagged']:.0f} (jsonl {base['flagged']:.0f})  reconciles {bool(run['reconciles'])}"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")
    for name in ("parquet", "csv"):
        run = figures[name]
        rate = run["rows"] / run["seconds"]
        print(
            f"RESULT name=ingest_{name}_rate value={rate:.0f} unit=rows/s "
            f"ratio={rate / base_rate:.3f} baseline=jsonl_ingest lines={run['rows']:.0f}"
        )
        print(f"RESULT name=ingest_{name}_peak_memory value={run['peak_rss_mb']:.0f} unit=MB measure=RSS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
