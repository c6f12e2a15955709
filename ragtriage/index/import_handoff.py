"""What `kb import`'s pass hands the index sync, so that the sync need not load the KB back.

An index sync needs the index hash of every published chunk, and the text of those BM25 must
(re)index. After an import of 100k chunks, loading them back from SQL and hashing them again took
about as long as writing them, and holding their texts for the BM25 build was most of the
process's peak memory. The pass has all of it at hand: for each chunk it writes (and that stays
published) it keeps the fields the indexes take except the text, and with the bm25s engine it
hands each text and title to a `TermStream` (segmented by forked processes while the pass goes
on), so that only term ids are kept. The sync (`published.published_chunks`) takes the other
published chunks' hashes from the BM25 index when the index manifest says the indexes held the KB
as it was before the import, and loads from SQL only the chunks it cannot know otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragtriage.index.bulk_terms import SegmentedTerms, TermStream
from ragtriage.index.heap import trim_heap

__all__ = ["ImportHandoff", "WrittenChunk", "bm25_title"]


def bm25_title(title: str, heading_path: Sequence[str]) -> str:
    """The text of a chunk's BM25 title field: its title and heading path."""
    return " ".join([title, *heading_path]).strip()


@dataclass(frozen=True, slots=True)
class WrittenChunk:
    """A chunk the import wrote as published: what the indexes take from it, but its text."""

    doc_id: str
    title: str
    """The BM25 title field (`bm25_title`)."""
    content_hash: str
    index_hash: str


class ImportHandoff:
    """Collects, during the pass, the written chunks (and their term ids with `segment`)."""

    def __init__(self, *, segment: bool, procs: int = 1) -> None:
        self.written: dict[str, WrittenChunk] = {}
        """chunk id → the chunk as written, in the order written."""
        self.base_revision: int | None = None
        """The KB revision the import's writes were applied to (set when it commits)."""
        self.segmented: SegmentedTerms | None = None
        """The term ids of the written texts and titles (bm25s only), once `finish`ed."""
        self._doc_ids: dict[str, str] = {}
        """One string per document id (rows bring their own copy: 20 chunks a document, 20 copies)."""
        self._stream = TermStream(procs) if segment else None
        if self._stream is not None:
            # Forked before the pass grows this process (see `TermStream.start_workers`): 30k
            # chunks peaked 55 MB lower than with workers forked at the 2,000th text.
            self._stream.start_workers()

    def add(
        self,
        chunk_id: str,
        doc_id: str,
        title: str,
        heading_path: Sequence[str],
        content: str,
        content_hash: str,
        index_hash: str,
    ) -> None:
        """Record one written published chunk (segmenting its text unless an earlier one had it)."""
        field = bm25_title(title, heading_path)
        doc_id = self._doc_ids.setdefault(doc_id, doc_id)
        self.written[chunk_id] = WrittenChunk(doc_id, field, content_hash, index_hash)
        if self._stream is not None:
            self._stream.add("content", content_hash, content)
            self._stream.add("title", field, field)

    def finish(self) -> None:
        """Wait for the segmenting processes (the pass has ended)."""
        if self._stream is not None:
            self.segmented = self._stream.finish()
            self._stream = None
        trim_heap()  # the pass's freed rows and buffers, before the sync builds the indexes

    def close(self) -> None:
        """Stop the segmenting processes (the import failed or is done)."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
