"""Benchmark the help screens' cold start: `python -m ragtriage ARGS` for `--help`, `replay --help` and
`--version`, run alternately over one or more source trees (e.g. a checkout before and after a change).

Prints the median wall time and the median CPU time (user + sys of the child) per command and tree,
and the load average: on a shared machine CPU time moves less with the load than wall time.

Usage:
    python scripts/bench_help.py [--runs 5] TREE [TREE ...]

Each TREE is a folder holding the `ragtriage` package; it goes first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

COMMANDS = (["--help"], ["replay", "--help"], ["--version"])


def timed(tree: str, args: list[str]) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one run of `python -m ragtriage ARGS` on `tree`."""
    env = dict(os.environ, PYTHONPATH=tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ragtriage", *args], env=env, capture_output=True, check=True, cwd=tree
    )
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    """Run every command `--runs` times per tree, the trees taking turns."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", help="folders holding the ragtriage package")
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    for args in COMMANDS:
        results: dict[str, list[tuple[float, float]]] = {tree: [] for tree in options.trees}
        for _ in range(options.runs):
            for tree in options.trees:
                results[tree].append(timed(tree, args))
        for tree, runs in results.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"{' '.join(args):15s} {tree}: median wall {wall:.2f} s, median CPU {cpu:.2f} s")
    print("load average", " ".join(f"{value:.1f}" for value in os.getloadavg()))


if __name__ == "__main__":
    main()
