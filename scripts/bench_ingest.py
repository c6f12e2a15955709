"""Benchmark `logs ingest`: N synthetic request-log lines of about 1 KB into a fresh SQLite store.

Prints lines/s end to end, peak memory (max RSS), and the ratio to a plain `json.loads` loop over
the same file measured in the same run (so a busy machine shows up in both numbers).

    .venv/bin/python scripts/bench_ingest.py --lines 1000000 --workdir /tmp/ragtriage-bench
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
from pss_sampler import PssSampler

from ragtriage.config.settings import FlaggingSettings
from ragtriage.logs.ingest import ingest_files
from ragtriage.store.db import make_engine, sqlite_url

QUERIES = [
    "如何在 Debian 上配置 apt 源镜像",
    "dpkg 报错 依赖关系问题 怎么办",
    "怎样升级到新的稳定版",
    "Debian 的发布周期是多久",
    "如何查看已安装软件包的版本",
    "systemd 服务开机自启怎么设置",
    "网络接口配置文件在哪里",
    "如何添加一个新用户并给 sudo 权限",
    "为什么 apt update 很慢",
    "怎么把 locale 改成 zh_CN.UTF-8",
]
ANSWERS = [
    "您可以编辑 /etc/apt/sources.list 文件，把镜像地址换成离您较近的服务器，然后运行 apt update。",
    "抱歉，没有找到相关内容。",
    "请先运行 apt -f install 修复依赖，再重新安装该软件包；如仍失败，请查看 /var/log/apt/term.log。",
]


def generate(path: Path, lines: int, seed: int = 7) -> None:
    """Write `lines` deterministic v1 log lines of about 1 KB (sessions of 1–4 requests, ~10% badcases)."""
    rng = random.Random(seed)
    start = datetime(2026, 10, 1, tzinfo=timezone.utc)
    moment = start
    written = 0
    with open(path, "wb") as handle:
        while written < lines:
            session = f"{rng.getrandbits(64):016x}"
            user = f"{rng.getrandbits(48):012x}"
            moment += timedelta(seconds=rng.randint(1, 6))
            ts = moment
            for _ in range(rng.randint(1, 3)):
                if written >= lines:
                    break
                # About one request in twenty is a quick follow-up (within the 5-minute window).
                ts += timedelta(minutes=rng.uniform(1, 4) if rng.random() < 0.08 else rng.uniform(10, 90))
                ids = [f"faq/q{rng.randint(1, 900)}#c{rng.randint(0, 9)}" for _ in range(24)]
                answer = ANSWERS[1] if rng.random() < 0.03 else rng.choice((ANSWERS[0], ANSWERS[2]))
                rating = "down" if rng.random() < 0.04 else ("up" if rng.random() < 0.3 else None)
                record = {
                    "schema_version": 1,
                    "request_id": f"{rng.getrandbits(128):032x}",
                    "ts": ts.isoformat().replace("+00:00", "Z"),
                    "kb": "debian-faq",
                    "session": session,
                    "user": user,
                    "raw_query": rng.choice(QUERIES),
                    "rewrite": {
                        "normalized_query": "如何 配置 apt 源",
                        "keywords": ["apt", "源"],
                        "aliases": {"源": ["软件源"]},
                        "sub_queries": [],
                        "mode": "rules",
                    },
                    "stages": {
                        "bm25": [{"chunk_id": c, "score": round(rng.random() * 20, 3)} for c in ids[:6]],
                        "dense": [{"chunk_id": c, "score": round(rng.random(), 4)} for c in ids[6:12]],
                        "fused": ids[12:18],
                        "reranked": ids[18:22],
                        "final_context": ids[18:21],
                    },
                    "answer": answer,
                    "citations": [] if rng.random() < 0.02 else ids[18:20],
                    "feedback": {
                        "rating": rating,
                        "reason": None,
                        "escalated": rng.random() < 0.01,
                        "follow_up": None,
                    },
                    "latency_ms": round(rng.uniform(200, 2500), 1),
                    "pipeline_version": "2026.10.3",
                    "config_hash": "ab12cd34ef56",
                }
                handle.write(orjson.dumps(record) + b"\n")
                written += 1


def json_loads_rate(path: Path) -> tuple[float, float]:
    """Lines per wall second and per CPU second of a plain `for line in file: json.loads(line)` loop."""
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    count = 0
    with open(path, "rb") as handle:
        for line in handle:
            json.loads(line)
            count += 1
    return count / (time.perf_counter() - started), count / (_cpu_seconds() - cpu_started)


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def main(argv: list[str] | None = None) -> int:
    """Generate (once), measure json.loads, ingest into a fresh store, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ragtriage-bench"))
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    log_path = args.workdir / f"requests-{args.lines}.jsonl"
    if not log_path.exists():
        generate(log_path, args.lines)
    size_mb = log_path.stat().st_size / 1e6
    baseline, baseline_cpu = json_loads_rate(log_path)
    db_path = args.workdir / f"bench-ingest-{args.lines}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    engine = make_engine(sqlite_url(db_path))
    sampler = PssSampler(Path(f"{db_path}-wal"))
    sampler.start()
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    report = ingest_files(engine, [log_path], flagging=FlaggingSettings())
    elapsed, cpu = time.perf_counter() - started, _cpu_seconds() - cpu_started
    rate = report.read / elapsed
    started = time.perf_counter()
    again = ingest_files(engine, [log_path], flagging=FlaggingSettings())
    again_rate = again.read / (time.perf_counter() - started)
    engine.dispose()
    peak_pss_mb = sampler.stop()
    self_peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_mb = peak_pss_mb
    figures = {
        "lines": report.read,
        "file_mb": round(size_mb, 1),
        "avg_line_bytes": round(size_mb * 1e6 / max(report.read, 1)),
        "ingest_lines_per_s": round(rate),
        "json_loads_lines_per_s": round(baseline),
        "ratio_to_json_loads": round(rate / baseline, 3),
        "ingest_cpu_s": round(cpu, 2),
        "ingest_cpu_us_per_line": round(cpu / max(report.read, 1) * 1e6, 1),
        "ingest_lines_per_cpu_s": round(report.read / cpu),
        "cpu_ratio_to_json_loads": round((report.read / cpu) / baseline_cpu, 3),
        "ingest_wall_s": round(elapsed, 2),
        "reingest_lines_per_s": round(again_rate),
        "peak_pss_mb": round(peak_pss_mb, 1),
        "peak_wal_file_mb": round(sampler.peak_wal_mb),
        "peak_rss_mb": round(self_peak_mb, 1),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "ingested": report.ingested,
        "flagged": report.flagged,
        "duplicates_on_reingest": again.duplicates,
        "reconciles": report.reconciles() and again.reconciles(),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:>24}: {value}")
        # Machine-readable lines for scripts/bench.py (see docs/benchmarks.md).
        print(f"RESULT name=ingest_rate value={rate:.0f} unit=lines/s target=>=30000 "
              f"ratio={rate / baseline:.3f} baseline=json.loads lines={report.read}")  # fmt: skip
        print(
            f"RESULT name=ingest_peak_memory value={peak_mb:.0f} unit=MB target=<=500 "
            f"measure=PSS rss_mb={self_peak_mb:.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
