"""BM25 route: a Whoosh index of chunks (only this module and `whoosh_bulk`/`whoosh_blocks`, which
write big additions from term ids as whole segments, touch whoosh).

Scoring is Whoosh's BM25F over two fields, `content` and `title`, the title's term scores
multiplied by `index.title_boost`. Queries are an OR of the analyzer's terms over both fields:
Whoosh's default AND makes most segmented Chinese queries match nothing.

The searcher stays open between queries (warm latency) and is reopened only after this object
wrote, or at most once a second when another process may have changed the index.

Scoring does not run Whoosh's matcher loop (a Python call per posting and per term, 10–30 ms a
query on a few hundred chunks): `_BM25FScores` reads each query term's postings once per open
searcher, turns them into a numpy vector of that term's BM25F contribution, and adds the vectors
up. The formula, statistics and tie order are Whoosh's own, so results equal
`searcher.search(Or(clauses), limit=k)` (a test keeps the two in step).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from whoosh import index as whoosh_index
from whoosh.fields import ID, TEXT, Schema
from whoosh.query import Or, Term
from whoosh.scoring import BM25F
from whoosh.searching import Searcher

from ragtriage.index import whoosh_bulk
from ragtriage.index.analyzer import ChineseAnalyzer
from ragtriage.index.bm25_engine import (
    FLAG_INDEX_EMPTY,
    FLAG_TOKENIZES_TO_NOTHING,
    BM25Document,
    BM25Engine,
    top_rows,
    words_within_edits,
)
from ragtriage.index.bulk_terms import SegmentedTerms
from ragtriage.index.types import ScoredChunk
from ragtriage.interrupts import children_ignore_interrupts

# The document and flags are re-exported: callers of the default engine import them from here.
__all__ = ["BM25Document", "FLAG_INDEX_EMPTY", "FLAG_TOKENIZES_TO_NOTHING", "WhooshIndex"]

INDEX_NAME = "chunks"
_STALENESS_CHECK_S = 1.0


def _schema() -> Schema:
    analyzer = ChineseAnalyzer()
    return Schema(
        chunk_id=ID(stored=True, unique=True),
        doc_id=ID(stored=True),
        content_hash=ID(stored=True),
        index_hash=ID(stored=True),
        # No positions (Whoosh's `Frequency` format): BM25F needs term frequencies and field
        # lengths only, nothing runs phrase queries, and `whoosh_bulk` writes such segments from
        # term ids. Indexes created with positions keep them (Whoosh's writer adds to those).
        title=TEXT(analyzer=analyzer, phrase=False),
        content=TEXT(analyzer=analyzer, phrase=False),
    )


def takes_term_ids(folder: Path) -> bool:
    """`WhooshIndex.takes_term_ids` of the index in `folder` (or of the one a first write creates)."""
    if whoosh_index.exists_in(str(folder), indexname=INDEX_NAME):
        return whoosh_bulk.bulk_supported(whoosh_index.open_dir(str(folder), indexname=INDEX_NAME).schema)
    return whoosh_bulk.bulk_supported(_schema())


class _BM25FScores:
    """Whoosh BM25F over an OR of terms, computed with numpy from postings cached per open searcher.

    For term t in field f of document d (Robertson & Zaragoza 2009, as `whoosh.scoring.BM25F`):
    `idf(t) · tf · (K1 + 1) / (tf + K1 · (1 − B + B · fl / avgfl))` with `idf = ln(N / (df + 1)) + 1`,
    N every document slot (deleted ones too), df the term's document frequency, fl the field length
    Whoosh stores (byte-quantized), avgfl the field's total length / N; a term's field contribution
    is multiplied by its boost and a document's score is the sum over the OR group. Ties keep
    Whoosh's order (lower document number first).
    """

    def __init__(self, searcher: Searcher, weighting: BM25F) -> None:
        self._searcher = searcher
        self._reader = searcher.reader()
        self._b = weighting.B
        self._k1 = weighting.K1
        self._slots = int(self._reader.doc_count_all())
        self._terms: dict[tuple[str, str], tuple[np.ndarray, np.ndarray] | None] = {}
        self._chunk_ids: dict[int, str] = {}

    def _term(self, field: str, text: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(document numbers, BM25F contributions) of one term in one field, read once."""
        key = (field, text)
        if key in self._terms:
            return self._terms[key]
        reader, searcher = self._reader, self._searcher
        btext = text.encode("utf-8")
        entry: tuple[np.ndarray, np.ndarray] | None = None
        if (field, btext) in reader:
            docnums: list[int] = []
            weights: list[float] = []
            lengths: list[int] = []
            # Per segment: a multi-segment reader costs a wrapper call and a lookup per posting.
            for leaf, base in reader.leaf_readers():
                if (field, btext) not in leaf:
                    continue
                matcher = leaf.postings(field, btext)
                field_length = leaf.doc_field_length
                while matcher.is_active():
                    docnum = matcher.id()
                    docnums.append(base + docnum)
                    weights.append(matcher.weight())
                    lengths.append(field_length(docnum, field, 1))
                    matcher.next()
            if docnums:
                idf = searcher.idf(field, btext)
                avgfl = searcher.avg_field_length(field) or 1
                tf = np.asarray(weights, dtype=np.float64)
                fl = np.asarray(lengths, dtype=np.float64)
                b, k1 = self._b, self._k1
                contribution = idf * ((tf * (k1 + 1)) / (tf + k1 * ((1 - b) + b * fl / avgfl)))
                entry = (np.asarray(docnums, dtype=np.int64), contribution)
        self._terms[key] = entry
        return entry

    def docnums(self, field: str, text: str) -> np.ndarray | None:
        """Document numbers holding `text` in `field` (None: none; deleted documents are not listed)."""
        entry = self._term(field, text)
        return None if entry is None else entry[0]

    def top(self, clauses: Sequence[tuple[str, str, float]], k: int) -> list[tuple[str, float]]:
        """(chunk_id, score) of the k best documents for `(field, term, boost)` clauses, best first."""
        scores = np.zeros(self._slots, dtype=np.float64)
        for field, text, boost in clauses:
            entry = self._term(field, text)
            if entry is not None:
                docnums, contribution = entry
                # Document numbers are unique within one posting list, so fancy `+=` is exact.
                scores[docnums] += contribution * boost if boost != 1.0 else contribution
        return [(self._chunk_id(int(docnum)), float(scores[docnum])) for docnum in top_rows(scores, k)]

    def _chunk_id(self, docnum: int) -> str:
        chunk_id = self._chunk_ids.get(docnum)
        if chunk_id is None:
            chunk_id = self._chunk_ids[docnum] = str(self._searcher.stored_fields(docnum)["chunk_id"])
        return chunk_id


def _start_writer_processes(writer: Any) -> list[Any]:
    """Start a multiprocess writer's processes now, with SIGINT blocked, and return them.

    Whoosh starts them lazily from `add_document`, where they inherit this process's Ctrl-C
    handling: a Ctrl-C in a terminal reached them too and each printed a traceback. Blocked,
    they are stopped by this process instead (`_stop_writer_processes`).
    """
    tasks = getattr(writer, "tasks", None)
    if tasks is None:  # a single-process writer
        return []
    with children_ignore_interrupts():
        while len(writer.tasks) < writer.procs:
            writer._new_task()
    return list(writer.tasks)


def _stop_writer_processes(writer: Any, tasks: list[Any]) -> None:
    """End a cancelled writer's processes: Whoosh's `cancel` only flags its own copies of them,
    and they would wait on the job queue forever (and this process's exit for them)."""
    for task in tasks:
        task.terminate()
    for task in tasks:
        task.join()
    jobqueue = getattr(writer, "jobqueue", None)
    if jobqueue is not None:
        jobqueue.cancel_join_thread()  # nothing reads it any more


class WhooshIndex(BM25Engine):
    """The chunk index in Whoosh: BM25F over content and title (the default engine)."""

    def _open(self) -> None:
        folder = str(self.folder)
        if whoosh_index.exists_in(folder, indexname=INDEX_NAME):
            self._index = whoosh_index.open_dir(folder, indexname=INDEX_NAME)
        else:
            self._index = self._create()
        self._searcher: Searcher | None = None
        self._scores: _BM25FScores | None = None
        self._checked_at = 0.0
        self._lock = threading.RLock()

    def _create(self) -> whoosh_index.FileIndex:
        try:
            return whoosh_index.create_in(str(self.folder), _schema(), indexname=INDEX_NAME)
        except whoosh_index.LockError:
            raise self._locked_error() from None

    # ------------------------------------------------------------ writing

    def takes_term_ids(self) -> bool:
        """True if additions can be written from term ids (`whoosh_bulk`): an index without
        positions, as created since then."""
        return whoosh_bulk.bulk_supported(self._index.schema)

    def apply(
        self,
        upserts: Sequence[BM25Document],
        deletes: Iterable[str] = (),
        on_progress: Callable[[int], None] | None = None,
        segmented: SegmentedTerms | None = None,
    ) -> None:
        """Add or replace `upserts` and remove `deletes` (chunk ids) in one commit.

        When `takes_term_ids`, additions with `segmented` (`kb import` segments the texts during
        its pass; a document whose content and title it holds may come with empty `content`) and
        big ones (segmented here by `procs` processes) are written from term ids (`whoosh_bulk`);
        `segmented` is left empty then. Otherwise big additions use `procs` Whoosh writer
        processes and leave one segment per process.
        """
        delete_ids = list(deletes)
        if not upserts and not delete_ids:
            return
        if (
            upserts
            and self.takes_term_ids()
            and (segmented is not None or len(upserts) >= self.multiproc_min_docs)
        ):
            try:
                whoosh_bulk.apply(
                    self._index,
                    upserts,
                    delete_ids,
                    segmented,
                    self.procs,
                    self.writer_timeout_s,
                    on_progress,
                )
            except whoosh_index.LockError:
                raise self._locked_error() from None
            self._invalidate()
            return
        big = len(upserts) >= self.multiproc_min_docs and self.procs > 1
        kwargs: dict[str, object] = {"timeout": self.writer_timeout_s, "limitmb": 128}
        if big:
            kwargs.update(procs=self.procs, multisegment=True)
        try:
            writer = self._index.writer(**kwargs)
        except whoosh_index.LockError:
            raise self._locked_error() from None
        tasks = _start_writer_processes(writer) if big else []
        try:
            for chunk_id in [*delete_ids, *(doc.chunk_id for doc in upserts)]:
                writer.delete_by_term("chunk_id", chunk_id)
            for done, doc in enumerate(upserts, start=1):
                writer.add_document(
                    chunk_id=doc.chunk_id,
                    doc_id=doc.doc_id,
                    content_hash=doc.content_hash,
                    index_hash=doc.index_hash,
                    title=doc.title,
                    content=doc.content,
                )
                if on_progress is not None and done % 200 == 0:
                    on_progress(done)
            writer.commit(mergetype=whoosh_bulk.merge_small_segments)
        except BaseException:
            writer.cancel()
            _stop_writer_processes(writer, tasks)
            raise
        if on_progress is not None:
            on_progress(len(upserts))
        self._invalidate()

    def clear(self) -> None:
        """Drop every document (recreates the empty index)."""
        with self._lock:
            self._close_searcher()
            self._index = self._create()

    # ------------------------------------------------------------ reading

    def _invalidate(self) -> None:
        with self._lock:
            self._close_searcher()

    def _close_searcher(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None
        self._scores = None

    def _current_searcher(self) -> Searcher:
        """The open searcher, reopened if this object wrote or (checked once a second) another process did."""
        now = time.monotonic()
        if self._searcher is None:
            self._searcher = self._index.searcher(weighting=BM25F())
            self._checked_at = now
        elif now - self._checked_at > _STALENESS_CHECK_S:
            self._checked_at = now
            if not self._searcher.up_to_date():
                self._searcher = self._searcher.refresh()
                self._scores = None
        return self._searcher

    def _current_scores(self) -> _BM25FScores:
        searcher = self._current_searcher()
        if self._scores is None:
            self._scores = _BM25FScores(searcher, searcher.weighting)
        return self._scores

    def _top(self, terms: Sequence[str], k: int) -> list[tuple[str, float]] | None:
        """BM25F of the OR group (`_clauses`) over the open searcher; None if nothing is indexed."""
        clauses = self._clauses(terms)
        with self._lock:
            scores = self._current_scores()
            if self._searcher is None or self._searcher.doc_count() == 0:
                return None
            return scores.top(clauses, k)

    def _clauses(self, terms: Sequence[str]) -> list[tuple[str, str, float]]:
        """(field, term, boost) of the OR group: every term in `content`, and in `title` with the boost."""
        clauses: list[tuple[str, str, float]] = []
        for term in terms:
            clauses.append(("content", term, 1.0))
            clauses.append(("title", term, self.title_boost))
        return clauses

    def search_with_whoosh(self, query: str, k: int) -> list[ScoredChunk]:
        """The same search run by Whoosh's own query engine (the reference `search` is checked against)."""
        terms = self.query_terms(query)
        query_tree = Or([Term(field, term, boost=boost) for field, term, boost in self._clauses(terms)])
        with self._lock:
            results = self._current_searcher().search(query_tree, limit=k)
            return [
                ScoredChunk(chunk_id=hit["chunk_id"], rank=rank, score=float(hit.score))
                for rank, hit in enumerate(results, start=1)
            ]

    def indexed_hashes(self) -> dict[str, tuple[str, str]]:
        """chunk_id → (content_hash, index_hash) of every indexed chunk."""
        with self._lock:
            searcher = self._current_searcher()
            return {
                fields["chunk_id"]: (fields.get("content_hash", ""), fields.get("index_hash", ""))
                for fields in searcher.all_stored_fields()
            }

    def content_hash(self, chunk_id: str) -> str | None:
        """The content hash the index holds for `chunk_id`, or None if it is not indexed."""
        with self._lock:
            fields = self._current_searcher().document(chunk_id=chunk_id)
        return None if fields is None else str(fields.get("content_hash", ""))

    def doc_count(self) -> int:
        """Number of indexed chunks."""
        with self._lock:
            return int(self._current_searcher().doc_count())

    def term_stats(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """`(indexed chunks, {term: chunks holding it in title or content})` (lexical support's idf)."""
        with self._lock:
            searcher = self._current_searcher()
            scores = self._current_scores()
            total = int(searcher.doc_count())
            frequencies: dict[str, int] = {}
            for term in terms:
                postings = [scores.docnums(field, term) for field in ("content", "title")]
                held = [p for p in postings if p is not None]
                frequencies[term] = int(np.unique(np.concatenate(held)).size) if held else 0
        return total, frequencies

    def near_terms(self, term: str, max_edits: int = 1) -> list[str]:
        """Indexed words (title or text) within `max_edits` Damerau–Levenshtein edits of `term`,
        sharing its first character (lexical support's typo tolerance). Whoosh's own `terms_within`
        counts a transposition as two edits, so the words under the prefix are measured here."""
        words: list[str] = []
        with self._lock:
            reader = self._current_searcher().reader()
            for field in ("content", "title"):
                schema_field = reader.schema[field]
                words.extend(schema_field.from_bytes(raw) for raw in reader.expand_prefix(field, term[:1]))
        return words_within_edits(term, words, max_edits)

    def lexicon(self, field: str = "content") -> list[str]:
        """Every term of `field` (for inspection and tests)."""
        with self._lock:
            reader = self._current_searcher().reader()
            return [
                term.decode("utf-8") if isinstance(term, bytes) else term for term in reader.lexicon(field)
            ]

    def close(self) -> None:
        """Close the searcher (the index needs no other cleanup)."""
        with self._lock:
            self._close_searcher()

    def __repr__(self) -> str:
        return f"WhooshIndex(folder={str(self.folder)!r})"
