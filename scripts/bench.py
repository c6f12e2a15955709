"""Run every benchmark (`scripts/bench_*.py`) and rewrite the table in `docs/benchmarks.md`.

    .venv/bin/python scripts/bench.py [--quick] [--only ingest,queue] [--workdir DIR] [--no-write]

Each benchmark runs as its own subprocess, one after the other (the machine is shared: never two
at once). A benchmark reports its figures as lines on stdout:

    RESULT name=ingest_rate value=41234 unit=lines/s target=>=30000 ratio=0.62 baseline=json.loads

`target` is `<=N` or `>=N` on the value, or `ratio<=N` / `ratio>=N` on the ratio; `ratio` is the
figure divided by a baseline measured in the same run (named by `baseline`); other `key=value`
pairs are kept as notes. Values never contain spaces. The table between `<!-- bench:start -->` and
`<!-- bench:end -->` gets one row per figure with pass/fail, and a header with the machine
(cores, memory, load average), the date and the commands. Rows of benchmarks not run this time are
kept. `--quick` runs small sizes (a script that accepts `--quick` gets it; the others get the
small arguments below) to check the wiring; quick figures are marked and do not judge a target.
Exit code 1 when a benchmark fails or a full-size figure misses its target.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS_DIR = REPO_ROOT / "scripts"
DOC_PATH = REPO_ROOT / "docs" / "benchmarks.md"
START_MARKER = "<!-- bench:start -->"
END_MARKER = "<!-- bench:end -->"
RESULT_PREFIX = "RESULT "
#: Benchmarks that need the home another one builds run after it; unknown ones run last.
ORDER = [
    "metrics",
    "ingest",
    "ingest_otlp",
    "queue",
    "index",
    "eval_run",
    "diagnose",
    "replay",
    "cold_start",
    "tui",
    "demo",
]
ORDER += ["pdf_load", "service"]
ORDER += ["fidelity"]
ORDER += ["import", "monitor"]
FIXTURE_KB = REPO_ROOT / "fixtures" / "kb"
#: Every first-round target, by the benchmark meant to measure it (a row even before its script exists).
TARGETS = {
    "index": "KB build: everything but embedding <= 10 %; unchanged re-add embeds nothing (issue 2)",
    "replay": "warm replay p50 <= 150 ms over 100 FAQ questions; non-embedding share <= 10 % (issue 2)",
    "cold_start": "cold `ragtriage replay --query` <= 3 s (issue 2)",
    "ingest": "ingest 1M lines of ~1 KB >= 30,000 lines/s, peak <= 500 MB, ratio to json.loads (issue 3)",
    "ingest_otlp": "ingest 100k OTLP traces of 6 spans >= 0.5 x a json.loads pass, peak <= 500 MB (issue 12)",
    "queue": "`queue` first page <= 200 ms at 1M requests / 100k flagged (issue 3)",
    "diagnose": "one diagnosis with counterfactuals <= 1 s warm (issue 4)",
    "eval_run": "1,000 cases <= 1.5 x floor and >= 3 x a sequential loop (issue 5)",
    "metrics": "metrics for 100k cases x 100 candidates <= 1/3 of pytrec_eval (issue 5)",
    "tui": "queue interactive <= 1 s at 100k flagged; key to repaint <= 50 ms (issue 6)",
    "demo": "`ragtriage demo --headless` <= 60 s on a fresh home (issue 6)",
    "service": "at 1,000 cases: API page of 50 results <= 5 x reading its rows; report <= 2 x compare_runs (issue 15)",
    "pdf_load": "Debian Reference PDF (251 pages) loads in <= 2 x PDFium's bare text read (issue 11)",
    "fidelity": "`ragtriage fidelity` over 10,000 logged requests <= 1.3 x the replay floor (issue 13)",
    "import": "kb import of 100k Parquet chunks + vectors <= 60 s, <= 600 MB; unchanged re-import <= 10 % (issue 11)",
    "monitor": "`ragtriage monitor` over 1,000,000 stored requests <= 2 s, by day and by version (issue 14)",
}


def script_arguments(name: str, quick: bool, workdir: Path) -> list[str]:
    """Arguments for `bench_<name>.py`: the issue's target sizes, or small ones with `--quick`."""
    index_home = workdir / ("index-home-quick" if quick else "index-home")
    if name == "ingest_otlp":
        return ["--traces", "2000" if quick else "100000", "--workdir", str(workdir)]
    if name == "ingest_tables":
        return ["--lines", "5000" if quick else "100000", "--workdir", str(workdir)]
    if name == "ingest":
        return ["--lines", "20000" if quick else "1000000", "--workdir", str(workdir)]
    if name == "queue":
        return ["--requests", "20000" if quick else "1000000", "--workdir", str(workdir)]
    if name == "metrics":
        return ["--queries", "2000"] if quick else ["--queries", "100000", "--candidates", "100"]
    if name == "index":
        # Quick: the small fixture KB; full: the Debian FAQ + Reference (the target KB).
        kb = [str(FIXTURE_KB), "--queries", "20"] if quick else ["--reference"]
        return [*kb, "--home", str(index_home)]
    if name == "eval_run":
        return ["--home", str(index_home), "--cases", "40" if quick else "1000"]
    if name == "tui":
        home = workdir / ("tui-home-quick" if quick else "tui-home")
        return ["--requests", "2000" if quick else "100000", "--home", str(home)]
    if name == "diagnose":
        return ["--repeat", "1" if quick else "5"]
    if name == "service":
        return ["--cases", "100" if quick else "1000", "--workdir", str(workdir)]
    if name == "import":
        # bm25s: the BM25 engine meant for imports of this size (Whoosh's Python writer needs ~10 min).
        size = "5000" if quick else "100000"
        return ["--chunks", size, "--workdir", str(workdir / "import"), "--bm25-engine", "bm25s"]
    if name == "monitor":
        return ["--requests", "20000" if quick else "1000000", "--workdir", str(workdir)]
    if name == "demo":
        return ["--home", str(workdir / "demo-home")]
    if name == "fidelity":
        home = workdir / ("fidelity-home-quick" if quick else "fidelity-home")
        return ["--requests", "300" if quick else "10000", "--home", str(home)]
    return []


@dataclass
class Result:
    """One `RESULT` line."""

    name: str
    value: float | None
    unit: str = ""
    target: str = ""
    ratio: float | None = None
    baseline: str = ""
    notes: dict[str, str] = field(default_factory=dict)

    def verdict(self) -> str:
        """`pass`, `fail` or `-` (no target, or nothing to compare)."""
        match = re.fullmatch(r"(ratio)?(<=|>=)(-?[0-9.]+(?:e-?[0-9]+)?)", self.target)
        if match is None:
            return "-"
        subject = self.ratio if match.group(1) else self.value
        if subject is None:
            return "-"
        bound = float(match.group(3))
        ok = subject <= bound if match.group(2) == "<=" else subject >= bound
        return "pass" if ok else "fail"


def _number(text: str | None) -> float | None:
    if text is None or text in ("", "-", "None", "nan"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_results(stdout: str) -> list[Result]:
    """Every `RESULT key=value …` line of a benchmark's output."""
    results = []
    for line in stdout.splitlines():
        if not line.startswith(RESULT_PREFIX):
            continue
        pairs = dict(part.split("=", 1) for part in shlex.split(line[len(RESULT_PREFIX) :]) if "=" in part)
        name = pairs.pop("name", "?")
        results.append(
            Result(
                name=name,
                value=_number(pairs.pop("value", None)),
                unit=pairs.pop("unit", ""),
                target=pairs.pop("target", ""),
                ratio=_number(pairs.pop("ratio", None)),
                baseline=pairs.pop("baseline", ""),
                notes=pairs,
            )
        )
    return results


@dataclass
class BenchRun:
    """One benchmark script's run."""

    name: str
    command: list[str]
    exit_code: int
    seconds: float
    results: list[Result]
    quick: bool
    tail: str = ""


def discover(only: set[str] | None) -> list[str]:
    """Benchmark names (`bench_<name>.py`) in run order."""
    names = [path.stem.removeprefix("bench_") for path in SCRIPTS_DIR.glob("bench_*.py")]
    if only:
        unknown = only - set(names)
        if unknown:
            raise SystemExit(
                f"no benchmark named {', '.join(sorted(unknown))}; have {', '.join(sorted(names))}"
            )
        names = [name for name in names if name in only]
    return sorted(names, key=lambda name: (ORDER.index(name) if name in ORDER else len(ORDER), name))


def run_one(name: str, quick: bool, workdir: Path, timeout_s: float) -> BenchRun:
    """Run `bench_<name>.py` as a subprocess and collect its RESULT lines."""
    script = SCRIPTS_DIR / f"bench_{name}.py"
    accepts_quick = "--quick" in script.read_text(encoding="utf-8")
    arguments = ["--quick"] if quick and accepts_quick else script_arguments(name, quick, workdir)
    command = [sys.executable, str(script.relative_to(REPO_ROOT)), *arguments]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TQDM_DISABLE": "1"}
    started = time.perf_counter()
    try:
        completed = subprocess.run(
            command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        code, stdout, stderr = completed.returncode, completed.stdout, completed.stderr
    except subprocess.TimeoutExpired as error:
        code, stdout, stderr = (
            -1,
            _text(error.stdout),
            _text(error.stderr) + f"\ntimed out after {timeout_s:g} s",
        )
    seconds = time.perf_counter() - started
    tail = "\n".join((stderr or stdout).strip().splitlines()[-3:])
    return BenchRun(name, command, code, seconds, parse_results(stdout), quick, tail)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def machine() -> str:
    """Cores, memory, load average, Python and OS."""
    memory_gb = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gb = f"{int(line.split()[1]) / 1024 / 1024:.1f}"
    except OSError:
        pass
    try:
        load = "/".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        load = "?"
    return (
        f"{os.cpu_count()} cores, {memory_gb} GB RAM, load average {load} (1/5/15 min), "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.3f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:,.0f}"


def table_rows(runs: list[BenchRun], stamp: str, load: str) -> dict[str, list[str]]:
    """Markdown rows per benchmark name."""
    rows: dict[str, list[str]] = {}
    for run in runs:
        command = "`" + " ".join(shlex.quote(part) for part in [".venv/bin/python", *run.command[1:]]) + "`"
        mode = "quick" if run.quick else "full"
        lines = []
        if run.exit_code != 0 and not run.results:
            status = "timeout" if run.exit_code == -1 else f"exit {run.exit_code}"
            detail = run.tail.replace("|", "\\|").replace("\n", " ")[:160]
            lines.append(
                f"| `{run.name}` | no figures ({status}: {detail}) | - | - | - | fail | {mode} | {stamp} | "
                f"{load} | {command} |"
            )
        for result in run.results:
            verdict = result.verdict()
            if run.quick and verdict != "-":
                verdict = f"({verdict}, quick)"
            elif run.exit_code != 0:
                verdict = f"{verdict} (script exit {run.exit_code})"
            ratio = f"{_fmt(result.ratio)} × {result.baseline}" if result.ratio is not None else "-"
            notes = ", ".join(f"{k}={v}" for k, v in result.notes.items())
            figure = f"{result.name}" + (f" ({notes})" if notes else "")
            value = f"{_fmt(result.value)} {result.unit}".strip()
            lines.append(
                f"| `{run.name}` | {figure} | {value} | {ratio} | {result.target or '-'} | {verdict} | "
                f"{mode} | {stamp} | {load} | {command} |"
            )
        rows[run.name] = lines
    return rows


HEADER = (
    "| bench | figure | value | ratio to in-run baseline | target | pass/fail | mode | date (UTC) | load "
    "| command |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)


def _existing_rows(block: str) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in block.splitlines():
        match = re.match(r"\| `([^`]+)` \|", line)
        if match:
            rows.setdefault(match.group(1), []).append(line)
    return rows


def write_table(runs: list[BenchRun], path: Path = DOC_PATH) -> None:
    """Rewrite the block between the markers, keeping rows of benchmarks not run now."""
    text = path.read_text(encoding="utf-8") if path.exists() else _new_document()
    if START_MARKER not in text or END_MARKER not in text:
        text = text.rstrip("\n") + f"\n\n{START_MARKER}\n{END_MARKER}\n"
    head, rest = text.split(START_MARKER, 1)
    block, tail = rest.split(END_MARKER, 1)
    now = datetime.now(timezone.utc)
    stamp = now.strftime("%Y-%m-%d %H:%M")
    try:
        load = f"{os.getloadavg()[0]:.2f}"
    except OSError:
        load = "?"
    rows = _existing_rows(block)
    rows.update(table_rows(runs, stamp, load))
    available = {path.stem.removeprefix("bench_") for path in SCRIPTS_DIR.glob("bench_*.py")}
    for name, target in TARGETS.items():
        if name not in rows or (name in available and rows[name][0].split("|")[2].strip() == "not measured"):
            why = "not run yet" if name in available else f"no `scripts/bench_{name}.py` yet"
            rows[name] = [f"| `{name}` | not measured | - | - | {target} | - | - | - | - | {why} |"]
    ordered = sorted(rows, key=lambda name: (ORDER.index(name) if name in ORDER else len(ORDER), name))
    body = "\n".join(line for name in ordered for line in rows[name])
    argv = " ".join(shlex.quote(arg) for arg in sys.argv[1:])
    header = (
        f"Last run: {now:%Y-%m-%d %H:%M} UTC, `.venv/bin/python scripts/bench.py {argv}`".rstrip() + "\n\n"
        f"Machine: {machine()}.\n\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{head}{START_MARKER}\n{header}{HEADER}\n{body}\n{END_MARKER}{tail}", encoding="utf-8")


def _new_document() -> str:
    return (
        "# Benchmarks\n\n"
        "Every figure below comes from `scripts/bench.py`, which runs each `scripts/bench_*.py` as its own\n"
        "process, one at a time, and rewrites the table between the markers. Ratios are taken against a\n"
        "baseline measured in the same run, so a busy machine shows up on both sides. `quick` rows are\n"
        "small-size wiring checks and do not judge a target; run without `--quick` for the real figures.\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print a summary, write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: check the wiring, not the targets")
    parser.add_argument("--only", default=None, help="comma-separated names, e.g. ingest,queue")
    parser.add_argument("--workdir", type=Path, default=None, help="scratch folder [a temporary one]")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per benchmark")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    only = {name.strip() for name in args.only.split(",") if name.strip()} if args.only else None
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ragtriage-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    runs = []
    for name in discover(only):
        print(f"running bench_{name}.py{' (quick)' if args.quick else ''} …", file=sys.stderr, flush=True)
        run = run_one(name, args.quick, workdir, args.timeout)
        runs.append(run)
        print(f"  {run.seconds:.1f} s, exit {run.exit_code}, {len(run.results)} figures", file=sys.stderr)
        for result in run.results:
            print(
                f"  {result.name} = {_fmt(result.value)} {result.unit} [{result.verdict()}]", file=sys.stderr
            )
        if run.exit_code != 0:
            print(f"  {run.tail}", file=sys.stderr)
    if not args.no_write:
        write_table(runs)
        print(f"wrote {DOC_PATH.relative_to(REPO_ROOT)}", file=sys.stderr)
    failed = [run for run in runs if run.exit_code != 0]
    missed = [r for run in runs if not run.quick for r in run.results if r.verdict() == "fail"]
    return 1 if failed or missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
