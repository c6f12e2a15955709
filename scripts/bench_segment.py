"""Benchmark the BM25 analyzer's bulk segmentation (`analyzer.terms`) against the path before it and raw jieba-rs.

Three ways over the same texts, in the same process, in interleaved rounds:
- new: `analyzer.terms(text)` (NFKC, codes cut out, one jieba-rs call a text, joined ASCII runs
  filled back from Python jieba's split, remembered per run);
- old: the path before: `unicodedata` NFKC of the whole text, then `analyzer._terms_by_piece`
  (one jieba-rs call per piece between codes, the offsets path for pieces with a joined ASCII
  run; still the fallback for the few texts the new path declines);
- raw: `rjieba.cut_for_search` alone on the text already normalized: a floor (its words are not
  BM25's terms: punctuation kept, `www.debian.org` kept whole).
Before timing, new and old must give the same terms for every text (exit 1 otherwise). Prints CPU
ms a chunk (process time, median of the rounds, caches warm), the first pass with cold caches,
and the ratios new/old and new/raw; with the load average, since the machine may be shared.

Texts: every 400-character chunk of the two Debian documentation packages (`../shared/data/
debian-docs-zh`, tags stripped as the equality test cuts them), and with `--import-like N` N chunks
composed like `bench_import.py`'s (sentences of the fixture KB and the Debian pages).

Usage:
    python scripts/bench_segment.py [--debs DIR] [--rounds 5] [--import-like N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import rjieba  # noqa: E402

from ragtriage.index import analyzer, segment_rs  # noqa: E402
from ragtriage_demo.debian_docs import extract  # noqa: E402

DEFAULT_DEBS = REPO_ROOT.parent / "shared" / "data" / "debian-docs-zh"
CHUNK_CHARS = 400


def page_texts(debs: Path, workdir: Path) -> list[str]:
    """The tag-stripped, whitespace-collapsed text of every FAQ and Reference HTML page."""
    extract(debs, workdir)
    pages = sorted([*(workdir / "faq").glob("*.html"), *(workdir / "reference").glob("*.html")])
    return [" ".join(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")).split()) for page in pages]


def debian_chunks(texts: list[str]) -> list[str]:
    return [text[start : start + CHUNK_CHARS] for text in texts for start in range(0, len(text), CHUNK_CHARS)]


def import_like_chunks(texts: list[str], count: int, seed: int = 11) -> list[str]:
    """Chunks as `bench_import.py` composes them: random sentences until 400 characters."""
    sentences = [
        sentence
        for text in texts
        + [path.read_text(encoding="utf-8") for path in sorted((REPO_ROOT / "fixtures" / "kb").rglob("*.md"))]
        for sentence in re.split(r"(?<=[。！？；])", text)
        if re.search(r"[\u4e00-\u9fff]{4}", sentence) and 8 <= len(sentence) <= 200
    ]
    rng = random.Random(seed)
    chunks = []
    for _ in range(count):
        parts: list[str] = []
        while sum(map(len, parts)) < CHUNK_CHARS:
            parts.append(rng.choice(sentences).strip())
        chunks.append("".join(parts)[: CHUNK_CHARS + 40])
    return chunks


def new(text: str) -> object:
    return analyzer.terms(text)


def old(text: str) -> object:
    return analyzer._terms_by_piece(unicodedata.normalize("NFKC", text).lower())


def raw(normalized: str) -> object:
    return rjieba.cut_for_search(normalized, hmm=True)


def clear_caches() -> None:
    for cached in (segment_rs._python_split, segment_rs._python_split_words, segment_rs._block_words):
        cached.cache_clear()
    analyzer._TERMS.clear()
    analyzer._IS_CODE.clear()


def cpu_ms_per_text(way: Callable[[str], object], texts: list[str]) -> float:
    start = time.process_time()
    for text in texts:
        way(text)
    return (time.process_time() - start) * 1000 / len(texts)


def measure(name: str, texts: list[str], rounds: int) -> dict[str, object]:
    mismatched = sum(1 for text in texts if new(text) != old(text))
    if mismatched:
        raise SystemExit(f"{name}: {mismatched} of {len(texts)} texts get other terms from the new path")
    normalized = [analyzer.normalize_text(text) for text in texts]
    ways: dict[str, tuple[Callable[[str], object], list[str]]] = {
        "new": (new, texts),
        "old": (old, texts),
        "raw": (raw, normalized),
    }
    cold = {}
    for label in ("new", "old"):
        clear_caches()
        cold[label] = cpu_ms_per_text(new if label == "new" else old, texts)
    runs: dict[str, list[float]] = {label: [] for label in ways}
    for _ in range(rounds):  # interleaved: a change of load hits the three alike
        for label, (way, inputs) in ways.items():
            runs[label].append(cpu_ms_per_text(way, inputs))
    warm = {label: statistics.median(values) for label, values in runs.items()}
    return {
        "texts": name,
        "chunks": len(texts),
        "terms": sum(len(analyzer.terms(text)) for text in texts),
        "ms_per_chunk": {label: round(value, 3) for label, value in warm.items()},
        "ms_per_chunk_cold": {label: round(value, 3) for label, value in cold.items()},
        "new_over_old": round(warm["new"] / warm["old"], 2),
        "new_over_raw": round(warm["new"] / warm["raw"], 2),
        "old_over_raw": round(warm["old"] / warm["raw"], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--debs", type=Path, default=DEFAULT_DEBS, help="folder with the two Debian .deb files"
    )
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per way (median printed)")
    parser.add_argument(
        "--import-like", type=int, default=0, metavar="N", help="also N bench_import-like chunks"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per text set")
    args = parser.parse_args(argv)
    os.environ["RAGTRIAGE_SEGMENTER"] = "rust"
    with tempfile.TemporaryDirectory(prefix="bench-segment-") as workdir:
        texts = page_texts(args.debs, Path(workdir))
    sets = {"debian": debian_chunks(texts)}
    if args.import_like:
        sets["import-like"] = import_like_chunks(texts, args.import_like)
    analyzer.terms(sets["debian"][0])  # load both dictionaries before timing
    load = os.getloadavg()
    for name, chunks in sets.items():
        result = measure(name, chunks, args.rounds)
        result["load_avg_1_5_15"] = [round(value, 2) for value in load]
        if args.json:
            print(json.dumps(result, ensure_ascii=False))
            continue
        ms, cold = result["ms_per_chunk"], result["ms_per_chunk_cold"]
        print(
            f"{name}: {result['chunks']} chunks, {result['terms']} terms, CPU ms a chunk (median of {args.rounds})"
        )
        print(f"  new {ms['new']:.3f}   old {ms['old']:.3f}   raw jieba-rs {ms['raw']:.3f}")  # type: ignore[index]
        print(f"  first pass, caches cold: new {cold['new']:.3f}   old {cold['old']:.3f}")  # type: ignore[index]
        print(
            f"  new/old {result['new_over_old']}   new/raw {result['new_over_raw']}   "
            f"old/raw {result['old_over_raw']}   load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
