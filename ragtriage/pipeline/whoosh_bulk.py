"""Write many chunks into the Whoosh index as whole segments, from term ids (`kb import`).

Whoosh's own writer costs a Python call per token (the analyzer's `Token` path), per posting (its
posting pool, an external merge sort in Python) and again per posting when it flushes
(`FieldWriter.add_postings`): 100k chunks of 400 Chinese characters took about 1,070 s. Here the
chunks come already segmented into term ids (`SegmentedTerms`, segmented by forked processes
during `kb import`'s pass), the postings of a segment are counted and sorted with numpy, and they
are written through Whoosh's own codec objects a block at a time: the segment files are the ones
Whoosh's writer makes for the same documents (`tests/unit/test_whoosh_bulk.py` compares every
term's postings and statistics, the stored fields and the field lengths).

Facts of the on-disk format this relies on (whoosh-reloaded 2.7.5, `whoosh.codec.whoosh3.W3Codec`;
`check_format` refuses anything else, so a Whoosh upgrade fails loudly instead of writing wrong
segments):
- `SegmentWriter.add_document` sends a document's fields in sorted name order to the per-document
  writer (`add_field(name, field, stored value or None, length)`); a TEXT field's length is its
  token count; an ID field's is 0 (not scorable), and its one term is the whole value, weight 1.0.
- The postings are written field by field in name order, term by term in byte order, document
  numbers ascending, in blocks of `blocklimit` postings; each posting passes the document's field
  length as the per-document reader returns it (byte-quantized, `byte_to_length(length_to_byte)`).
- The TEXT fields must use the `Frequency` format (`TEXT(phrase=False)`, the schema of indexes
  created since this module): weight = term frequency, value = the frequency as a big-endian
  uint32. Indexes with positions (`Positions`, the former schema) are written by Whoosh's writer.
- The analyzer's terms for a text are `analyzer.terms(text)` (the test checks it on real text).
"""

from __future__ import annotations

import gc
import multiprocessing
import pickle
import zlib
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import whoosh
from whoosh import formats
from whoosh.codec.whoosh3 import (
    WHOOSH3_HEADER_MAGIC,
    W3Codec,
    W3FieldWriter,
    W3PerDocWriter,
    W3PostingsWriter,
    W3TermInfo,
)
from whoosh.system import pack_int, pack_long, pack_ushort
from whoosh.index import FileIndex
from whoosh.util.numeric import byte_to_length, length_to_byte
from whoosh.writing import SegmentWriter

from ragtriage.interrupts import children_ignore_interrupts

__all__ = ["BulkDocuments", "bulk_supported", "check_format", "write_bulk"]

TEXT_FIELDS = ("content", "title")
#: ID field → its place in `BulkDocuments.stored` rows.
ID_FIELDS = {"chunk_id": 0, "doc_id": 1, "content_hash": 2, "index_hash": 3}
#: The Whoosh release whose format the module writes (see the module docstring).
WHOOSH_VERSION = (2, 7, 5)
#: Documents per segment: bounds the postings sort's memory (~12 bytes a token).
DOCS_PER_SEGMENT = 20_000

# byte_to_length(length_to_byte(n)) for every n up to the longest field seen (grown on demand).
_QUANTIZED = np.asarray([byte_to_length(length_to_byte(n)) for n in range(4096)], dtype=np.int64)


@dataclass
class BulkDocuments:
    """Chunks to add, with their texts as term-id runs.

    `stored[n]` is chunk n's `(chunk_id, doc_id, content_hash, index_hash)`; its content's terms
    are run `content_runs[n]` and its title's run `title_runs[n]` of `flat`/`offsets` (run r is
    `flat[offsets[r]:offsets[r + 1]]`, ids into `words`), as `bulk_terms.SegmentedTerms` holds them.
    """

    stored: list[tuple[str, str, str, str]]
    words: Sequence[str]
    flat: np.ndarray
    offsets: np.ndarray
    content_runs: np.ndarray
    title_runs: np.ndarray


def check_format() -> None:
    """Raise RuntimeError unless the installed Whoosh writes the format this module reproduces."""
    found = tuple(whoosh.__version__[:3])
    if found != WHOOSH_VERSION:
        raise RuntimeError(f"whoosh_bulk writes Whoosh {WHOOSH_VERSION} segments, found {found}")


def bulk_supported(index: FileIndex) -> bool:
    """True if `index` is one this module can add segments to (its schema and codec as expected)."""
    schema = index.schema
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
    from whoosh.codec import default_codec

    return type(default_codec()) is W3Codec


def write_bulk(
    index: FileIndex,
    docs: BulkDocuments,
    deletes: Sequence[str],
    *,
    timeout: float,
    others: Sequence[dict[str, str]] = (),
    procs: int = 1,
    on_progress: Callable[[int], None] | None = None,
    docs_per_segment: int = DOCS_PER_SEGMENT,
) -> None:
    """Delete `deletes` (chunk ids), add `docs` as new segments and `others` (`add_document`
    fields, texts analyzed by Whoosh) through Whoosh's writer, in one commit.

    Segments are written by `procs` forked processes when there are several. Existing segments are
    not merged (Whoosh's next ordinary commit merges the small ones). Raises
    `whoosh.index.LockError` if another writer holds the index.
    """
    writer = SegmentWriter(index, timeout=timeout)
    try:
        for chunk_id in deletes:
            writer.delete_by_term("chunk_id", chunk_id)
        for fields in others:
            writer.add_document(**fields)
        finalsegments = writer._merge_segments(None, False, False)
        ranges = [
            (start, min(start + docs_per_segment, len(docs.stored)))
            for start in range(0, len(docs.stored), docs_per_segment)
        ]
        finalsegments.extend(_write_segments(index, docs, ranges, procs, on_progress))
        if writer._added:
            finalsegments.append(writer._finalize_segment())
        else:
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
    return _write_segment(*_FORKED, *bounds)


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
        rank, order = _byte_order(docs.words)
        fieldwriter = sub.fieldwriter
        for name in sorted([*TEXT_FIELDS, *ID_FIELDS]):
            fieldwriter.start_field(name, schema[name])
            if name in TEXT_FIELDS:
                _write_text_postings(fieldwriter, docs, runs[name], lengths[name], rank, order)
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


def _deflate(data: bytes, level: int = 1) -> bytes:
    """zlib at level 1 with a 4 KB window. Readers call `zlib.decompress`, which reads any level
    and window size from the stream, and the block info only says whether a block is compressed:
    Whoosh's level 3 and 32 KB window cost 5 times as much here (Whoosh compresses each block and
    each document's stored fields on its own) for streams about 5 % smaller."""
    packer = zlib.compressobj(level, zlib.DEFLATED, 12, 4)
    return packer.compress(data) + packer.flush()


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
    perdoc._colwriters["_stored"]._child._compress = _deflate
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


def _byte_order(words: Sequence[str]) -> tuple[np.ndarray, list[bytes]]:
    """(rank of each word id in UTF-8 byte order, the words' bytes in that order)."""
    encoded = [word.encode("utf-8") for word in words]
    by_bytes = sorted(range(len(encoded)), key=encoded.__getitem__)
    rank = np.empty(len(encoded), dtype=np.int64)
    rank[np.asarray(by_bytes, dtype=np.int64)] = np.arange(len(encoded), dtype=np.int64)
    return rank, [encoded[i] for i in by_bytes]


def _quantized(lengths: np.ndarray) -> np.ndarray:
    """Field lengths as Whoosh reads them back (`byte_to_length(length_to_byte(n))`)."""
    global _QUANTIZED
    top = int(lengths.max()) if len(lengths) else 0
    if top >= len(_QUANTIZED):
        _QUANTIZED = np.asarray(
            [byte_to_length(length_to_byte(n)) for n in range(top + 1)], dtype=np.int64
        )
    return _QUANTIZED[lengths]


def _write_text_postings(
    fieldwriter: W3FieldWriter,
    docs: BulkDocuments,
    runs: np.ndarray,
    lengths: np.ndarray,
    rank: np.ndarray,
    order: list[bytes],
) -> None:
    """A TEXT field's postings: (term, document) pairs counted and sorted with numpy."""
    count, total = len(runs), int(lengths.sum())
    if not total:
        return
    # Position in `flat` of every token of the segment, documents in order.
    where = np.arange(total, dtype=np.int64)
    where += np.repeat(docs.offsets[runs] - (np.cumsum(lengths) - lengths), lengths)
    # key = term rank * count + document number: sorted keys are sorted by term, then document.
    keys = rank[docs.flat[where]]
    del where
    keys *= count
    keys += np.repeat(np.arange(count, dtype=np.int64), lengths)
    keys.sort()
    firsts = np.flatnonzero(np.diff(keys, prepend=np.int64(-1)))
    tf = np.diff(np.append(firsts, total))
    keys = keys[firsts]
    del firsts
    term_ranks, docnums = np.divmod(keys, count)
    del keys
    _write_terms(
        fieldwriter,
        order,
        term_ranks,
        docnums.astype(np.uint32),
        tf.astype(np.float32),
        tf.astype(">u4"),
        _quantized(lengths)[docnums],
    )


def _write_id_postings(fieldwriter: W3FieldWriter, values: list[str]) -> None:
    """An ID field's postings: one term per document, the whole value, weight 1.0."""
    encoded = [value.encode("utf-8") for value in values]
    by_term = sorted(range(len(encoded)), key=encoded.__getitem__)  # stable: documents ascending
    words = sorted(set(encoded))
    ranks = {word: n for n, word in enumerate(words)}
    term_ranks = np.asarray([ranks[encoded[n]] for n in by_term], dtype=np.int64)
    docnums = np.asarray(by_term, dtype=np.uint32)
    _write_terms(fieldwriter, words, term_ranks, docnums, np.ones(len(docnums), np.float32), None, None)


class _BlockPostings(W3PostingsWriter):
    """`W3PostingsWriter` given a whole block at a time (`put_block`), its lists precomputed.

    `_write_block` is Whoosh's but for compression (the block info says whether a block is
    compressed, so readers need no change): a pickle under 20 bytes is stored as it is, as Whoosh's
    comment intends (its code compresses it anyway), and the rest through `_deflate`.
    """

    def put_block(
        self,
        ids: list[int],
        deltas: tuple[int, ...],
        weights: list[float],
        mini_weights: float | tuple[float, ...] | None,
        values: bytes | None,
        stats: tuple[float, int | None, int],
    ) -> None:
        """Buffer one block (at most `blocklimit` postings) as `add_posting` calls would have:
        `stats` is (highest weight, shortest and longest field length or None and 0)."""
        self._ids, self._weights = ids, weights
        self._deltas, self._mini = deltas, mini_weights
        self._values = [] if values is None else [values]
        self._maxweight, self._minlength, self._maxlength = stats

    def _mini_ids(self) -> tuple[int, ...]:
        return self._deltas

    def _mini_weights(self) -> float | tuple[float, ...] | None:
        return self._mini

    def _write_block(self, last: bool = False) -> None:
        if not self._blockcount:
            self._postfile.write(WHOOSH3_HEADER_MAGIC)
        self._terminfo.add_block(self)
        databytes = pickle.dumps((self._deltas, self._mini, self._mini_values()), 2)
        # Whoosh means to leave pickles under 20 bytes uncompressed (its code then compresses them
        # anyway); one-posting blocks, most of an ID field's, are such pickles.
        comp = 1 if self._compression and len(databytes) >= 20 else 0
        if comp:
            databytes = _deflate(databytes)
        ids = self._ids
        info = (
            len(ids),
            ids[-1],
            self._maxweight,
            comp,
            length_to_byte(self._minlength),
            length_to_byte(self._maxlength),
        )
        infobytes = pickle.dumps(info, 2)
        blocklength = len(infobytes) + len(databytes)
        self._postfile.write_int(-blocklength if last else blocklength)
        self._postfile.write(infobytes)
        self._postfile.write(databytes)
        self._blockcount += 1
        self._new_block()


#: Postings whose Python lists `_write_terms` builds at a time (bounds its memory).
_WINDOW = 1 << 16


def _write_terms(
    fieldwriter: W3FieldWriter,
    order: list[bytes],
    term_ranks: np.ndarray,
    docnums: np.ndarray,
    weights: np.ndarray,
    values: np.ndarray | None,
    field_lengths: np.ndarray | None,
) -> None:
    """Each term's postings (sorted by term rank, then document), a block at a time.

    What the blocks need is computed with numpy for the whole field: blocks start at each term's
    first posting and every `blocklimit` postings after it.
    """
    codec = fieldwriter._codec
    limit = codec._blocklimit
    postings = fieldwriter._postwriter = _BlockPostings(
        fieldwriter._postfile, blocklimit=limit, compression=codec._compression, inlinelimit=codec._inlinelimit
    )
    total = len(docnums)
    term_starts = np.flatnonzero(np.diff(term_ranks, prepend=np.int64(-1)))
    per_term = -(-np.diff(np.append(term_starts, total)) // limit)
    block_term = np.repeat(np.arange(len(term_starts)), per_term)
    block_starts = term_starts[block_term] + limit * (
        np.arange(len(block_term)) - np.repeat(np.cumsum(per_term) - per_term, per_term)
    )
    del block_term
    # Whoosh's delta_encode restarts from 0 in every block.
    deltas = np.diff(docnums.astype(np.int64), prepend=np.int64(0))
    deltas[block_starts] = docnums[block_starts]
    low, high = np.minimum.reduceat(weights, block_starts), np.maximum.reduceat(weights, block_starts)
    mini_kind = np.where(high == low, np.where(high == 1.0, 0, 1), 2).tolist()  # None, one, all
    high_list = high.astype(np.float64).tolist()
    if field_lengths is None:
        shortest: list[int | None] = [None] * len(block_starts)
        longest = [0] * len(block_starts)
    else:
        shortest = np.minimum.reduceat(field_lengths, block_starts).tolist()
        longest = np.maximum.reduceat(field_lengths, block_starts).tolist()
    value_bytes = None if values is None else values.tobytes()
    width = 0 if values is None else values.itemsize
    bounds = np.append(block_starts, total).tolist()
    term_first = set(term_starts.tolist())
    ranks = term_ranks[term_starts].tolist()
    postfile, tindex, fieldid = fieldwriter._postfile, fieldwriter._tindex, fieldwriter._fieldid
    started, term, base, window_end = False, -1, 0, 0
    ids: list[int] = []
    delta_list: list[int] = []
    weight_list: list[float] = []
    for n, (first, stop) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        if stop > window_end:  # the next window's Python lists
            base, window_end = first, max(stop, first + _WINDOW)
            ids = docnums[base:window_end].tolist()
            delta_list = deltas[base:window_end].tolist()
            weight_list = weights[base:window_end].astype(np.float64).tolist()
        lo, hi = first - base, stop - base
        value = None if value_bytes is None else value_bytes[first * width : stop * width]
        if first in term_first:
            term += 1
            if started:
                fieldwriter.finish_term()
                started = False
            if stop - first == 1 and (first + 1 == total or bounds[n + 1] in term_first):
                posting, info = _single_posting(
                    postfile.tell(), ids[lo], weight_list[lo], value, shortest[n], codec._compression
                )
                postfile.write(posting)
                tindex.add(pack_ushort(fieldid) + order[ranks[term]], info)
                continue
            fieldwriter.start_term(order[ranks[term]])
            started = True
        else:
            postings._write_block()
        block_weights = weight_list[lo:hi]
        kind = mini_kind[n]
        mini = None if kind == 0 else block_weights[0] if kind == 1 else tuple(block_weights)
        stats = (high_list[n], shortest[n], longest[n])
        postings.put_block(ids[lo:hi], tuple(delta_list[lo:hi]), block_weights, mini, value, stats)
    if started:
        fieldwriter.finish_term()


def _single_posting(
    offset: int, docnum: int, weight: float, value: bytes | None, length: int | None, compression: int
) -> tuple[bytes, bytes]:
    """(postings bytes, term info bytes) of a term with one posting, as `_BlockPostings` and
    `W3TermInfo` write them (one last block), without their per-term objects."""
    data = pickle.dumps(((docnum,), None if weight == 1.0 else weight, value), 2)
    comp = 1 if compression and len(data) >= 20 else 0
    if comp:
        data = _deflate(data)
    length_byte = length_to_byte(length)
    block_info = pickle.dumps((1, docnum, weight, comp, length_byte, length_byte), 2)
    posting = b"".join((WHOOSH3_HEADER_MAGIC, pack_int(-(len(block_info) + len(data))), block_info, data))
    term_info = W3TermInfo._struct.pack(
        False, weight, 1, 0 if length is None else length_byte, length_byte, weight, docnum, docnum
    )
    return posting, term_info + pack_long(offset) + pack_int(len(posting))
