"""What the two BM25 engines (`bm25.WhooshIndex`, `bm25s_index.BM25sIndex`) share.

The document they index, their settings, how a query becomes terms, the shape of a search (flags,
ranks from 1, ties by indexing order), the typo tolerance of lexical support and the error a
locked index raises. Each engine keeps its own storage and scoring (`BM25Engine._top`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rapidfuzz.distance import DamerauLevenshtein

from ragtriage.errors import IndexLockedError
from ragtriage.index.analyzer import normalize_text, query_terms
from ragtriage.index.types import ScoredChunk

__all__ = [
    "FLAG_INDEX_EMPTY",
    "FLAG_TOKENIZES_TO_NOTHING",
    "BM25Document",
    "BM25Engine",
    "BM25Query",
    "BM25View",
    "locked_error",
    "words_within_edits",
]

FLAG_TOKENIZES_TO_NOTHING = "query-tokenizes-to-nothing"
FLAG_INDEX_EMPTY = "bm25-index-empty"


@dataclass(frozen=True)
class BM25Document:
    """What the BM25 index holds for one chunk (`index_hash` covers every indexed field)."""

    chunk_id: str
    doc_id: str
    title: str
    content: str
    content_hash: str
    index_hash: str


@dataclass(frozen=True)
class BM25Query:
    """How a search analyses and scores a query: what a replay profile may change without a rebuild.

    `title_boost` multiplies the title field's BM25 (0: the content alone scores); `segmentation`
    and `stop_words` analyse the query only (documents are always indexed with jieba's search mode
    and the analyzer's own stop words: changing those needs another analyzer and a reindex).
    `k1` (term-frequency saturation, ≥ 0) and `b` (length normalisation, 0–1) are BM25's free
    parameters: Whoosh's BM25F takes them at search time; bm25s bakes them into its score matrix
    when it builds the index, so a bm25s index searches with the values it was built with
    (`BM25S_K1`, `BM25S_B`; the settings refuse others).
    """

    title_boost: float = 2.0
    segmentation: str = "search"
    stop_words: frozenset[str] = frozenset()
    k1: float = 1.2
    b: float = 0.75


#: The k1 and b every bm25s index is built with (bm25s's defaults; Lucene's BM25).
BM25S_K1, BM25S_B = 1.2, 0.75


class BM25Engine(ABC):
    """Create/open the chunk index in a folder, apply changes by chunk id, and search it.

    `search` is the same for every engine; a subclass opens its storage in `_open` (called by
    `__init__`) and scores the query's terms in `_top`.
    """

    kind: Literal["bm25", "dense"] = "bm25"

    def __init__(
        self,
        folder: Path,
        *,
        title_boost: float = 2.0,
        query_segmentation: str = "search",
        query_stop_words: Iterable[str] = (),
        k1: float = BM25S_K1,
        b: float = BM25S_B,
        procs: int = 1,
        multiproc_min_docs: int = 2000,
        writer_timeout_s: float = 5.0,
    ) -> None:
        self.folder = folder
        self.query = BM25Query(
            title_boost=title_boost,
            segmentation=query_segmentation,
            stop_words=frozenset(normalize_text(w) for w in query_stop_words),
            k1=k1,
            b=b,
        )
        """How a search analyses and scores a query unless a `BM25View` says otherwise."""
        self.procs = procs
        self.multiproc_min_docs = multiproc_min_docs
        self.writer_timeout_s = writer_timeout_s
        folder.mkdir(parents=True, exist_ok=True)
        self._open()

    @abstractmethod
    def _open(self) -> None:
        """Open the engine's storage in `folder` (created empty if absent) and set up its state."""

    @abstractmethod
    def apply(
        self,
        upserts: Sequence[BM25Document],
        deletes: Iterable[str] = (),
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        """Add or replace `upserts` and remove `deletes` (chunk ids)."""

    def delete(self, chunk_ids: Iterable[str]) -> None:
        """Remove chunks by id."""
        self.apply([], chunk_ids)

    @property
    def title_boost(self) -> float:
        return self.query.title_boost

    @property
    def query_segmentation(self) -> str:
        """How queries are segmented (`analyzer.query_terms`); documents always use search mode."""
        return self.query.segmentation

    def query_terms(self, query: str, settings: BM25Query | None = None) -> list[str]:
        """The distinct terms this index searches for `query` (with `settings`, else `self.query`)."""
        settings = settings or self.query
        return query_terms(query, segmentation=settings.segmentation, stop_words=settings.stop_words)

    def with_query(self, settings: BM25Query) -> BM25View:
        """This index searched with a replay profile's query settings (nothing is copied or reopened)."""
        return BM25View(self, settings)

    def search(
        self, query: str, k: int, settings: BM25Query | None = None
    ) -> tuple[list[ScoredChunk], list[str]]:
        """Top-k chunks by this engine's BM25 (ranks from 1) and flags: `query-tokenizes-to-nothing`
        (no term left after analysis) or `bm25-index-empty` (nothing indexed). `settings`: how to
        analyse and score the query (default `self.query`)."""
        settings = settings or self.query
        terms = self.query_terms(query, settings)
        if not terms:
            return [], [FLAG_TOKENIZES_TO_NOTHING]
        top = self._top(terms, k, settings)
        if top is None:
            return [], [FLAG_INDEX_EMPTY]
        hits = [
            ScoredChunk(chunk_id=chunk_id, rank=rank, score=score)
            for rank, (chunk_id, score) in enumerate(top, start=1)
        ]
        return hits, []

    @abstractmethod
    def _top(self, terms: Sequence[str], k: int, settings: BM25Query) -> list[tuple[str, float]] | None:
        """`(chunk_id, score)` of the k best chunks for the OR of `terms` scored with `settings`
        (title boost, k1, b), best first; chunks that share no term are left out. None when the
        index holds no chunk."""

    @abstractmethod
    def term_stats(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """`(indexed chunks, {term: chunks holding it in title or content})` (lexical support's idf)."""

    @abstractmethod
    def near_terms(self, term: str, max_edits: int = 1) -> list[str]:
        """Indexed words within `max_edits` Damerau–Levenshtein edits of `term`, sharing its first
        character (lexical support's typo tolerance)."""

    @abstractmethod
    def indexed_hashes(self) -> dict[str, tuple[str, str]]:
        """chunk_id → (content_hash, index_hash) of every indexed chunk."""

    @abstractmethod
    def content_hash(self, chunk_id: str) -> str | None:
        """The content hash the index holds for `chunk_id`, or None if it is not indexed."""

    @abstractmethod
    def close(self) -> None:
        """Release what the index holds open."""

    def _locked_error(self) -> IndexLockedError:
        return locked_error(self.folder)


class BM25View:
    """A BM25 index searched with one replay profile's `BM25Query` (`[index]` title_boost, bm25_k1,
    bm25_b, query_segmentation, query_stop_words, overlaid per profile); every profile shares the
    index it views."""

    kind: Literal["bm25", "dense"] = "bm25"

    def __init__(self, engine: BM25Engine, settings: BM25Query) -> None:
        self.engine = engine
        self.query = settings

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        """`BM25Engine.search` with this view's query settings."""
        return self.engine.search(query, k, self.query)

    def query_terms(self, query: str) -> list[str]:
        """The distinct terms this view searches for `query`."""
        return self.engine.query_terms(query, self.query)

    def term_stats(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """`BM25Engine.term_stats` (document frequencies do not depend on the query settings)."""
        return self.engine.term_stats(terms)

    def near_terms(self, term: str, max_edits: int = 1) -> list[str]:
        """`BM25Engine.near_terms`."""
        return self.engine.near_terms(term, max_edits)

    def __repr__(self) -> str:
        return f"BM25View(engine={self.engine!r})"


def locked_error(folder: Path) -> IndexLockedError:
    """The error for a BM25 index folder another process is writing (one writer at a time)."""
    return IndexLockedError(
        f"{folder}: another ragtriage process is writing the BM25 index; "
        "wait for it to finish (or stop it) and try again"
    )


def words_within_edits(term: str, words: Iterable[str], max_edits: int) -> list[str]:
    """The distinct `words` within `max_edits` Damerau–Levenshtein edits of `term` (a transposition
    is one edit), sorted (lexical support's typo tolerance)."""
    return sorted(
        {w for w in words if DamerauLevenshtein.distance(term, w, score_cutoff=max_edits) <= max_edits}
    )
