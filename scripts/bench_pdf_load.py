"""Benchmark loading a big PDF for `kb add`: the Debian Reference (zh-cn, 251 pages, 1.4 MB).

Times `ragtriage.kb.loaders.load_document` (outline → sections, running headers dropped, paragraphs
rebuilt) and the chunking after it, against reading the bare text layer of every page with PDFium
in the same run (the floor any PDF loader built on PDFium pays). Medians of `--repeat` runs.

Usage:
    python scripts/bench_pdf_load.py [--pdf FILE] [--repeat 3]

Without `--pdf` the PDF is extracted from `../shared/data/debian-docs-zh/debian-reference-zh-cn_*.deb`.
The figures also go to stdout as `RESULT` lines for `scripts/bench.py`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import pypdfium2 as pdfium  # noqa: E402

from ragtriage.kb.chunking import ChunkingParams, chunk_document  # noqa: E402
from ragtriage.kb.loaders import load_document  # noqa: E402
from ragtriage.kb.types import ChunkRecord  # noqa: E402
from ragtriage_demo.debian_docs import DEFAULT_DEBS_DIR, SOURCES, extract_source, find_deb  # noqa: E402

TARGET_RATIO = 2.0


def raw_text_read(path: Path) -> int:
    """Characters of every page's text layer, read with PDFium and nothing else."""
    pdf = pdfium.PdfDocument(str(path))
    total = 0
    try:
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            total += len(textpage.get_text_bounded())
            textpage.close()
            page.close()
    finally:
        pdf.close()
    return total


def _median_seconds(action: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdf", type=Path, help="the PDF to load (default: the Debian Reference)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run of each")
    args = parser.parse_args(argv)
    repeat = 1 if args.quick else args.repeat
    with tempfile.TemporaryDirectory(prefix="rt-bench-pdf-") as temp:
        path = args.pdf
        if path is None:
            [source] = [s for s in SOURCES if s.out_subdir == "reference-pdf"]
            report = extract_source(find_deb(DEFAULT_DEBS_DIR, source.package), source, Path(temp))
            path = Path(report["dir"]) / report["files"][0]
        pages = len(pdfium.PdfDocument(str(path)))
        baseline = _median_seconds(lambda: raw_text_read(path), repeat)
        load = _median_seconds(lambda: load_document(path), repeat)
        document = load_document(path)
        params = ChunkingParams()

        def chunk_it() -> list[ChunkRecord]:
            return chunk_document(
                document,
                doc_id="bench",
                params=params,
                kb="bench",
                version=1,
                status="published",
                updated_at=None,
            )

        chunk = _median_seconds(chunk_it, repeat)
        chunks = chunk_it()
    ratio = load / baseline
    print(f"{path.name}: {pages} pages, {len(document.sections)} sections, {len(chunks)} chunks")
    print(f"  PDFium text layer only   {baseline:6.2f} s")
    print(f"  load_document            {load:6.2f} s  ({pages / load:.0f} pages/s, {ratio:.2f} x text layer)")
    print(f"  chunk_document           {chunk:6.2f} s")
    print(
        f"RESULT name=pdf_load value={load:.2f} unit=s ratio={ratio:.2f} baseline=pdfium_text_layer "
        f"target=ratio<={TARGET_RATIO} pages={pages} sections={len(document.sections)} chunks={len(chunks)} "
        f"pages_per_s={pages / load:.0f}"
    )
    print(f"RESULT name=pdf_chunking value={chunk:.2f} unit=s chunks={len(chunks)}")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
