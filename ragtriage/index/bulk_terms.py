"""Segment many texts with the BM25 analyzer into term ids, on several processes when there are many.

A worker runs `analyzer.terms` (jieba-rs) on a batch of texts and numbers the batch's terms itself:
it sends back the batch's distinct terms and one int32 array of local ids, which pickles in
microseconds; the caller maps the few thousand distinct terms to vocabulary ids and translates the
whole batch with one numpy lookup. At most a few batches per worker are in flight, so memory stays
flat however many texts there are. Workers are forked where the platform allows (as Whoosh's
writer processes are): they start in milliseconds with jieba-rs loaded and use nothing of the
parent but the analyzer; `spawn` would re-import the package (~2 s a worker) and re-run the
caller's main script. Workers ignore Ctrl-C (the parent handles it and stops them) and are
daemons, so none outlives an import that failed or was interrupted.

Two ways in: `iter_term_ids` segments a list it is given (an index sync), and `TermStream` takes
texts while the caller goes on (`kb import`'s pass) and hands back a `SegmentedTerms`.
"""

from __future__ import annotations

import gc
import multiprocessing
import signal
import tempfile
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.pool import AsyncResult, Pool
from typing import IO

import numpy as np

from ragtriage.index.analyzer import terms
from ragtriage.interrupts import children_ignore_interrupts

__all__ = ["SegmentedTerms", "TermStream", "iter_term_ids"]

BATCH = 500
_Batch = tuple[list[str], np.ndarray, np.ndarray]
#: Segmented before forking workers that have no text yet: Han text and a joined ASCII run load
#: both dictionaries (jieba-rs's, Python jieba's) into pages the workers share.
_WARM_UP = "中文分词词典 apt-get"


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


def _translate(batch: _Batch, vocab: dict[str, int]) -> np.ndarray:
    """The batch's term ids in `vocab` (new terms are added), concatenated."""
    words, flat, _ = batch
    remap = np.fromiter(
        (vocab.setdefault(word, len(vocab)) for word in words), dtype=np.int32, count=len(words)
    )
    return remap[flat] if len(flat) else flat


def _global_ids(batch: _Batch, vocab: dict[str, int]) -> Iterator[np.ndarray]:
    yield from np.split(_translate(batch, vocab), np.cumsum(batch[2])[:-1])


def _ignore_interrupt() -> None:
    """Pool initializer: Ctrl-C reaches the whole process group, and it is the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_pool(procs: int, first_text: str) -> Pool:
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    # Segment one text here first: the dictionaries (jieba-rs's, loaded on import, and Python
    # jieba's) are then loaded before the fork, in pages the workers share instead of each
    # loading its own copy.
    terms(first_text)
    # A forked worker's garbage collector would walk every object of the parent (100k chunk rows
    # during a sync), writing to their pages: twice the segmenting time. Frozen objects are
    # skipped. Pool workers are daemons: however this process ends, none is left behind.
    gc.freeze()
    try:
        return context.Pool(procs, initializer=_ignore_interrupt)
    finally:
        gc.unfreeze()


def iter_term_ids(texts: Sequence[str], vocab: dict[str, int], procs: int = 1) -> Iterator[np.ndarray]:
    """The term ids (int32) of `analyzer.terms(text)` for every text, in order, adding new terms to
    `vocab`; `procs` > 1 segments in that many processes."""
    starts = range(0, len(texts), BATCH)
    if procs <= 1 or len(starts) <= 1:
        for start in starts:
            yield from _global_ids(_local_ids(list(texts[start : start + BATCH])), vocab)
        return
    pool: Pool | None = None
    try:
        # Workers are born with SIGINT blocked; a Ctrl-C meanwhile comes once `pool` is held.
        with children_ignore_interrupts():
            pool = _start_pool(procs, texts[0])
        pending: deque[AsyncResult[_Batch]] = deque()
        for start in starts:
            pending.append(pool.apply_async(_local_ids, (list(texts[start : start + BATCH]),)))
            if len(pending) >= 2 * procs:
                yield from _global_ids(pending.popleft().get(), vocab)
        while pending:
            yield from _global_ids(pending.popleft().get(), vocab)
        pool.close()
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()


@dataclass
class SegmentedTerms:
    """Term ids of many texts in one flat int32 array, numbered in the store's own `words`.

    Run n is `flat[offsets[n]:offsets[n + 1]]`; `content` and `title` map a key (a chunk's content
    hash, a title text) to its run. A BM25 index translates the ids into its vocabulary once.
    From a `TermStream`, `flat` is still in its temporary file until `load`: the BM25 build takes
    it, and until then the import's dense process may still be committing its points.
    """

    words: list[str] = field(default_factory=list)
    flat: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    content: dict[str, int] = field(default_factory=dict)
    title: dict[str, int] = field(default_factory=dict)
    spill: IO[bytes] | None = None
    """The temporary file `flat` is read from by `load` (None: `flat` is in memory)."""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def load(self) -> np.ndarray:
        """`flat`, read from the temporary file the first time.

        Raises:
            OSError: the file holds fewer term ids than `offsets` counts.
        """
        if self.spill is not None:
            self.spill.seek(0)
            count = int(self.offsets[-1])
            flat = np.fromfile(self.spill, dtype=np.int32, count=count)
            self.spill.close()
            self.spill = None
            if len(flat) != count:
                raise OSError(f"the term ids' temporary file held {len(flat)} of {count} term ids")
            self.flat = flat
        return self.flat

    def release(self) -> None:
        """Drop every run (their memory), once an index has taken what it needs."""
        if self.spill is not None:
            self.spill.close()
            self.spill = None
        self.words, self.content, self.title = [], {}, {}
        self.flat, self.offsets = np.zeros(0, np.int32), np.zeros(1, np.int64)


class TermStream:
    """Segments texts handed over batch by batch while the caller goes on (`kb import`'s pass).

    Texts are segmented here until `min_docs` were given, then by `procs` forked processes (the
    waiting ones too), or by those processes from the first text once `start_workers` has forked
    them; `finish` waits for the rest and returns the `SegmentedTerms`. A text whose key was given
    before is not segmented again. Only term ids are kept, never the texts, and they wait in a
    temporary file until the BM25 build loads them (`SegmentedTerms.load`): the pass's peak memory
    (the dense process, the segmenters and this process together) is then ~65 MB lower at 100k
    chunks.
    """

    def __init__(self, procs: int = 1, min_docs: int = 2000) -> None:
        self.procs = procs
        self.min_docs = min_docs
        self._given = 0
        self._keys: dict[str, dict[str, int]] = {"content": {}, "title": {}}
        self._buffer: list[str] = []
        self._pool: Pool | None = None
        self._pending: deque[AsyncResult[_Batch]] = deque()
        self._vocab: dict[str, int] = {}
        self._spill: IO[bytes] | None = None
        self._spilled = 0
        """Term ids written to `_spill`."""
        self._lengths: list[np.ndarray] = []

    def start_workers(self) -> None:
        """Fork the `procs` processes now (no-op with one): before the caller's pass has grown this
        process, so that they share few pages with it that it then rewrites (each rewritten page
        would be held twice: the workers keep the old copy)."""
        if self._pool is None and self.procs > 1:
            # Workers are born with SIGINT blocked; a Ctrl-C meanwhile comes once the pool is held.
            with children_ignore_interrupts():
                self._pool = _start_pool(self.procs, _WARM_UP)

    def add(self, kind: str, key: str, text: str) -> None:
        """Segment `text` as run `key` of `kind` (`content` or `title`) unless that key was given."""
        keys = self._keys[kind]
        if key in keys:
            return
        keys[key] = self._given
        self._given += 1
        self._buffer.append(text)
        if self._pool is None and self.procs > 1 and self._given >= self.min_docs:
            # Workers are born with SIGINT blocked; a Ctrl-C meanwhile comes once the pool is held.
            with children_ignore_interrupts():
                self._pool = _start_pool(self.procs, self._buffer[0])
        if self._pool is None and self.procs <= 1 and len(self._buffer) >= BATCH:
            self._take(_local_ids(self._flush()))
        elif self._pool is not None and len(self._buffer) >= BATCH:
            self._dispatch()

    def _flush(self) -> list[str]:
        texts, self._buffer = self._buffer, []
        return texts

    def _dispatch(self) -> None:
        assert self._pool is not None
        while len(self._buffer) >= BATCH:
            texts, self._buffer = self._buffer[:BATCH], self._buffer[BATCH:]
            self._pending.append(self._pool.apply_async(_local_ids, (texts,)))
        # Collect what is done, in order; wait only when many batches are in flight.
        while self._pending and (self._pending[0].ready() or len(self._pending) > 4 * self.procs):
            self._take(self._pending.popleft().get())

    def _take(self, batch: _Batch) -> None:
        ids = _translate(batch, self._vocab)
        if self._spill is None:
            self._spill = tempfile.TemporaryFile(prefix="ragtriage-terms-")
        ids.astype(np.int32, copy=False).tofile(self._spill)
        self._spilled += len(ids)
        self._lengths.append(batch[2])

    def finish(self) -> SegmentedTerms:
        """Segment what is left, wait for the workers, and return every run."""
        if self._buffer:
            if self._pool is not None:
                self._pending.append(self._pool.apply_async(_local_ids, (self._flush(),)))
            else:
                for start in range(0, len(self._buffer), BATCH):
                    self._take(_local_ids(self._buffer[start : start + BATCH]))
                self._buffer = []
        while self._pending:
            self._take(self._pending.popleft().get())
        self._stop_workers()
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        if offsets[-1] != self._spilled:
            raise OSError(f"{self._spilled} term ids were written for {offsets[-1]}")
        segmented = SegmentedTerms(
            words=list(self._vocab),
            offsets=offsets,
            content=self._keys["content"],
            title=self._keys["title"],
            spill=self._spill,
        )
        self._spill = None  # the segmented runs own it now
        self._lengths, self._vocab, self._spilled = [], {}, 0
        return segmented

    def close(self) -> None:
        """Stop the workers and drop the term ids (also when the caller gave up: batches in flight
        are dropped)."""
        self._stop_workers()
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def _stop_workers(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
        self._pending.clear()
