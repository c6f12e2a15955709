"""BM25 route: a Whoosh index of chunks (the only module that touches whoosh).

Scoring is Whoosh's BM25F over two fields, `content` and `title`, the title's term scores
multiplied by `index.title_boost`. Queries are an OR of the analyzer's terms over both fields:
Whoosh's default AND makes most segmented Chinese queries match nothing.

The searcher stays open between queries (warm latency) and is reopened only after this object
wrote, or at most once a second when another process may have changed the index.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from whoosh import index as whoosh_index
from whoosh.fields import ID, TEXT, Schema
from whoosh.query import Or, Term
from whoosh.scoring import BM25F
from whoosh.searching import Searcher

from ragtriage.errors import IndexStateError
from ragtriage.index.analyzer import ChineseAnalyzer, terms
from ragtriage.index.bm25_engine import (
    FLAG_INDEX_EMPTY,
    FLAG_TOKENIZES_TO_NOTHING,
    BM25Document,
    BM25Engine,
    BM25Query,
    words_within_edits,
)
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
        # No positions: BM25F needs term frequencies and field lengths only, and nothing runs
        # phrase queries.
        title=TEXT(analyzer=analyzer, phrase=False),
        content=TEXT(analyzer=analyzer, phrase=False),
    )


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
        try:
            exists = whoosh_index.exists_in(folder, indexname=INDEX_NAME)
            if exists:
                self._index = whoosh_index.open_dir(folder, indexname=INDEX_NAME)
        except (ModuleNotFoundError, AttributeError) as error:
            # Whoosh pickles the analyzer's class into the index; an index written before the
            # analyzer moved (`ragtriage.pipeline.analyzer`) cannot name it any more.
            raise IndexStateError(
                f"the BM25 index in {folder} was written by an older ragtriage ({error}); "
                "run `ragtriage kb reindex` to rebuild it (embeddings are cached: nothing is "
                "embedded again)"
            ) from None
        if not exists:
            self._index = self._create()
        self._searcher: Searcher | None = None
        self._checked_at = 0.0
        self._lock = threading.RLock()

    def _create(self) -> whoosh_index.FileIndex:
        try:
            return whoosh_index.create_in(str(self.folder), _schema(), indexname=INDEX_NAME)
        except whoosh_index.LockError:
            raise self._locked_error() from None

    # ------------------------------------------------------------ writing

    def apply(
        self,
        upserts: Sequence[BM25Document],
        deletes: Iterable[str] = (),
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        """Add or replace `upserts` and remove `deletes` (chunk ids) in one commit.

        Big additions use `procs` Whoosh writer processes (`multisegment`: one segment each).
        """
        delete_ids = list(deletes)
        if not upserts and not delete_ids:
            return
        big = len(upserts) >= self.multiproc_min_docs and self.procs > 1
        if big:
            terms("预热")  # jieba's dictionary is loaded once, before the writers fork, not in each
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
            writer.commit()
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
        return self._searcher

    def _top(self, terms: Sequence[str], k: int, settings: BM25Query) -> list[tuple[str, float]] | None:
        """Whoosh's BM25F (`settings.k1`, `settings.b`, taken at search time) of the OR group: every
        term in `content`, and in `title` with the title boost (0: the title is not searched);
        None if nothing is indexed."""
        clauses = [Term("content", term) for term in terms]
        if settings.title_boost > 0:
            clauses += [Term("title", term, boost=settings.title_boost) for term in terms]
        with self._lock:
            searcher = self._current_searcher()
            if searcher.doc_count() == 0:
                return None
            collector = searcher.collector(limit=k)
            context = searcher.context(weighting=BM25F(B=settings.b, K1=settings.k1))
            searcher.search_with_collector(Or(clauses), collector, context)
            return [(str(hit["chunk_id"]), float(hit.score)) for hit in collector.results()]

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
            frequencies = {
                term: sum(
                    1 for _ in searcher.docs_for_query(Or([Term("content", term), Term("title", term)]))
                )
                for term in terms
            }
            return int(searcher.doc_count()), frequencies

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
