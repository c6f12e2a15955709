"""Whoosh posting blocks written from numpy arrays (`whoosh_bulk`'s postings writer).

`write_postings` writes one field's postings, sorted by term then document, through the field
writer of a `W3Codec` segment: every block as `W3PostingsWriter` writes it (the same pickled tuple
of delta-encoded document numbers, weights and values, the same block info and term info), its
lists computed for the whole field with numpy, and a term with one posting (most ID terms)
without Whoosh's per-term objects. Compression differs from Whoosh's in bytes only (`deflate`):
readers decompress any zlib stream, and the block info says whether a block is compressed.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
from isal import isal_zlib
from whoosh.codec.whoosh3 import WHOOSH3_HEADER_MAGIC, W3FieldWriter, W3PostingsWriter, W3TermInfo
from whoosh.system import pack_int, pack_long, pack_ushort
from whoosh.util.numeric import length_to_byte

__all__ = ["deflate", "write_postings"]

#: Pickles shorter than this are not compressed: zlib makes them longer, not shorter (Whoosh's own
#: comment says 20 bytes, and its code compresses them all). Most are one-posting blocks.
STORE_BELOW = 64


def deflate(data: bytes, whoosh_level: int = 1) -> bytes:
    """A zlib stream of `data` at level 1, made by ISA-L (`isal`, Intel's compression library):
    about 2 × as fast as zlib's level 1 here (24 against 52 µs for a 128-posting block) for a
    stream the same size. Readers call `zlib.decompress`, which reads any level and window size
    from the stream, and the block info only says whether a block is compressed: Whoosh's level 3
    and 32 KB window cost 5 times as much as zlib's level 1 (Whoosh compresses each block and each
    document's stored fields on its own) for streams about 5 % smaller. `whoosh_level`, the level
    Whoosh's stored-fields writer passes, is not used."""
    return bytes(isal_zlib.compress(data, 1))


class _CountingFile:
    """The postings file as `_BlockPostings` and `write_postings` use it, its position counted here:
    Whoosh asks the file for it twice a term (`tell`, a system call through two Python layers),
    about an eighth of a bulk write's time."""

    def __init__(self, postfile: Any) -> None:
        self._file = postfile
        self._position = int(postfile.tell())

    def tell(self) -> int:
        return self._position

    def write(self, data: bytes) -> None:
        self._file.write(data)
        self._position += len(data)

    def write_int(self, number: int) -> None:
        self.write(pack_int(number))


class _BlockPostings(W3PostingsWriter):  # type: ignore[misc]  # whoosh has no type hints
    """`W3PostingsWriter` given a whole block at a time (`put_block`), its lists precomputed.

    `_write_block` is Whoosh's but for compression (the block info says whether a block is
    compressed, so readers need no change): a pickle under `STORE_BELOW` bytes is stored as it is,
    the rest goes through `deflate`.
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
        comp = 1 if self._compression and len(databytes) >= STORE_BELOW else 0
        if comp:
            databytes = deflate(databytes)
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


def write_postings(
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
    postfile = _CountingFile(fieldwriter._postfile)
    postings = fieldwriter._postwriter = _BlockPostings(
        postfile,
        blocklimit=limit,
        compression=codec._compression,
        inlinelimit=codec._inlinelimit,
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
    deltas = np.diff(docnums.astype(np.int32), prepend=np.int32(0))
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
    tindex, fieldid = fieldwriter._tindex, fieldwriter._fieldid
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
    comp = 1 if compression and len(data) >= STORE_BELOW else 0
    if comp:
        data = deflate(data)
    length_byte = length_to_byte(length)
    block_info = pickle.dumps((1, docnum, weight, comp, length_byte, length_byte), 2)
    posting = b"".join((WHOOSH3_HEADER_MAGIC, pack_int(-(len(block_info) + len(data))), block_info, data))
    term_info = W3TermInfo._struct.pack(
        False, weight, 1, 0 if length is None else length_byte, length_byte, weight, docnum, docnum
    )
    return posting, term_info + pack_long(offset) + pack_int(len(posting))
