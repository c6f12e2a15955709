"""Benchmark index builds: full build, unchanged re-sync, and a re-sync after one document changed.

Loads a KB folder into a fresh home (SQL only, timed apart), then times `sync_indexes`: total,
embedding vs everything else (the budget: everything else ≤ 10 % of the build), peak RSS, and
warm query latency of both routes. A second sync on the unchanged KB must embed nothing; after
one document is touched only its changed chunks may be embedded.

Usage:
    python scripts/bench_index.py [KB_FOLDER] [--data DIR] [--reference] [--home DIR] [--queries N]

Without KB_FOLDER the Debian FAQ extracted under `--data` (by `scripts/extract_debian_docs.py`,
run automatically when the folder is missing) is used; `--reference` adds the Debian Reference.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from sqlmodel import select  # noqa: E402

from ragtriage.index.index_state import index_status  # noqa: E402
from ragtriage.index.indexer import IndexReport, open_indexes, sync_indexes  # noqa: E402
from ragtriage.kb.service import add_paths  # noqa: E402
from ragtriage.store.db import read_session  # noqa: E402
from ragtriage.store.kb_tables import ChunkRow  # noqa: E402
from ragtriage.workspace import Workspace  # noqa: E402

DEFAULT_DATA = REPO_ROOT / "data-extracted"
TOUCH_TEXT = "<p>基准测试：这一段是为了检验增量索引而追加的。</p>"


def peak_rss_mb() -> tuple[float, float]:
    """Peak resident set size of this process and of its finished children (Whoosh writers), in MB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, children


def describe(label: str, report: IndexReport) -> None:
    """Print one sync report."""
    share = report.other_seconds / report.total_seconds * 100 if report.total_seconds else 0.0
    print(
        f"{label}: {report.total_seconds:.1f} s total, embedding {report.embed_seconds:.1f} s, "
        f"everything else {report.other_seconds:.1f} s ({share:.1f} %); added {report.added}, "
        f"updated {report.updated}, deleted {report.deleted}, unchanged {report.unchanged}, "
        f"embedded {report.embedded}, cache hits {report.cache_hits}"
    )


def progress_printer(label: str) -> object:
    """An on_progress callback printing at most every 5 seconds to stderr."""
    last = [0.0]

    def on_progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] > 5 or done == total:
            last[0] = now
            print(f"  {label}: {done}/{total}", file=sys.stderr, flush=True)

    return on_progress


def query_latency(workspace: Workspace, sample: int) -> None:
    """Warm p50/p95 of the BM25 and dense routes on chunk titles used as queries."""
    with read_session(workspace.engine) as session:
        titles = sorted(set(session.exec(select(ChunkRow.title).where(ChunkRow.status == "published")).all()))
    queries = random.Random(7).sample(titles, min(sample, len(titles)))
    indexes = open_indexes(workspace.home, workspace.settings)
    try:
        for name, run in (("bm25", indexes.bm25.search), ("dense", indexes.dense.search)):
            run(queries[0], 10)  # warm-up
            timings = []
            for query in queries:
                began = time.perf_counter()
                run(query, 10)
                timings.append((time.perf_counter() - began) * 1000)
            timings.sort()
            p95 = timings[int(0.95 * (len(timings) - 1))]
            print(
                f"{name} query latency over {len(queries)} queries: p50 {statistics.median(timings):.1f} ms, "
                f"p95 {p95:.1f} ms"
            )
            print(f"RESULT name={name}_query_p50 value={statistics.median(timings):.1f} unit=ms")
    finally:
        indexes.close()


def ensure_data(data_dir: Path) -> None:
    """Extract the Debian documentation into `data_dir` if it is not there yet."""
    if (data_dir / "faq").is_dir():
        return
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    from extract_debian_docs import extract

    extract(REPO_ROOT.parent / "shared" / "data" / "debian-docs-zh", data_dir)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit code 1 when a check fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kb", nargs="?", type=Path, help="folder of KB documents (default: the Debian FAQ)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="extracted Debian docs folder")
    parser.add_argument("--reference", action="store_true", help="add the Debian Reference to the FAQ")
    parser.add_argument("--home", type=Path, help="home folder to build in (default: a fresh temporary one)")
    parser.add_argument("--queries", type=int, default=100, help="queries for the latency figures")
    args = parser.parse_args(argv)

    if args.kb is None:
        ensure_data(args.data)
        sources = [args.data / "faq"] + ([args.data / "reference"] if args.reference else [])
    else:
        sources = [args.kb]
    home = args.home or Path(tempfile.mkdtemp(prefix="ragtriage-bench-"))
    work_copy = home / "kb-copy"
    for source in sources:
        shutil.copytree(source, work_copy / source.name, dirs_exist_ok=True)
    workspace = Workspace.open(home)
    failures: list[str] = []
    try:
        began = time.perf_counter()
        added = add_paths(workspace.engine, workspace.settings, [work_copy])
        print(
            f"home {home}; KB load (SQL only): {time.perf_counter() - began:.1f} s, "
            f"{added.chunks_written} chunks from {added.files_seen} files"
        )

        full = sync_indexes(
            workspace.home, workspace.settings, workspace.engine, on_progress=progress_printer("full build")
        )
        describe("full build", full)
        own, children = peak_rss_mb()
        print(f"peak RSS: {own:.0f} MB (this process), {children:.0f} MB (largest child)")
        # Machine-readable lines for scripts/bench.py (see docs/benchmarks.md).
        share = full.other_seconds / full.total_seconds * 100 if full.total_seconds else 0.0
        chunks = added.chunks_written
        print(f"RESULT name=index_full_build value={full.total_seconds:.1f} unit=s chunks={chunks}")
        print(f"RESULT name=index_non_embedding_share value={share:.1f} unit=% target=<=10 "
              f"ratio={full.other_seconds / max(full.embed_seconds, 1e-9):.3f} "
              "baseline=embedding")  # fmt: skip
        print(f"RESULT name=index_peak_rss value={max(own, children):.0f} unit=MB")
        if full.total_seconds and full.other_seconds / full.total_seconds > 0.10:
            failures.append("everything other than embedding took more than 10 % of the full build")

        again = sync_indexes(workspace.home, workspace.settings, workspace.engine)
        describe("unchanged re-sync", again)
        print(f"RESULT name=index_unchanged_resync_embedded value={again.embedded} unit=chunks target=<=0")
        if again.embedded:
            failures.append(f"an unchanged KB embedded {again.embedded} chunks")

        touched = sorted(work_copy.rglob("*.html")) or sorted(p for p in work_copy.rglob("*") if p.is_file())
        target = touched[len(touched) // 2]
        text = target.read_text(encoding="utf-8", errors="replace")
        marker = "</body>" if "</body>" in text else None
        target.write_text(
            text.replace(marker, TOUCH_TEXT + marker, 1) if marker else text + "\n追加一句。\n",
            encoding="utf-8",
        )
        add_paths(workspace.engine, workspace.settings, [work_copy])
        one = sync_indexes(workspace.home, workspace.settings, workspace.engine)
        describe(f"after touching {target.name}", one)
        print(f"RESULT name=index_one_doc_resync value={one.total_seconds:.2f} unit=s "
              f"embedded={one.embedded}")  # fmt: skip
        if one.embedded > one.added + one.updated or one.embedded == 0:
            failures.append(f"touching one document embedded {one.embedded} chunks")
        print(f"index status: {index_status(workspace.home, workspace.settings, workspace.engine)['state']}")
        query_latency(workspace, args.queries)
    finally:
        workspace.close()
    for failure in failures:
        print(f"CHECK FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
