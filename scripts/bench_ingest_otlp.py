"""Benchmark `logs ingest` of OTLP/JSON traces: N OpenInference traces of 6 spans each (root,
rewrite, BM25 and dense RETRIEVERs with 10 documents each, RERANKER 15 → 10, LLM) in Collector
file-exporter form (hex ids, 10 traces per line, so traces cross lines) into a fresh SQLite store.

Prints traces/s end to end, the ratio to a plain `json.loads` pass over the same file measured in
the same run (goal >= 0.5), and the peak memory (PSS, goal <= 500 MB).

    .venv/bin/python scripts/bench_ingest_otlp.py --traces 100000 --workdir /tmp/ragtriage-bench

The file is made from 20 template traces recorded with the real OpenTelemetry SDK and encoded by
the OTLP exporter's encoder (`tests/trace_producers.py`, dev extra), copied with fresh trace ids,
span ids, request ids and sessions.

The ingest runs in this process: CPU seconds and peak PSS are this process's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from pss_sampler import PssSampler  # noqa: E402 (scripts/ is on sys.path when a script runs)

from ragtriage.config.settings import FlaggingSettings, OtelSettings  # noqa: E402
from ragtriage.logs.ingest import ingest_files  # noqa: E402
from ragtriage.store.db import make_engine, sqlite_url  # noqa: E402

TEMPLATES = 20
TRACES_PER_LINE = 10


def _template_requests() -> list[dict]:
    requests = []
    for t in range(TEMPLATES):
        docs = [
            {"chunk_id": f"kb/doc-{(t * 7 + i) % 97}#c{i}", "score": round(20 - i * 0.7, 3)}
            for i in range(15)
        ]
        requests.append(
            {
                "request_id": f"bench-T{t:02d}",
                "ts": f"2026-10-01T08:{t:02d}:00.123456Z",
                "session": f"sess-T{t:02d}",
                "user": f"user-{t % 5}",
                "raw_query": f"如何在 Debian 上配置 apt 源镜像 {t}",
                "answer": "请编辑 /etc/apt/sources.list，然后运行 apt update。"
                if t % 4
                else "抱歉，没有找到相关内容。",
                "citations": [docs[0]["chunk_id"]] if t % 6 else [],
                "pipeline_version": "prod-2026.10",
                "rewrite": {"rewritten_query": f"Debian apt 镜像 配置 {t}"},
                "stages": {
                    "bm25": docs[:10],
                    "dense": docs[5:15],
                    "fused": docs,
                    "reranked": docs[:10],
                    "final_context": [d["chunk_id"] for d in docs[:5]],
                },
                "feedback": {"rating": "down" if t % 5 == 0 else "up"},
                "latency_ms": 900.0 + t,
            }
        )
    return requests


def generate(path: Path, traces: int) -> None:
    """Write `traces` traces (6 spans each) as Collector JSONL, `TRACES_PER_LINE` traces per line."""
    from tests.trace_producers import collector_dict, make_tracer, record_request

    tracer, exporter = make_tracer(seed=11, service_version="svc-1")
    for request in _template_requests():
        record_request(tracer, request)
    spans = exporter.get_finished_spans()
    assert len(spans) == 6 * TEMPLATES, len(spans)
    # Two template lines, each holding 10 traces' spans in end order (so each line crosses traces).
    half = len(spans) // 2
    lines = [
        json.dumps(collector_dict(spans[i : i + half]), ensure_ascii=False, separators=(",", ":"))
        for i in (0, half)
    ]
    ids = re.compile(r'"(traceId|spanId|parentSpanId)":"([0-9a-f]+)"')
    names = re.compile(r"(bench|sess)-T(\d\d)")
    with open(path, "w", encoding="utf-8") as handle:
        for copy in range(-(-traces // TEMPLATES)):
            prefix = f"{copy:08x}"
            for line in lines:
                line = ids.sub(lambda m, p=prefix: f'"{m.group(1)}":"{p}{m.group(2)[8:]}"', line)
                line = names.sub(lambda m, c=copy: f"{m.group(1)}-{c}-{m.group(2)}", line)
                handle.write(line + "\n")


def json_loads_seconds(path: Path) -> tuple[float, float]:
    """Wall and CPU seconds of a plain `for line in file: json.loads(line)` pass."""
    started, cpu_started = time.perf_counter(), time.process_time()
    with open(path, "rb") as handle:
        for line in handle:
            json.loads(line)
    return time.perf_counter() - started, time.process_time() - cpu_started


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (the ingest's readers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    """Generate (once), measure json.loads, ingest into a fresh store, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ragtriage-bench"))
    parser.add_argument("--reingest", action="store_true", help="also time a second ingest (all duplicates)")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / f"traces-{args.traces}.otlp.jsonl"
    if not path.exists():
        generate(path, args.traces)
    baseline_s, baseline_cpu = json_loads_seconds(path)
    db_path = args.workdir / f"bench-ingest-otlp-{args.traces}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    engine = make_engine(sqlite_url(db_path))
    sampler = PssSampler()
    sampler.start()
    started, cpu_started = time.perf_counter(), _cpu_s()
    report = ingest_files(engine, [path], flagging=FlaggingSettings(), otel=OtelSettings(), log_format="otlp")
    elapsed, cpu = time.perf_counter() - started, _cpu_s() - cpu_started
    again, again_s = None, 0.0
    if args.reingest:
        again_started = time.perf_counter()
        again = ingest_files(
            engine, [path], flagging=FlaggingSettings(), otel=OtelSettings(), log_format="otlp"
        )
        again_s = time.perf_counter() - again_started
    engine.dispose()
    peak_mb = sampler.stop()
    rate = report.read / elapsed
    ratio = baseline_s / elapsed
    figures = {
        "traces": report.read,
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "ingest_traces_per_s": round(rate),
        "ingest_wall_s": round(elapsed, 2),
        "json_loads_wall_s": round(baseline_s, 2),
        "ratio_to_json_loads": round(ratio, 3),
        "ingest_cpu_s": round(cpu, 2),
        "json_loads_cpu_s": round(baseline_cpu, 2),
        "cpu_ratio_to_json_loads": round(baseline_cpu / cpu, 3),
        "reingest_traces_per_s": round(again.read / again_s) if again else "-",
        "peak_pss_mb": round(peak_mb, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "ingested": report.ingested,
        "flagged": report.flagged,
        "quarantined": report.quarantined,
        "duplicates_on_reingest": again.duplicates if again else "-",
        "reconciles": report.reconciles() and (again is None or again.reconciles()),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    for key, value in figures.items():
        print(f"{key:>24}: {value}")
    # Machine-readable lines for scripts/bench.py (see docs/benchmarks.md).
    print(f"RESULT name=ingest_otlp_rate value={rate:.0f} unit=traces/s target=ratio>=0.5 "
          f"ratio={ratio:.3f} baseline=json.loads traces={report.read} cpu_ratio={baseline_cpu / cpu:.3f}")  # fmt: skip
    print(f"RESULT name=ingest_otlp_peak_memory value={peak_mb:.0f} unit=MB target=<=500 measure=PSS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
