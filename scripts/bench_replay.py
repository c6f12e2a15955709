"""Benchmark warm replay: 100 Debian FAQ questions through the full pipeline in one warm process.

Each question is one `Pipeline.run` (what one `replay --query` does once the process is warm);
the total is timed around the call. Model time (query embedding and, if one is configured, the
cross-encoder) is timed by wrapping those two calls; everything else (normalize, rewrite, BM25,
the Qdrant search, fusion, features, trace building) is the total minus model time.
Targets (issue 2): p50 total ≤ 150 ms; everything else ≤ 10 % of the total.

The home is built on first use from the Debian packages (FAQ + Reference, or `--faq-only`);
an existing home with an index is reused as it is.

Usage:
    python scripts/bench_replay.py [--home DIR] [--faq-only] [--queries 100] [--debs DIR] [--json] [--quick]

`--quick` (FAQ only, 20 questions) checks the wiring. The figures also go to stdout as `RESULT`
lines for `scripts/bench.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "scripts"))

from debian_faq import DEFAULT_DEBS_DIR, ensure_extracted, faq_questions  # noqa: E402

from ragtriage import locations  # noqa: E402
from ragtriage.workspace import Workspace  # noqa: E402

P50_TARGET_MS = 150.0
OTHER_SHARE_TARGET = 0.10
DEFAULT_HOME = Path(tempfile.gettempdir()) / "ragtriage-bench-debian-home"
WARM_UP_QUERIES = ["预热", "Debian 软件包", "如何安装", "内核 升级 版本"]


def machine() -> dict[str, Any]:
    """Cores, memory and the load average now (the machine may be shared)."""
    memory_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_kb = int(line.split()[1])
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "memory_gb": round(memory_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


class Stopwatch:
    """Accumulates the wall time of the calls it wraps."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - began

        return timed


def build_home(home: Path, debs: Path, faq_only: bool) -> None:
    """Add the FAQ (and the Reference) to `home` and index them, printing progress to stderr."""
    from ragtriage.index.kb_sync import add_paths

    data = ensure_extracted(home / "debian-docs", debs)
    # Not `data` itself: it also holds reference-pdf/, the same manual as a PDF.
    sources = [data / "faq"] if faq_only else [data / "faq", data / "reference"]
    workspace = Workspace.open(home)
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if time.monotonic() - last[0] > 10 or done == total:
            last[0] = time.monotonic()
            print(f"  indexing {done}/{total}", file=sys.stderr, flush=True)

    try:
        began = time.perf_counter()
        report = add_paths(
            workspace.home, workspace.settings, workspace.engine, sources, on_index_progress=progress
        )
        print(
            f"built {home}: {report.chunks_written} chunks from {report.files_seen} files "
            f"in {time.perf_counter() - began:.0f} s",
            file=sys.stderr,
        )
    finally:
        workspace.close()


def run(home: Path, debs: Path, n_queries: int) -> dict[str, Any]:
    """Warm the pipeline, replay `n_queries` FAQ questions one by one, return the figures."""
    data = ensure_extracted(home / "debian-docs", debs)
    questions = [q.query for q in faq_questions(data / "faq")]
    queries = (questions * (n_queries // len(questions) + 1))[:n_queries]
    workspace = Workspace.open(home)
    try:
        pipeline = workspace.pipeline
        chunk_count = len(pipeline.chunks)
        model = Stopwatch()
        embed_alone = pipeline.embedder.embed_queries if pipeline.embedder is not None else None
        if pipeline.embedder is not None:
            pipeline.embedder.embed_queries = model.wrap(pipeline.embedder.embed_queries)  # type: ignore[method-assign]
        scorer = pipeline.reranker.scorer
        if scorer is not None:
            scorer.score = model.wrap(scorer.score)  # type: ignore[method-assign]
        pipeline.warm_up()
        for query in WARM_UP_QUERIES:
            pipeline.run(query)
        load_before = os.getloadavg()
        totals, models, stages = [], [], {}
        for query in queries:
            model.seconds = 0.0
            began = time.perf_counter()
            trace = pipeline.run(query)
            totals.append((time.perf_counter() - began) * 1000)
            models.append(model.seconds * 1000)
            for stage, ms in trace.timings_ms.items():
                stages.setdefault(stage, []).append(ms)
        load_after = os.getloadavg()
        # In-run baseline: embedding the raw query alone, the floor a replay cannot go under.
        baseline = []
        for query in queries if embed_alone is not None else []:
            began = time.perf_counter()
            embed_alone([query])
            baseline.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        pipeline.run_many(queries)
        batch_ms = (time.perf_counter() - began) * 1000 / len(queries)
    finally:
        workspace.close()
    others = [t - m for t, m in zip(totals, models, strict=True)]
    other_share = sum(others) / sum(totals)
    return {
        "home": str(home),
        "chunks": chunk_count,
        "queries": len(queries),
        "cross_encoder": scorer is not None,
        "p50_total_ms": statistics.median(totals),
        "p95_total_ms": percentile(totals, 95),
        "p50_model_ms": statistics.median(models),
        "p50_other_ms": statistics.median(others),
        "p95_other_ms": percentile(others, 95),
        "other_share": other_share,
        "baseline_p50_embed_one_query_ms": statistics.median(baseline) if baseline else None,
        "ratio_p50_total_to_baseline": statistics.median(totals) / statistics.median(baseline)
        if baseline
        else None,
        "stage_p50_ms": {stage: round(statistics.median(v), 3) for stage, v in stages.items()},
        "run_many_ms_per_query": batch_ms,
        "load_average_during": [round(x, 2) for x in (load_before[0], load_after[0])],
        "checks": {
            "p50_total_le_150ms": statistics.median(totals) <= P50_TARGET_MS,
            "other_share_le_10pct": other_share <= OTHER_SHARE_TARGET,
        },
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit code 1 when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--home",
        type=Path,
        default=DEFAULT_HOME,
        help=f"home (built if it has no index; default {DEFAULT_HOME})",
    )
    parser.add_argument("--quick", action="store_true", help="FAQ only, 20 questions: a wiring check")
    parser.add_argument("--faq-only", action="store_true", help="build with the FAQ only (no Reference)")
    parser.add_argument("--queries", type=int, default=100, help="FAQ questions to replay (default 100)")
    parser.add_argument("--debs", type=Path, default=DEFAULT_DEBS_DIR, help="folder with the Debian packages")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    home = args.home.resolve()
    if args.quick:
        args.faq_only, args.queries = True, min(args.queries, 20)
        if args.home == DEFAULT_HOME:
            home = DEFAULT_HOME.with_name(DEFAULT_HOME.name + "-faq")
    if not locations.manifest_path(home).exists():
        build_home(home, args.debs, args.faq_only)
    result = {"machine": machine(), **run(home, args.debs, args.queries)}
    load = result["machine"]["load_average"][0]
    notes = f"chunks={result['chunks']} queries={result['queries']} load={load}"
    print(
        f"RESULT name=replay_warm_p50 value={result['p50_total_ms']:.1f} unit=ms target=<={P50_TARGET_MS:.0f} "
        f"ratio={result['ratio_p50_total_to_baseline'] or '-'} baseline=embed_raw_query_alone "
        f"p95_ms={result['p95_total_ms']:.1f} {notes}"
    )
    print(
        f"RESULT name=replay_non_model_share value={100 * result['other_share']:.1f} unit=% "
        f"target=<={100 * OTHER_SHARE_TARGET:.0f} baseline=embedding+cross_encoder "
        f"other_p50_ms={result['p50_other_ms']:.1f} model_p50_ms={result['p50_model_ms']:.1f} {notes}"
    )
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
    else:
        m = result["machine"]
        print(
            f"machine: {m['cores']} cores, {m['memory_gb']} GB, Python {m['python']}, "
            f"load average {m['load_average']} (during: {result['load_average_during']}), {m['date']}"
        )
        print(
            f"{result['queries']} FAQ questions over {result['chunks']} chunks, "
            f"cross-encoder: {'yes' if result['cross_encoder'] else 'none (features only)'}"
        )
        print(
            f"total: p50 {result['p50_total_ms']:.1f} ms, p95 {result['p95_total_ms']:.1f} ms "
            f"(target p50 <= {P50_TARGET_MS:.0f} ms)"
        )
        print(
            f"split: embedding + cross-encoder p50 {result['p50_model_ms']:.1f} ms; everything else "
            f"p50 {result['p50_other_ms']:.1f} ms, p95 {result['p95_other_ms']:.1f} ms, "
            f"{result['other_share']:.1%} of the total (target <= {OTHER_SHARE_TARGET:.0%})"
        )
        if result["baseline_p50_embed_one_query_ms"] is not None:
            print(
                f"in-run baseline (embedding the raw query alone): p50 "
                f"{result['baseline_p50_embed_one_query_ms']:.1f} ms; total / baseline = "
                f"{result['ratio_p50_total_to_baseline']:.2f}"
            )
        stages = ", ".join(f"{k} {v:.2f}" for k, v in result["stage_p50_ms"].items())
        print(f"stage p50 (ms): {stages}")
        print(f"run_many (batched embeddings): {result['run_many_ms_per_query']:.1f} ms per query")
    failed = [name for name, ok in result["checks"].items() if not ok]
    for name in failed:
        print(f"TARGET MISSED: {name}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
