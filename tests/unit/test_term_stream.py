"""`TermStream` (kb import's segmenting during the pass): every run comes back as `analyzer.terms`
gives it, across many batches, a repeated key, and forked workers; the term ids wait in a
temporary file until `finish`."""

from __future__ import annotations

import pytest

from ragtriage.index import bulk_terms
from ragtriage.index.analyzer import terms
from tests.conftest import FIXTURES_DIR


def _texts() -> list[str]:
    files = sorted(path for path in (FIXTURES_DIR / "kb").rglob("*") if path.suffix in (".md", ".html"))
    text = "".join(path.read_text(encoding="utf-8") for path in files)
    # 1,300 overlapping texts of 90 characters: two batches of 500 and a partial one.
    step = (len(text) - 90) // 1300
    return [text[n * step : n * step + 90] for n in range(1300)]


@pytest.mark.parametrize("procs", [1, 2])
def test_every_run_equals_the_analyzers_terms(procs: int) -> None:
    texts = _texts()
    assert len(set(texts)) > 1000
    stream = bulk_terms.TermStream(procs, min_docs=600)
    for n, text in enumerate(texts):
        stream.add("content", f"hash-{n}", text)
        stream.add("title", f"标题{n % 7}", f"标题{n % 7}")  # 7 distinct titles: segmented once each
    stream.add("content", "hash-0", "a repeated key is not segmented again")
    segmented = stream.finish()
    assert segmented.spill is not None, "the term ids wait in the temporary file"
    segmented.load()
    assert len(segmented) == len(texts) + 7 == len(segmented.content) + len(segmented.title)
    for key, text in [*((f"hash-{n}", text) for n, text in enumerate(texts)), ("hash-0", texts[0])]:
        n = segmented.content[key]
        run = segmented.flat[segmented.offsets[n] : segmented.offsets[n + 1]]
        assert [segmented.words[i] for i in run] == terms(text)
    n = segmented.title["标题3"]
    assert [
        segmented.words[i] for i in segmented.flat[segmented.offsets[n] : segmented.offsets[n + 1]]
    ] == terms("标题3")


def test_releasing_unloaded_runs_closes_their_file() -> None:
    stream = bulk_terms.TermStream()
    for n, text in enumerate(_texts()[:600]):
        stream.add("content", str(n), text)
    segmented = stream.finish()
    spill = segmented.spill
    assert spill is not None
    segmented.release()
    assert spill.closed and len(segmented) == 0


def test_closing_before_finish_drops_the_term_ids() -> None:
    stream = bulk_terms.TermStream()
    for n, text in enumerate(_texts()[:600]):
        stream.add("content", str(n), text)
    spill = stream._spill
    assert spill is not None and not spill.closed
    stream.close()
    assert spill.closed and stream._spill is None
