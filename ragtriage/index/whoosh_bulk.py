"""Write many chunks into the Whoosh index as whole segments, from term ids (`kb import`).

Whoosh's own writer costs a Python call per token (the analyzer's `Token` path), per posting (its
posting pool, an external merge sort in Python) and again per posting when it flushes
(`FieldWriter.add_postings`): 100k chunks of 400 Chinese characters took about 1,070 s. Here the
chunks come already segmented into term ids (`SegmentedTerms`, segmented by forked processes
during `kb import`'s pass), the postings of a segment are counted and sorted with numpy, and they
are written through Whoosh's own codec objects a block at a time: the segment files are the ones
Whoosh's writer makes for the same documents (`tests/integration/test_whoosh_bulk.py` compares every
term's postings and statistics, the stored fields and the field lengths).

Facts of the on-disk format this relies on (whoosh-reloaded 2.7.5, `whoosh.codec.whoosh3.W3Codec`;
`check_format` refuses anything else, so a Whoosh upgrade fails loudly instead of writing wrong
segments):
- `SegmentWriter.add_document` sends a document's fields in sorted name order to the per-document
  writer (`add_field(name, field, stored value or None, length)`); a TEXT field's length is its
  token count; an ID field's is 0 (not scorable), and its one term is the whole value, weight 1.0.
- The postings are written field by field in name order, term by term in byte order, document
  numbers ascending, in blocks of `blocklimit` postings; each posting passes the document's field
  length; only its byte (`length_to_byte`) is written, in the block and term statistics.
- The TEXT fields must use the `Frequency` format (`TEXT(phrase=False)`, the schema of indexes
  created since this module): weight = term frequency, value = the frequency as a big-endian
  uint32. Indexes with positions (`Positions`, the former schema) are written by Whoosh's writer.
- The analyzer's terms for a text are `analyzer.terms(text)` (the test checks it on real text).
"""

from __future__ import annotations

import gc
import multiprocessing
from collections.abc import Callable, Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any

import numpy as np
import whoosh
from whoosh import formats
from whoosh.codec import default_codec
from whoosh.codec.whoosh3 import (
    W3Codec,
    W3FieldWriter,
    W3PerDocWriter,
)
from whoosh.fields import Schema
from whoosh.index import FileIndex
from whoosh.writing import MERGE_SMALL, SegmentWriter

from ragtriage.index.bm25_engine import BM25Document
from ragtriage.index.bulk_terms import SegmentedTerms, iter_term_ids
from ragtriage.index.heap import trim_heap
from ragtriage.index.whoosh_blocks import deflate, write_postings
from ragtriage.interrupts import children_ignore_interrupts

__all__ = [
    "merge_small_segments",
    "BulkDocuments",
    "apply",
    "bulk_supported",
    "check_format",
    "segment_documents",
    "from_segmented",
    "write_bulk",
]

TEXT_FIELDS = ("content", "title")
#: ID field → its place in `BulkDocuments.stored` rows.
ID_FIELDS = {"chunk_id": 0, "doc_id": 1, "content_hash": 2, "index_hash": 3}
#: The Whoosh release whose format the module writes (see the module docstring).
WHOOSH_VERSION = (2, 7, 5)
#: Documents per segment: bounds the postings sort's memory (about 16 bytes a token of the segment).
DOCS_PER_SEGMENT = 5_000


@dataclass
class BulkDocuments:
    """Chunks to add, with their texts as term-id runs.

    `stored[n]` is chunk n's `(chunk_id, doc_id, content_hash, index_hash)`; its content's terms
    are run `content_runs[n]` and its title's run `title_runs[n]` of `flat`/`offsets` (run r is
    `flat[offsets[r]:offsets[r + 1]]`, ids into `words`), as `bulk_terms.SegmentedTerms` holds them.
    """

    stored: list[tuple[str, str, str, str]]
    words: InitVar[Sequence[str]]
    flat: np.ndarray
    offsets: np.ndarray
    content_runs: np.ndarray
    title_runs: np.ndarray
    rank: np.ndarray = field(init=False)
    """Each word id's rank in UTF-8 byte order (Whoosh's term order)."""
    order: list[bytes] = field(init=False)
    """The words' UTF-8 bytes in that order."""

    def __post_init__(self, words: Sequence[str]) -> None:
        encoded = [word.encode("utf-8") for word in words]
        by_bytes = np.asarray(sorted(range(len(encoded)), key=encoded.__getitem__), dtype=np.int64)
        self.rank = np.empty(len(encoded), dtype=np.int32)
        self.rank[by_bytes] = np.arange(len(encoded), dtype=np.int32)
        self.order = [encoded[i] for i in by_bytes.tolist()]


def from_segmented(upserts: Sequence[BM25Document], segmented: SegmentedTerms) -> BulkDocuments:
    """`upserts` as `BulkDocuments`, in their order: their runs in `segmented`; a content or title
    it does not hold is segmented here and appended (to copies of its arrays)."""
    known = {"content": segmented.content, "title": segmented.title}
    runs: dict[str, list[int]] = {"content": [], "title": []}
    texts: list[str] = []
    for doc in upserts:
        for kind, text, key in (("content", doc.content, doc.content_hash), ("title", doc.title, doc.title)):
            run = known[kind].get(key)
            if run is None:
                run = len(segmented) + len(texts)
                texts.append(text)
            runs[kind].append(run)
    words, flat, offsets = segmented.words, segmented.load(), segmented.offsets
    if texts:
        vocab = {word: n for n, word in enumerate(words)}
        new = list(iter_term_ids(texts, vocab))
        lengths = np.fromiter((len(run) for run in new), dtype=np.int64, count=len(new))
        words, flat = list(vocab), np.concatenate([flat, *new])
        offsets = np.concatenate([offsets, offsets[-1] + np.cumsum(lengths)])
    return BulkDocuments(
        stored=[(d.chunk_id, d.doc_id, d.content_hash, d.index_hash) for d in upserts],
        words=words,
        flat=flat,
        offsets=offsets,
        content_runs=np.asarray(runs["content"], dtype=np.int64),
        title_runs=np.asarray(runs["title"], dtype=np.int64),
    )


def segment_documents(upserts: Sequence[BM25Document], procs: int = 1) -> BulkDocuments:
    """`upserts` segmented here (`analyzer.terms`, in `procs` processes), as `BulkDocuments`."""
    vocab: dict[str, int] = {}
    runs = [
        *iter_term_ids([d.content for d in upserts], vocab, procs),
        *iter_term_ids([d.title for d in upserts], vocab, procs),
    ]
    lengths = np.fromiter((len(run) for run in runs), dtype=np.int64, count=len(runs))
    count = len(upserts)
    return BulkDocuments(
        stored=[(d.chunk_id, d.doc_id, d.content_hash, d.index_hash) for d in upserts],
        words=list(vocab),
        flat=np.concatenate(runs) if runs else np.zeros(0, np.int32),
        offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        content_runs=np.arange(count, dtype=np.int64),
        title_runs=np.arange(count, 2 * count, dtype=np.int64),
    )


#: Segments of at least this many documents are never merged by an ordinary commit.
MERGE_BELOW_DOCS = 2_000


def merge_small_segments(writer: SegmentWriter, segments: list[Any]) -> list[Any]:
    """Whoosh's `MERGE_SMALL` policy over the segments under `MERGE_BELOW_DOCS` documents only.

    `MERGE_SMALL` merges the i+1 smallest segments once they hold fewer than fib(i + 5) documents:
    with an import's 5k-chunk segments that point comes at about 110k chunks, and the next small
    commit (one `kb add`) would then rewrite 110k chunks through Whoosh's Python merge (tens of
    minutes). The segments a bulk write makes are left as they are; small ones still merge.
    """
    big = [segment for segment in segments if segment.doc_count_all() >= MERGE_BELOW_DOCS]
    small = [segment for segment in segments if segment.doc_count_all() < MERGE_BELOW_DOCS]
    return big + list(MERGE_SMALL(writer, small))


def check_format() -> None:
    """Raise RuntimeError unless the installed Whoosh writes the format this module reproduces."""
    found = tuple(whoosh.__version__[:3])
    if found != WHOOSH_VERSION:
        raise RuntimeError(f"whoosh_bulk writes Whoosh {WHOOSH_VERSION} segments, found {found}")


def bulk_supported(schema: Schema) -> bool:
    """True if segments of an index with `schema` can be written here (fields, formats, Whoosh)."""
    if set(schema.names()) != {*TEXT_FIELDS, *ID_FIELDS}:
        return False
    if any(type(schema[name].format) is not formats.Frequency for name in TEXT_FIELDS):
        return False
    if any(type(schema[name].format) is not formats.Existence for name in ID_FIELDS):
        return False
    if any(schema[name].vector or schema[name].column_type for name in schema.names()):
        return False
    try:
        check_format()
    except RuntimeError:
        return False
    return type(default_codec()) is W3Codec


def apply(
    index: FileIndex,
    upserts: Sequence[BM25Document],
    deletes: Sequence[str],
    segmented: SegmentedTerms | None,
    procs: int,
    timeout: float,
    on_progress: Callable[[int], None] | None = None,
) -> None:
    """`WhooshIndex.apply` from term ids: replace `upserts` and delete `deletes` in one commit.

    Terms come from `segmented` where it holds them (it is released afterwards), else from
    `segment_documents` (`procs` processes). Raises `whoosh.index.LockError` if the index is held.
    """
    try:
        docs = segment_documents(upserts, procs) if segmented is None else from_segmented(upserts, segmented)
        if segmented is not None:
            segmented.release()  # its dicts and words: `docs` holds what the segments need
        trim_heap()  # before the segment writers fork: freed pages would count in each of them
        replaced = [*deletes, *(doc.chunk_id for doc in upserts)]
        write_bulk(index, docs, replaced, timeout=timeout, procs=procs, on_progress=on_progress)
    finally:
        if segmented is not None:
            segmented.release()
    if on_progress is not None:
        on_progress(len(upserts))


def write_bulk(
    index: FileIndex,
    docs: BulkDocuments,
    deletes: Sequence[str],
    *,
    timeout: float,
    procs: int = 1,
    on_progress: Callable[[int], None] | None = None,
    docs_per_segment: int | None = None,
) -> None:
    """Delete `deletes` (chunk ids) and add `docs` as new segments, in one commit.

    Segments are written by `procs` forked processes when there are several. Existing segments are
    not merged (Whoosh's next ordinary commit merges the small ones). Raises
    `whoosh.index.LockError` if another writer holds the index.
    """
    per_segment = docs_per_segment or DOCS_PER_SEGMENT
    writer = SegmentWriter(index, timeout=timeout)
    try:
        for chunk_id in deletes:
            writer.delete_by_term("chunk_id", chunk_id)
        finalsegments = writer._merge_segments(merge_small_segments, False, False)
        ranges = [
            (start, min(start + per_segment, len(docs.stored)))
            for start in range(0, len(docs.stored), per_segment)
        ]
        finalsegments.extend(_write_segments(index, docs, ranges, procs, on_progress))
        writer._close_segment()
        writer._commit_toc(finalsegments)
        writer._finish()
    except BaseException:
        if not writer.is_closed:
            writer.cancel()
        raise


_FORKED: tuple[FileIndex, BulkDocuments] | None = None
"""What forked segment writers read (inherited: pickling the term ids to them would copy them)."""


def _forked_segment(bounds: tuple[int, int]) -> Any:
    assert _FORKED is not None
    segment = _write_segment(*_FORKED, *bounds)
    # What the segment's writers freed goes back before the next one: kept, it would count in
    # this process's own pages through the rest of the build.
    gc.collect()
    trim_heap()
    return segment


def _write_segments(
    index: FileIndex,
    docs: BulkDocuments,
    ranges: list[tuple[int, int]],
    procs: int,
    on_progress: Callable[[int], None] | None,
) -> list[Any]:
    """The segments of `ranges` of `docs`, in order (written by forked processes if `procs` > 1)."""
    global _FORKED
    segments: list[Any] = []
    if procs <= 1 or len(ranges) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for start, stop in ranges:
            segments.append(_write_segment(index, docs, start, stop))
            if on_progress is not None:
                on_progress(stop)
        return segments
    _FORKED = (index, docs)
    pool: Any = None
    try:
        # Born with SIGINT blocked (this process handles Ctrl-C and ends them); the frozen objects
        # are skipped by their garbage collector, which would otherwise rewrite the parent's pages.
        with children_ignore_interrupts():
            gc.freeze()
            try:
                pool = multiprocessing.get_context("fork").Pool(min(procs, len(ranges)))
            finally:
                gc.unfreeze()
        for (_, stop), segment in zip(ranges, pool.imap(_forked_segment, ranges), strict=True):
            segments.append(segment)
            if on_progress is not None:
                on_progress(stop)
        pool.close()
    finally:
        _FORKED = None
        if pool is not None:
            pool.terminate()
            pool.join()
    return segments


def _write_segment(index: FileIndex, docs: BulkDocuments, start: int, stop: int) -> Any:
    """Write documents `start:stop` as one segment, through a lock-free `SegmentWriter`'s codec
    writers (as Whoosh's multiprocess writer's sub-writers do); returns the segment."""
    sub = SegmentWriter(index, _lk=False)
    try:
        schema = index.schema
        stored = docs.stored[start:stop]
        runs = {"content": docs.content_runs[start:stop], "title": docs.title_runs[start:stop]}
        lengths = {name: (docs.offsets[r + 1] - docs.offsets[r]).astype(np.int64) for name, r in runs.items()}
        _write_documents(sub.perdocwriter, schema, stored, lengths)
        sub.perdocwriter.close()
        fieldwriter = sub.fieldwriter
        for name in sorted([*TEXT_FIELDS, *ID_FIELDS]):
            fieldwriter.start_field(name, schema[name])
            if name in TEXT_FIELDS:
                _write_text_postings(fieldwriter, docs, runs[name], lengths[name])
            else:
                _write_id_postings(fieldwriter, [row[ID_FIELDS[name]] for row in stored])
            fieldwriter.finish_field()
        fieldwriter.close()
        sub.docnum = stop - start
        sub._close_segment()
        sub._assemble_segment()
        return sub.get_segment()
    except BaseException:
        sub._close_segment()
        raise


def _write_documents(
    perdoc: W3PerDocWriter,
    schema: Any,
    stored: Sequence[tuple[str, str, str, str]],
    lengths: dict[str, np.ndarray],
) -> None:
    """Stored fields and field lengths, as `SegmentWriter.add_document` hands them over."""
    fields = {name: schema[name] for name in schema.names()}
    chunk_f, content_f, hash_f, doc_f, index_f, title_f = (
        fields[name] for name in ("chunk_id", "content", "content_hash", "doc_id", "index_hash", "title")
    )
    perdoc._colwriters["_stored"]._child._compress = deflate
    content_lengths = lengths["content"].tolist()
    title_lengths = lengths["title"].tolist()
    add = perdoc.add_field
    for docnum, (chunk_id, doc_id, content_hash, index_hash) in enumerate(stored):
        perdoc.start_doc(docnum)
        add("chunk_id", chunk_f, chunk_id, 0)
        add("content", content_f, None, content_lengths[docnum])
        add("content_hash", hash_f, content_hash, 0)
        add("doc_id", doc_f, doc_id, 0)
        add("index_hash", index_f, index_hash, 0)
        add("title", title_f, None, title_lengths[docnum])
        perdoc.finish_doc()


def _write_text_postings(
    fieldwriter: W3FieldWriter,
    docs: BulkDocuments,
    runs: np.ndarray,
    lengths: np.ndarray,
) -> None:
    """A TEXT field's postings: (term, document) pairs counted and sorted with numpy."""
    count, total = len(runs), int(lengths.sum())
    if not total:
        return
    # 32-bit arrays where the numbers fit (they do but for huge vocabularies): half the memory.
    position_type: type[np.signedinteger[Any]] = np.int32 if len(docs.flat) < 2**31 else np.int64
    key_type: type[np.signedinteger[Any]] = np.int32 if len(docs.order) * count < 2**31 else np.int64
    # Position in `flat` of every token of the segment, documents in order.
    where = np.repeat((docs.offsets[runs] - (np.cumsum(lengths) - lengths)).astype(position_type), lengths)
    where += np.arange(total, dtype=position_type)
    # key = term rank * count + document number: sorted keys are sorted by term, then document.
    keys = docs.rank[docs.flat[where]].astype(key_type)
    del where
    keys *= count
    keys += np.repeat(np.arange(count, dtype=key_type), lengths)
    keys.sort()
    firsts = np.flatnonzero(np.diff(keys, prepend=key_type(-1)))
    tf = np.diff(np.append(firsts, total)).astype(np.int32)
    keys = keys[firsts]
    del firsts
    term_ranks, docnums = np.divmod(keys, count)
    del keys
    write_postings(
        fieldwriter,
        docs.order,
        term_ranks,
        docnums.astype(np.uint32),
        tf.astype(np.float32),
        tf.astype(">u4"),
        lengths.astype(np.int32)[docnums],
    )


def _write_id_postings(fieldwriter: W3FieldWriter, values: list[str]) -> None:
    """An ID field's postings: one term per document, the whole value, weight 1.0."""
    encoded = [value.encode("utf-8") for value in values]
    by_term = sorted(range(len(encoded)), key=encoded.__getitem__)  # stable: documents ascending
    words = sorted(set(encoded))
    ranks = {word: n for n, word in enumerate(words)}
    term_ranks = np.asarray([ranks[encoded[n]] for n in by_term], dtype=np.int64)
    docnums = np.asarray(by_term, dtype=np.uint32)
    write_postings(fieldwriter, words, term_ranks, docnums, np.ones(len(docnums), np.float32), None, None)
