"""Benchmark `kb import` of a Parquet chunk export with vectors, end to end, and its unchanged re-import.

Writes N chunks of about 400 Chinese characters (sentences drawn from the Debian FAQ and Reference,
extracted from `../shared/data/debian-docs-zh` into the workdir, and from the fixture KB) with UUID
ids, 20 chunks per document and random unit 384-d vectors into one Parquet file, then imports it
into a fresh home: SQL (SQLite) + Whoosh or bm25s + Qdrant Edge. Prints the time per part, the
ratio to reading the same file with pyarrow, the peak memory, and the time of a second import of
the unchanged file.

The parts run one after another: the SQL pass, the BM25 build (segmenting in `bm25_procs` forked
processes), the dense index. Peak memory is the PSS of this process and its child processes
sampled together (`pss_sampler`): summing RSS would count the pages a fork shares once per process.

Usage:
    python scripts/bench_import.py [--chunks 100000] [--workdir DIR] [--keep] [--no-index]
                                   [--bm25-engine whoosh|bm25s]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import re
import resource
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from pss_sampler import PssSampler  # noqa: E402 (scripts/ is on sys.path when a script runs)

from ragtriage.index.kb_sync import import_source  # noqa: E402
from ragtriage.kb.importer import ImportSpec  # noqa: E402
from ragtriage.workspace import Workspace  # noqa: E402

DIM = 384
CHUNK_CHARS = 400
FIXTURE_TEXT = REPO_ROOT / "fixtures" / "kb"


def debian_text(workdir: Path) -> Path | None:
    """The Debian FAQ and Reference pages (zh-cn HTML), extracted once into `workdir/debian-text`.

    Returns None, and the export is then made of fixture sentences only, when the .deb packages of
    `../shared/data/debian-docs-zh` are missing.
    """
    from ragtriage_demo.debian_docs import DEFAULT_DEBS_DIR, ExtractError, extract

    out = workdir / "debian-text"
    if (out / "faq").is_dir() and (out / "reference").is_dir():
        return out
    try:
        extract(DEFAULT_DEBS_DIR, out)
    except ExtractError as error:
        print(f"Debian docs not extracted ({error}); the chunks are fixture-KB sentences only")
        return None
    return out


def chinese_sentences(debian: Path | None) -> list[str]:
    """Sentences with Chinese text from the Debian docs (real documentation ragtriage did not write,
    its joined ASCII runs such as `apt-get` included) and the fixture KB."""
    sentences: list[str] = []
    for folder in [*([debian / "faq", debian / "reference"] if debian else []), FIXTURE_TEXT]:
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.suffix not in (".md", ".html", ".txt") or not path.is_file():
                continue
            text = re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8", errors="replace"))
            for sentence in re.split(r"(?<=[。！？；])", text):
                sentence = " ".join(sentence.split())
                if re.search(r"[\u4e00-\u9fff]{4}", sentence) and 8 <= len(sentence) <= 200:
                    sentences.append(sentence)
            if len(sentences) > 50_000:
                break
    return sentences


def write_export(path: Path, count: int, debian: Path | None, seed: int = 11) -> None:
    """A Parquet export of `count` chunks, written in row groups of 10,000 (constant memory)."""
    rng = random.Random(seed)
    vectors = np.random.default_rng(seed)
    sentences = chinese_sentences(debian)
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("document_id", pa.string()),
            ("chunk_index", pa.int32()),
            ("section_title", pa.string()),
            ("content", pa.string()),
            ("status", pa.string()),
            ("embedding", pa.list_(pa.float32(), DIM)),
        ]
    )
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, count, 10_000):
            rows = min(10_000, count - start)
            contents = []
            for _ in range(rows):
                parts: list[str] = []
                while sum(map(len, parts)) < CHUNK_CHARS:
                    parts.append(rng.choice(sentences))
                contents.append("".join(parts)[: CHUNK_CHARS + 40])
            matrix = vectors.normal(size=(rows, DIM)).astype(np.float32)
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
            ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(rows)]
            table = pa.table(
                {
                    "id": ids,
                    "document_id": [f"doc-{(start + n) // 20}" for n in range(rows)],
                    "chunk_index": [(start + n) % 20 for n in range(rows)],
                    "section_title": [content[:12] for content in contents],
                    "content": contents,
                    "status": ["PUBLISHED"] * rows,
                    "embedding": pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), DIM),
                },
                schema=schema,
            )
            writer.write_table(table)


def pyarrow_read_seconds(path: Path) -> float:
    """The baseline: read every column of the file with pyarrow, batch by batch."""
    started = time.perf_counter()
    rows = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=2000):
        rows += batch.num_rows
    return time.perf_counter() - started


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and its finished children (segmenters, writers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run(workspace: Workspace, path: Path, index: bool = True) -> tuple[float, object]:
    """One `kb import` of `path`; returns (seconds, report)."""
    spec = ImportSpec(
        path=path,
        map={"chunk_id": "id", "doc_id": "document_id", "title": "section_title", "ordinal": "chunk_index"},
        vector_field="embedding",
    )
    started = time.perf_counter()
    report = import_source(workspace.home, workspace.settings, workspace.engine, spec, index=index)
    return time.perf_counter() - started, report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="Keep the export and the home.")
    parser.add_argument("--no-index", action="store_true", help="SQL only: leave Whoosh and Qdrant out.")
    parser.add_argument(
        "--bm25-engine",
        choices=["whoosh", "bm25s"],
        default="whoosh",
        help="[index] bm25_engine of the home.",
    )
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-import-"))
    workdir.mkdir(parents=True, exist_ok=True)
    export = workdir / f"chunks-{args.chunks}.parquet"
    if not export.exists():
        # In a child process: the import's peak memory must not include writing the export.
        started = time.perf_counter()
        debian = debian_text(workdir)
        child = multiprocessing.get_context("spawn").Process(
            target=write_export, args=(export, args.chunks, debian)
        )
        child.start()
        child.join()
        if child.exitcode != 0:
            raise SystemExit(f"writing {export} failed")
        print(
            f"wrote {export} ({export.stat().st_size / 2**20:.0f} MB) in {time.perf_counter() - started:.1f} s; "
            f"text: {'Debian FAQ + Reference and ' if debian else ''}fixture-KB sentences"
        )
    home = workdir / "home"
    shutil.rmtree(home, ignore_errors=True)
    baseline = pyarrow_read_seconds(export)
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        f'[index]\nbm25_engine = "{args.bm25_engine}"\n',
        encoding="utf-8",
    )
    workspace = Workspace.open(home)
    load_before = os.getloadavg()[0]
    try:
        sampler = PssSampler()
        sampler.start()
        cpu_before = cpu_seconds()
        first_seconds, first = run(workspace, export, not args.no_index)
        first_cpu = cpu_seconds() - cpu_before
        peak_pss_mb = sampler.stop()
        own_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        again_seconds, again = run(workspace, export, not args.no_index)
    finally:
        workspace.close()
    index = first.index or {}  # type: ignore[attr-defined]
    # The critical path: what this process waited on, one after another.
    parts = {
        "read + check (the pass)": first.read_seconds,  # type: ignore[attr-defined]
        "SQL writes (in the pass)": first.write_seconds,  # type: ignore[attr-defined]
        f"BM25 build ({args.bm25_engine})": index.get("bm25_seconds", 0.0),
        "dense index (Qdrant Edge)": index.get("dense_seconds", 0.0),
        "embedding": index.get("embed_seconds", 0.0),
    }
    parts["other (load chunks, diff, manifest)"] = first_seconds - sum(parts.values())
    print(f"chunks: {args.chunks}, {first.counts_line()}; embedded {index.get('embedded')}")  # type: ignore[attr-defined]
    print(f"pyarrow read of the same file: {baseline:.2f} s")
    print(
        f"first import: {first_seconds:.1f} s ({first_seconds / baseline:.0f} x the pyarrow read), "
        f"{first_cpu:.1f} CPU-s (the load-independent part: two idle cores need at least half of it); "
        f"load {load_before:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    for name, seconds in parts.items():
        print(f"  {name:<36} {seconds:7.1f} s")
    print(f"  ({index.get('imported_vectors', 0)} imported vectors)")
    own_mb, *children_mb = sampler.peak_parts or [0.0]
    print(
        f"peak memory: {peak_pss_mb:.0f} MB PSS of this process and its children together "
        f"(at the peak: this process {own_mb:.0f} MB, children "
        f"{' + '.join(f'{mb:.0f}' for mb in children_mb) or 'none'} MB; "
        f"this process alone: {own_rss_mb:.0f} MB peak RSS)"
    )
    print(
        f"re-import, unchanged: {again_seconds:.1f} s ({again_seconds / first_seconds * 100:.1f} % of the first);"
        f" {again.counts_line()}, written {again.written}, index: {again.index_skipped}"
    )  # type: ignore[attr-defined]
    scope = (
        "sql_only"
        if args.no_index
        else f"end_to_end bm25_engine={args.bm25_engine} dense_backend=qdrant_edge"
    )
    print(
        f"RESULT name=import_parquet value={first_seconds:.1f} unit=s target=<=60 scope={scope} "
        f"ratio={first_seconds / baseline:.1f} baseline=pyarrow_read chunks={args.chunks} cpu_s={first_cpu:.1f}"
    )
    print(
        f"RESULT name=import_peak_memory value={peak_pss_mb:.0f} unit=MB target=<=600 scope={scope} "
        f"measure=PSS_all_processes own_rss_mb={own_rss_mb:.0f}"
    )
    print(
        f"RESULT name=reimport_unchanged value={again_seconds:.1f} unit=s "
        f"ratio={again_seconds / first_seconds:.3f} target=ratio<=0.1 baseline=first_import scope={scope}"
    )
    if not args.keep and args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
