"""BM25 route: a Whoosh index of chunks (nothing else in the package touches whoosh).

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
from dataclasses import dataclass
from pathlib import Path

from whoosh import index as whoosh_index
from whoosh.fields import ID, TEXT, Schema
from whoosh.query import Or, Term
from whoosh.scoring import BM25F
from whoosh.searching import Searcher

from ragtriage.errors import IndexStateError
from ragtriage.pipeline.analyzer import ChineseAnalyzer, tokenize
from ragtriage.pipeline.types import ScoredChunk

__all__ = ["BM25Document", "FLAG_TOKENIZES_TO_NOTHING", "WhooshIndex"]

FLAG_TOKENIZES_TO_NOTHING = "query-tokenizes-to-nothing"
FLAG_INDEX_EMPTY = "bm25-index-empty"
INDEX_NAME = "chunks"
_STALENESS_CHECK_S = 1.0


def _schema() -> Schema:
    analyzer = ChineseAnalyzer()
    return Schema(
        chunk_id=ID(stored=True, unique=True),
        doc_id=ID(stored=True),
        content_hash=ID(stored=True),
        index_hash=ID(stored=True),
        title=TEXT(analyzer=analyzer),
        content=TEXT(analyzer=analyzer),
    )


@dataclass(frozen=True)
class BM25Document:
    """What the BM25 index holds for one chunk (`index_hash` covers every indexed field)."""

    chunk_id: str
    doc_id: str
    title: str
    content: str
    content_hash: str
    index_hash: str


class WhooshIndex:
    """Create/open the chunk index in a folder, apply changes by chunk id, and search it."""

    kind = "bm25"

    def __init__(
        self,
        folder: Path,
        *,
        title_boost: float = 2.0,
        procs: int = 1,
        multiproc_min_docs: int = 2000,
        writer_timeout_s: float = 5.0,
    ) -> None:
        self.folder = folder
        self.title_boost = title_boost
        self.procs = procs
        self.multiproc_min_docs = multiproc_min_docs
        self.writer_timeout_s = writer_timeout_s
        folder.mkdir(parents=True, exist_ok=True)
        if whoosh_index.exists_in(str(folder), indexname=INDEX_NAME):
            self._index = whoosh_index.open_dir(str(folder), indexname=INDEX_NAME)
        else:
            self._index = self._create()
        self._searcher: Searcher | None = None
        self._checked_at = 0.0
        self._lock = threading.RLock()

    def _create(self) -> whoosh_index.FileIndex:
        try:
            return whoosh_index.create_in(str(self.folder), _schema(), indexname=INDEX_NAME)
        except whoosh_index.LockError:
            raise self._locked_error() from None

    def _locked_error(self) -> IndexStateError:
        return IndexStateError(
            f"{self.folder}: another ragtriage process is writing the BM25 index; "
            "wait for it to finish (or stop it) and try again"
        )

    # ------------------------------------------------------------ writing

    def apply(
        self,
        upserts: Sequence[BM25Document],
        deletes: Iterable[str] = (),
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        """Add or replace `upserts` and remove `deletes` (chunk ids) in one commit.

        Big additions use `procs` writer processes and leave one segment per process.
        """
        delete_ids = list(deletes)
        if not upserts and not delete_ids:
            return
        big = len(upserts) >= self.multiproc_min_docs and self.procs > 1
        kwargs: dict[str, object] = {"timeout": self.writer_timeout_s, "limitmb": 128}
        if big:
            kwargs.update(procs=self.procs, multisegment=True)
        try:
            writer = self._index.writer(**kwargs)
        except whoosh_index.LockError:
            raise self._locked_error() from None
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
            raise
        if on_progress is not None:
            on_progress(len(upserts))
        self._invalidate()

    def delete(self, chunk_ids: Iterable[str]) -> None:
        """Remove chunks by id."""
        self.apply([], chunk_ids)

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

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        """Top-k chunks by BM25F (ranks from 1) and flags such as `query-tokenizes-to-nothing`."""
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms:
            return [], [FLAG_TOKENIZES_TO_NOTHING]
        clauses = []
        for term in terms:
            clauses.append(Term("content", term))
            clauses.append(Term("title", term, boost=self.title_boost))
        with self._lock:
            searcher = self._current_searcher()
            if searcher.doc_count() == 0:
                return [], [FLAG_INDEX_EMPTY]
            results = searcher.search(Or(clauses), limit=k)
            hits = [
                ScoredChunk(chunk_id=hit["chunk_id"], rank=rank, score=float(hit.score))
                for rank, hit in enumerate(results, start=1)
            ]
        return hits, []

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
