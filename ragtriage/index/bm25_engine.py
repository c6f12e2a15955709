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
        procs: int = 1,
        multiproc_min_docs: int = 2000,
        writer_timeout_s: float = 5.0,
    ) -> None:
        self.folder = folder
        self.title_boost = title_boost
        self.query_segmentation = query_segmentation
        """How queries are segmented (`analyzer.query_terms`); documents always use search mode."""
        self.query_stop_words = frozenset(normalize_text(w) for w in query_stop_words)
        """Words dropped from queries only (normalized like the terms)."""
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

    def query_terms(self, query: str) -> list[str]:
        """The distinct terms this index searches for `query`."""
        return query_terms(query, segmentation=self.query_segmentation, stop_words=self.query_stop_words)

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        """Top-k chunks by this engine's BM25 (ranks from 1) and flags: `query-tokenizes-to-nothing`
        (no term left after analysis) or `bm25-index-empty` (nothing indexed)."""
        terms = self.query_terms(query)
        if not terms:
            return [], [FLAG_TOKENIZES_TO_NOTHING]
        top = self._top(terms, k)
        if top is None:
            return [], [FLAG_INDEX_EMPTY]
        hits = [
            ScoredChunk(chunk_id=chunk_id, rank=rank, score=score)
            for rank, (chunk_id, score) in enumerate(top, start=1)
        ]
        return hits, []

    @abstractmethod
    def _top(self, terms: Sequence[str], k: int) -> list[tuple[str, float]] | None:
        """`(chunk_id, score)` of the k best chunks for the OR of `terms`, best first; chunks that
        share no term are left out. None when the index holds no chunk."""

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
