"""BM25 route on `bm25s` (sparse score matrices in numpy): builds 100k chunks in seconds, not minutes.

`[index] bm25_engine = "bm25s"` selects it; Whoosh (`bm25.py`) stays the default, and a home
keeps its Whoosh index until the engine is changed. Both take their terms from the same analyzer
(`analyzer.terms` equals `analyzer.tokenize`), so a query matches the same words in either.

Scoring: two BM25 models, one over chunk content and one over the title (title + heading path),
summed with the title boost, as Whoosh's BM25F sums its fields. Per field, for term t in chunk d
(the Lucene variant, Kamphuis et al. 2020 "Which BM25 do you mean?", as `bm25s`, Lù 2024):
`idf(t) · tf / (tf + k1 · (1 − b + b · |d| / avgdl))` with `idf = ln(1 + (N − df + 0.5) / (df + 0.5))`,
k1 = 1.2, b = 0.75. Scores differ from Whoosh's (idf and length quantization differ); rankings
mostly agree. Only chunks sharing at least one query term are returned; ties keep the order in
which chunks were indexed.

On disk, `<folder>/current/` holds both bm25s models (`bm25s.BM25.save`, memory-mapped on load),
the term ids of every chunk (so a change rebuilds the models without segmenting unchanged chunks
again: the token cache, keyed by content hash), the vocabulary and each chunk's ids and hashes. A
write builds a new folder and swaps it in with renames; a lock file keeps writers to one at a time.
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from ragtriage.index.bm25_engine import BM25Document, BM25Engine, locked_error, top_rows, words_within_edits
from ragtriage.index.bm25s_matrix import save_model, score_matrix
from ragtriage.index.bm25s_runs import Given, Runs
from ragtriage.index.bulk_terms import SegmentedTerms, iter_term_ids
from ragtriage.index.heap import trim_heap

if TYPE_CHECKING:
    import bm25s

__all__ = ["BM25sIndex", "import_bm25s"]

FIELDS = ("content", "title")
K1 = 1.2
B = 0.75
_CURRENT = "current"
_STALENESS_CHECK_S = 1.0
_EMPTY_META: dict[str, Any] = {
    "chunk_ids": [],
    "doc_ids": [],
    "content_hashes": [],
    "index_hashes": [],
    "vocab": [],
    "stamp": None,
}


@dataclass
class _State:
    """Everything one version of the index holds (term ids as int32 runs per chunk and field)."""

    chunk_ids: list[str]
    doc_ids: list[str]
    content_hashes: list[str]
    index_hashes: list[str]
    vocab: dict[str, int]
    terms: dict[str, Runs]
    """field → the term ids of every chunk, in chunk order."""

    @classmethod
    def empty(cls) -> _State:
        return cls([], [], [], [], {}, {field: Runs.empty() for field in FIELDS})


def import_bm25s() -> ModuleType:
    """bm25s, imported on first use (a build never needs it) and without numba.

    bm25s imports numba when it is installed (ranx brings it): about 60 MB and half a CPU-second
    per process, for bm25s's `numba` backend only; the index scores with numpy
    (`get_scores_from_ids`), so numba is hidden while bm25s is first imported.
    """
    hide = "numba" not in sys.modules and "bm25s" not in sys.modules
    if hide:
        sys.modules["numba"] = None  # type: ignore[assignment]  # `import numba` raises ImportError
    try:
        return importlib.import_module("bm25s")
    finally:
        if hide:
            del sys.modules["numba"]


class BM25sIndex(BM25Engine):
    """The chunk index on bm25s: summed BM25 of content and title (`[index] bm25_engine = "bm25s"`)."""

    def _open(self) -> None:
        self._lock = threading.RLock()
        self._models: dict[str, bm25s.BM25] | None = None
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
        *,
        segmented: SegmentedTerms | None = None,
    ) -> None:
        """Add or replace `upserts` and remove `deletes` (chunk ids), then rebuild both models.

        Chunks whose content hash the index already holds are not segmented again, nor contents and
        titles `segmented` holds (`kb import` segments them during its pass: such a document may
        come with empty `content`). `segmented` is consumed: its term ids move into the index and
        it is left empty. Big additions are segmented by `procs` processes.

        Raises:
            IndexLockedError: another process holds the write lock for `writer_timeout_s`.
        """
        delete_ids = set(deletes)
        if not upserts and not delete_ids:
            return
        with self._write_lock():
            state = self._changed(self._read_state(), upserts, delete_ids, on_progress, segmented)
            if segmented is not None:
                segmented.release()  # the index holds what it needs of them (the build needs room)
            trim_heap()
            self._write_state(state)
            del state
        if on_progress is not None:
            on_progress(len(upserts))
        self._invalidate()

    def clear(self) -> None:
        """Drop every document."""
        with self._write_lock():
            self._write_state(_State.empty())
        self._invalidate()

    def _changed(
        self,
        state: _State,
        upserts: Sequence[BM25Document],
        deletes: set[str],
        on_progress: Callable[[int], None] | None,
        segmented: SegmentedTerms | None = None,
    ) -> _State:
        replaced = deletes | {doc.chunk_id for doc in upserts}
        keep = [n for n, chunk_id in enumerate(state.chunk_ids) if chunk_id not in replaced]
        vocab = state.vocab
        old = state.terms["content"]
        known = {content_hash: n for n, content_hash in enumerate(state.content_hashes)}
        given = Given(segmented, vocab)
        todo = {
            doc.content_hash: doc.content
            for doc in upserts
            if doc.content_hash not in known and not given.has("content", doc.content_hash)
        }
        procs = self.procs if len(todo) >= self.multiproc_min_docs else 1
        fresh: dict[str, np.ndarray] = {}
        contents = iter_term_ids(list(todo.values()), vocab, procs)
        for done, (content_hash, ids) in enumerate(zip(todo, contents, strict=True), start=1):
            fresh[content_hash] = ids
            if on_progress is not None and done % 500 == 0:
                on_progress(done)
        content_runs = [old.run(n) for n in keep]
        for doc in upserts:
            n = known.get(doc.content_hash)
            run = given.run("content", doc.content_hash) if n is None else old.run(n)
            content_runs.append(fresh[doc.content_hash] if run is None else run)
        titles = list(dict.fromkeys(doc.title for doc in upserts if not given.has("title", doc.title)))
        fresh = dict(zip(titles, iter_term_ids(titles, vocab), strict=True))
        title_runs = [state.terms["title"].run(n) for n in keep]
        for doc in upserts:
            run = given.run("title", doc.title)
            title_runs.append(fresh[doc.title] if run is None else run)
        return _State(
            chunk_ids=[state.chunk_ids[n] for n in keep] + [doc.chunk_id for doc in upserts],
            doc_ids=[state.doc_ids[n] for n in keep] + [doc.doc_id for doc in upserts],
            content_hashes=[state.content_hashes[n] for n in keep] + [doc.content_hash for doc in upserts],
            index_hashes=[state.index_hashes[n] for n in keep] + [doc.index_hash for doc in upserts],
            vocab=vocab,
            terms={"content": Runs.join(content_runs), "title": Runs.join(title_runs)},
        )

    def _write_lock(self) -> _FileLock:
        return _FileLock(self.folder / "write.lock", self.writer_timeout_s, self.folder)

    def _write_state(self, state: _State) -> None:
        """Build both models and swap the new version in (`current` is replaced by a rename)."""
        staging = self.folder / f"staging-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        for field in FIELDS:
            runs = state.terms[field]
            np.save(staging / f"{field}.terms.npy", runs.flat)
            np.save(staging / f"{field}.offsets.npy", runs.offsets)
            if len(runs):
                matrix = score_matrix(runs.flat, runs.offsets, len(state.vocab), k1=K1, b=B)
                save_model(staging / field, matrix, state.vocab, k1=K1, b=B)
                del matrix
        meta = {
            "chunk_ids": state.chunk_ids,
            "doc_ids": state.doc_ids,
            "content_hashes": state.content_hashes,
            "index_hashes": state.index_hashes,
            "vocab": list(state.vocab),
            "stamp": f"{time.time_ns()}-{os.getpid()}",
        }
        (staging / "meta.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        (staging / "stamp").write_text(str(meta["stamp"]), encoding="utf-8")
        current, old = self.folder / _CURRENT, self.folder / f"old-{os.getpid()}"
        if current.exists():
            current.rename(old)
        staging.rename(current)
        shutil.rmtree(old, ignore_errors=True)

    def _read_state(self) -> _State:
        current = self.folder / _CURRENT
        meta = self._read_meta()
        if meta is None:
            return _State.empty()
        terms = {
            field: Runs(np.load(current / f"{field}.terms.npy"), np.load(current / f"{field}.offsets.npy"))
            for field in FIELDS
        }
        vocab = {term: n for n, term in enumerate(meta["vocab"])}
        return _State(
            meta["chunk_ids"], meta["doc_ids"], meta["content_hashes"], meta["index_hashes"], vocab, terms
        )

    def _read_meta(self) -> dict[str, Any] | None:
        path = self.folder / _CURRENT / "meta.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
        except FileNotFoundError:
            return None

    # ------------------------------------------------------------ reading

    def _invalidate(self) -> None:
        with self._lock:
            self._models, self._meta, self._stamp = None, None, None

    def _current(self) -> tuple[dict[str, bm25s.BM25], dict[str, Any]]:
        """The loaded models and metadata, reloaded after any write (the stamp file is checked at
        most once a second; metadata of 100k chunks takes a fraction of a second to read)."""
        now = time.monotonic()
        if self._meta is not None and now - self._checked_at <= _STALENESS_CHECK_S:
            return self._models or {}, self._meta
        self._checked_at = now
        stamp = self._read_stamp()
        if self._meta is None or stamp != self._stamp:
            meta = self._read_meta() or _EMPTY_META
            models = {}
            if meta["chunk_ids"]:
                bm25s = import_bm25s()
                for field in FIELDS:
                    models[field] = bm25s.BM25.load(str(self.folder / _CURRENT / field), mmap=True)
            self._models, self._meta, self._stamp = models, meta, meta["stamp"]
            self._vocab = {term: n for n, term in enumerate(meta["vocab"])}
        return self._models or {}, self._meta

    def _read_stamp(self) -> str | None:
        try:
            return (self.folder / _CURRENT / "stamp").read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def _top(self, terms: Sequence[str], k: int) -> list[tuple[str, float]] | None:
        """Content BM25 plus `title_boost` × title BM25 of the terms; None if nothing is indexed."""
        with self._lock:
            models, meta = self._current()
            if not meta["chunk_ids"]:
                return None
            ids = [self._vocab[term] for term in terms if term in self._vocab]
            if not ids:
                return []
            scores = models["content"].get_scores_from_ids(ids).astype(np.float64)
            scores += self.title_boost * models["title"].get_scores_from_ids(ids)
            chunk_ids = meta["chunk_ids"]
        return [(chunk_ids[n], float(scores[n])) for n in top_rows(scores, k)]

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
            total = len(meta["chunk_ids"])
            frequencies: dict[str, int] = {}
            for term in terms:
                column = self._vocab.get(term)
                if column is None or not models:
                    frequencies[term] = 0
                    continue
                # CSC score matrices: the rows of a term's column are the chunks holding it.
                rows = [
                    model.scores["indices"][
                        model.scores["indptr"][column] : model.scores["indptr"][column + 1]
                    ]
                    for model in (models["content"], models["title"])
                ]
                frequencies[term] = int(np.unique(np.concatenate(rows)).size)
        return total, frequencies

    def indexed_hashes(self) -> dict[str, tuple[str, str]]:
        """chunk_id → (content_hash, index_hash) of every indexed chunk."""
        meta = self._read_meta()
        if meta is None:
            return {}
        return dict(
            zip(
                meta["chunk_ids"], zip(meta["content_hashes"], meta["index_hashes"], strict=True), strict=True
            )
        )

    def content_hash(self, chunk_id: str) -> str | None:
        """The content hash the index holds for `chunk_id`, or None if it is not indexed."""
        return self.indexed_hashes().get(chunk_id, (None, None))[0]

    def doc_count(self) -> int:
        """Number of indexed chunks."""
        with self._lock:
            return len(self._current()[1]["chunk_ids"])

    def lexicon(self, field: str = "content") -> list[str]:
        """Every term of `field` (for inspection and tests), in vocabulary order."""
        state = self._read_state()
        vocab = list(state.vocab)
        return [vocab[n] for n in np.unique(state.terms[field].flat)]

    def close(self) -> None:
        """Drop the loaded models (the index needs no other cleanup)."""
        self._invalidate()

    def __repr__(self) -> str:
        return f"BM25sIndex(folder={str(self.folder)!r})"


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
