"""Segment many texts with the BM25 analyzer into term ids, on several processes when there are many.

A worker runs `analyzer.terms` (jieba-rs) on a batch of texts and numbers the batch's terms itself:
it sends back the batch's distinct terms and one int32 array of local ids, which pickles in
microseconds; the caller maps the few thousand distinct terms to vocabulary ids and translates the
whole batch with one numpy lookup. At most two batches per worker are in flight, so memory stays
flat however many texts there are. Workers are forked where the platform allows (as Whoosh's
writer processes are): they start in milliseconds with jieba-rs loaded and use nothing of the
parent but the analyzer; `spawn` would re-import the package (~2 s a worker) and re-run the
caller's main script.
"""

from __future__ import annotations

import gc
import multiprocessing
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor

import numpy as np

from ragtriage.pipeline.analyzer import terms

__all__ = ["iter_term_ids"]

BATCH = 500
_Batch = tuple[list[str], np.ndarray, np.ndarray]


def _local_ids(texts: list[str]) -> _Batch:
    """(distinct terms, local term ids of every text concatenated, term count of each text)."""
    local: dict[str, int] = {}
    flat: list[int] = []
    lengths = np.zeros(len(texts), dtype=np.int64)
    for n, text in enumerate(texts):
        found = terms(text)
        lengths[n] = len(found)
        flat.extend([local.setdefault(term, len(local)) for term in found])
    return list(local), np.asarray(flat, dtype=np.int32), lengths


def _global_ids(batch: _Batch, vocab: dict[str, int]) -> Iterator[np.ndarray]:
    words, flat, lengths = batch
    remap = np.fromiter(
        (vocab.setdefault(word, len(vocab)) for word in words), dtype=np.int32, count=len(words)
    )
    translated = remap[flat] if len(flat) else flat
    yield from np.split(translated, np.cumsum(lengths)[:-1])


def iter_term_ids(texts: Sequence[str], vocab: dict[str, int], procs: int = 1) -> Iterator[np.ndarray]:
    """The term ids (int32) of `analyzer.terms(text)` for every text, in order, adding new terms to
    `vocab`; `procs` > 1 segments in that many processes."""
    starts = range(0, len(texts), BATCH)
    if procs <= 1 or len(starts) <= 1:
        for start in starts:
            yield from _global_ids(_local_ids(list(texts[start : start + BATCH])), vocab)
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    # Segment one text here first: the dictionaries (jieba-rs's, loaded on import, and Python
    # jieba's) are then loaded before the fork, in pages the workers share instead of each
    # loading its own copy.
    terms(texts[0])
    # A forked worker's garbage collector would walk every object of the parent (100k chunk rows
    # during a sync), writing to their pages: twice the segmenting time. Frozen objects are skipped.
    gc.freeze()
    try:
        with ProcessPoolExecutor(max_workers=procs, mp_context=context) as pool:
            pending: deque[Future[_Batch]] = deque()
            for start in starts:
                pending.append(pool.submit(_local_ids, list(texts[start : start + BATCH])))
                if len(pending) >= 2 * procs:
                    yield from _global_ids(pending.popleft().result(), vocab)
            while pending:
                yield from _global_ids(pending.popleft().result(), vocab)
    finally:
        gc.unfreeze()
