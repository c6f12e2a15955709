"""BM25 route on `bm25s` (sparse score matrices): builds big KBs in a fraction of Whoosh's time.

`[index] bm25_engine = "bm25s"` selects it; Whoosh (`bm25.py`) stays the default, and a home
keeps its Whoosh index until the engine is changed. Both take their terms from the same analyzer
(`analyzer.terms`), so a query matches the same words in either.

Scoring: two `bm25s.BM25` models, one over chunk content and one over the title (title + heading
path), summed with the title boost, as Whoosh's BM25F sums its fields (bm25s's default Lucene
variant, k1 = 1.2, b = 0.75). Scores differ from Whoosh's (idf and length quantization differ);
rankings mostly agree. Only chunks sharing at least one query term are returned; ties keep the
order in which chunks were indexed.

bm25s has no incremental update, so every change rebuilds both models. To do that without
segmenting unchanged chunks again, `<folder>/current/` keeps each chunk's term ids (`<field>.ids.npy`
and `<field>.offsets.npy` over the vocabulary in `meta.json`) beside the models (`bm25s.BM25.save`,
memory-mapped on load) and each chunk's ids and hashes. A write builds a new folder and swaps it
in with renames; a lock file keeps writers to one at a time.
"""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from ragtriage.index.analyzer import terms
from ragtriage.index.bm25_engine import (
    BM25S_B,
    BM25S_K1,
    BM25Document,
    BM25Engine,
    BM25Query,
    locked_error,
    words_within_edits,
)
from ragtriage.interrupts import children_ignore_interrupts

__all__ = ["BM25sIndex"]

FIELDS = ("content", "title")
_CURRENT = "current"
_STALENESS_CHECK_S = 1.0
_POOL_CHUNKSIZE = 64


def _segmented(texts: list[str], procs: int) -> Iterator[list[str]]:
    """`analyzer.terms` of each text, in order; by `procs` forked processes when above one."""
    if procs <= 1 or len(texts) < 2 * _POOL_CHUNKSIZE:
        yield from map(terms, texts)
        return
    terms("预热")  # jieba's dictionary is loaded once, before the fork, not in every process
    with children_ignore_interrupts():
        pool = multiprocessing.get_context("fork").Pool(procs)
    try:
        yield from pool.imap(terms, texts, chunksize=_POOL_CHUNKSIZE)
    finally:
        pool.terminate()
        pool.join()


class _Field:
    """The term ids of every chunk in one field, as a flat int32 array and offsets into it."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self.ids, self.offsets = ids, offsets

    def run(self, n: int) -> np.ndarray:
        return self.ids[self.offsets[n] : self.offsets[n + 1]]

    @staticmethod
    def join(runs: Sequence[np.ndarray]) -> _Field:
        offsets = np.zeros(len(runs) + 1, dtype=np.int64)
        np.cumsum([len(run) for run in runs], out=offsets[1:])
        ids = np.concatenate(runs).astype(np.int32) if runs else np.zeros(0, dtype=np.int32)
        return _Field(ids, offsets)


class BM25sIndex(BM25Engine):
    """The chunk index on bm25s: summed BM25 of content and title (`[index] bm25_engine = "bm25s"`)."""

    def _open(self) -> None:
        self._lock = threading.RLock()
        self._models: dict[str, bm25s.BM25] = {}
        self._meta: dict[str, Any] | None = None
        self._stamp: str | None = None
        self._vocab: dict[str, int] = {}
        self._checked_at = 0.0

    # ------------------------------------------------------------ writing

    def apply(
        self,
        upserts: Sequence[BM25Document],
        deletes: Iterable[str] = (),
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        """Add or replace `upserts` and remove `deletes` (chunk ids), then rebuild both models.

        Contents whose hash the index already holds are not segmented again; big additions are
        segmented by `procs` processes.

        Raises:
            IndexLockedError: another process holds the write lock for `writer_timeout_s`.
        """
        delete_ids = set(deletes)
        if not upserts and not delete_ids:
            return
        with self._write_lock():
            meta = self._read_meta() or {
                "chunk_ids": [],
                "doc_ids": [],
                "content_hashes": [],
                "index_hashes": [],
                "vocab": [],
            }
            fields = self._read_fields()
            replaced = delete_ids | {doc.chunk_id for doc in upserts}
            keep = [n for n, chunk_id in enumerate(meta["chunk_ids"]) if chunk_id not in replaced]
            vocab: dict[str, int] = {term: n for n, term in enumerate(meta["vocab"])}
            known = {content_hash: n for n, content_hash in enumerate(meta["content_hashes"])}
            todo = {doc.content_hash: doc.content for doc in upserts if doc.content_hash not in known}
            procs = self.procs if len(todo) >= self.multiproc_min_docs else 1
            fresh: dict[str, np.ndarray] = {}
            segmented = _segmented(list(todo.values()), procs)
            for done, (content_hash, words) in enumerate(zip(todo, segmented, strict=True), start=1):
                fresh[content_hash] = _ids(words, vocab)
                if on_progress is not None and done % 500 == 0:
                    on_progress(done)
            content = [fields["content"].run(n) for n in keep]
            for doc in upserts:
                n = known.get(doc.content_hash)
                content.append(fields["content"].run(n) if n is not None else fresh[doc.content_hash])
            titles = {title: _ids(terms(title), vocab) for title in {doc.title for doc in upserts}}
            title = [fields["title"].run(n) for n in keep] + [titles[doc.title] for doc in upserts]
            for key in ("chunk_ids", "doc_ids", "content_hashes", "index_hashes"):
                meta[key] = [meta[key][n] for n in keep]
            for doc in upserts:
                meta["chunk_ids"].append(doc.chunk_id)
                meta["doc_ids"].append(doc.doc_id)
                meta["content_hashes"].append(doc.content_hash)
                meta["index_hashes"].append(doc.index_hash)
            meta["vocab"] = list(vocab)
            joined = {"content": _Field.join(content), "title": _Field.join(title)}
            del fields, fresh, titles, content, title  # the build needs the room
            self._write(meta, joined)
        if on_progress is not None:
            on_progress(len(upserts))
        self._invalidate()

    def clear(self) -> None:
        """Drop every document."""
        with self._write_lock():
            shutil.rmtree(self.folder / _CURRENT, ignore_errors=True)
        self._invalidate()

    def _write_lock(self) -> _FileLock:
        return _FileLock(self.folder / "write.lock", self.writer_timeout_s, self.folder)

    def _write(self, meta: dict[str, Any], fields: dict[str, _Field]) -> None:
        """Build both models and swap the new version in (`current` is replaced by a rename)."""
        staging = self.folder / f"staging-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        vocab = {term: n for n, term in enumerate(meta["vocab"])}
        ints = list(range(len(vocab)))  # shared int objects: one pointer per token, not one int each
        for name, field in fields.items():
            np.save(staging / f"{name}.ids.npy", field.ids)
            np.save(staging / f"{name}.offsets.npy", field.offsets)
            if len(field.ids):  # bm25s divides by the mean length: a field without terms gets no model
                corpus = [[ints[i] for i in field.run(n).tolist()] for n in range(len(field.offsets) - 1)]
                # No scipy COO → CSC copies of every score; k1 and b are baked into the scores here.
                model = bm25s.BM25(k1=BM25S_K1, b=BM25S_B, csc_backend="numpy")
                model.index(
                    bm25s.tokenization.Tokenized(ids=corpus, vocab=vocab),
                    create_empty_token=False,
                    show_progress=False,
                )
                del corpus
                model.save(str(staging / name))
                del model
        meta["stamp"] = f"{time.time_ns()}-{os.getpid()}"
        (staging / "meta.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        (staging / "stamp").write_text(str(meta["stamp"]), encoding="utf-8")
        current, old = self.folder / _CURRENT, self.folder / f"old-{os.getpid()}"
        if current.exists():
            current.rename(old)
        staging.rename(current)
        shutil.rmtree(old, ignore_errors=True)

    def _read_fields(self) -> dict[str, _Field]:
        current = self.folder / _CURRENT
        if not (current / "meta.json").exists():
            return {name: _Field.join([]) for name in FIELDS}
        return {
            name: _Field(np.load(current / f"{name}.ids.npy"), np.load(current / f"{name}.offsets.npy"))
            for name in FIELDS
        }

    def _read_meta(self) -> dict[str, Any] | None:
        path = self.folder / _CURRENT / "meta.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
        except FileNotFoundError:
            return None

    # ------------------------------------------------------------ reading

    def _invalidate(self) -> None:
        with self._lock:
            self._models, self._meta, self._stamp = {}, None, None

    def _current(self) -> tuple[dict[str, bm25s.BM25], dict[str, Any]]:
        """The loaded models and metadata, reloaded after any write (the stamp file is checked at
        most once a second)."""
        now = time.monotonic()
        if self._meta is not None and now - self._checked_at <= _STALENESS_CHECK_S:
            return self._models, self._meta
        self._checked_at = now
        try:
            stamp: str | None = (self.folder / _CURRENT / "stamp").read_text(encoding="utf-8")
        except FileNotFoundError:
            stamp = None
        if self._meta is None or stamp != self._stamp:
            meta = self._read_meta() or {"chunk_ids": [], "vocab": [], "stamp": None}
            self._models = {
                name: bm25s.BM25.load(str(self.folder / _CURRENT / name), mmap=True)
                for name in FIELDS
                if (self.folder / _CURRENT / name).is_dir()
            }
            self._vocab = {term: n for n, term in enumerate(meta["vocab"])}
            self._meta, self._stamp = meta, meta["stamp"]
        return self._models, self._meta or {}

    def _top(self, terms: Sequence[str], k: int, settings: BM25Query) -> list[tuple[str, float]] | None:
        """Content BM25 plus `settings.title_boost` × title BM25 of the terms (0: content alone);
        None if nothing is indexed. k1 and b are the ones the models were built with (`BM25S_K1`,
        `BM25S_B`): bm25s stores precomputed scores, so `settings.k1`/`b` cannot change them."""
        with self._lock:
            models, meta = self._current()
            if not meta["chunk_ids"]:
                return None
            ids = [self._vocab[term] for term in terms if term in self._vocab]
            if not ids:
                return []
            chunk_ids = meta["chunk_ids"]
            scores = np.zeros(len(chunk_ids), dtype=np.float64)
            for name, model in models.items():
                weight = settings.title_boost if name == "title" else 1.0
                if weight:
                    scores += weight * model.get_scores_from_ids(ids)
        matched = np.flatnonzero(scores > 0)
        # Best first; equal scores keep the order of indexing (a stable sort).
        best = matched[np.argsort(-scores[matched], kind="stable")][:k]
        return [(chunk_ids[n], float(scores[n])) for n in best]

    def near_terms(self, term: str, max_edits: int = 1) -> list[str]:
        """Indexed words within `max_edits` Damerau–Levenshtein edits of `term`, sharing its first
        character (lexical support's typo tolerance), as `WhooshIndex.near_terms`."""
        with self._lock:
            self._current()
            words = [w for w in self._vocab if w[:1] == term[:1]]
        return words_within_edits(term, words, max_edits)

    def term_stats(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """`(indexed chunks, {term: chunks holding it in title or content})` (lexical support's idf)."""
        with self._lock:
            models, meta = self._current()
            frequencies: dict[str, int] = {}
            for term in terms:
                column = self._vocab.get(term)
                held = np.zeros(len(meta["chunk_ids"]), dtype=bool)
                for model in models.values() if column is not None else ():
                    held |= model.get_scores_from_ids([column]) > 0
                frequencies[term] = int(np.count_nonzero(held))
            return len(meta["chunk_ids"]), frequencies

    def indexed_hashes(self) -> dict[str, tuple[str, str]]:
        """chunk_id → (content_hash, index_hash) of every indexed chunk."""
        meta = self._read_meta()
        if meta is None:
            return {}
        pairs = zip(meta["content_hashes"], meta["index_hashes"], strict=True)
        return dict(zip(meta["chunk_ids"], pairs, strict=True))

    def content_hash(self, chunk_id: str) -> str | None:
        """The content hash the index holds for `chunk_id`, or None if it is not indexed."""
        return self.indexed_hashes().get(chunk_id, (None, None))[0]

    def doc_count(self) -> int:
        """Number of indexed chunks."""
        with self._lock:
            return len(self._current()[1]["chunk_ids"])

    def lexicon(self, field: str = "content") -> list[str]:
        """Every term of `field` (for inspection and tests), in vocabulary order."""
        meta = self._read_meta()
        if meta is None:
            return []
        return [meta["vocab"][n] for n in np.unique(self._read_fields()[field].ids)]

    def close(self) -> None:
        """Drop the loaded models (the index needs no other cleanup)."""
        self._invalidate()

    def __repr__(self) -> str:
        return f"BM25sIndex(folder={str(self.folder)!r})"


def _ids(words: list[str], vocab: dict[str, int]) -> np.ndarray:
    """The term ids of `words`, new words added to `vocab`."""
    return np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), dtype=np.int32, count=len(words))


class _FileLock:
    """An exclusive `flock` on a file, waited for up to `timeout_s` (one writer per index folder)."""

    def __init__(self, path: Path, timeout_s: float, folder: Path) -> None:
        self.path, self.timeout_s, self.folder = path, timeout_s, folder
        self._handle: Any = None

    def __enter__(self) -> _FileLock:
        self._handle = self.path.open("a")
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                fcntl.flock(self._handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    self._handle.close()
                    raise locked_error(self.folder) from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()
