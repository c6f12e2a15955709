"""The score matrix of the bm25s BM25 engine, built here in numpy and saved in bm25s's own format.

`bm25s.BM25.index` counts each chunk's terms with a Python `Counter` (25–30 s for 100k chunks on
this machine); `score_matrix` builds the same matrix (a test compares them) in about 2 s, straight
into its final column-major (CSC) arrays. `save_model` writes it as `bm25s.BM25.save` does (a test
compares the files), without importing bm25s: bm25s imports numba when it is installed, about
60 MB of the importing process that the build itself never uses.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["save_model", "score_matrix"]

#: Chunks per block: the block's (term, chunk) keys are sorted at once (8 bytes a term occurrence).
_BLOCK = 4_000


def score_matrix(
    flat: np.ndarray, offsets: np.ndarray, vocab_size: int, *, k1: float, b: float
) -> dict[str, Any]:
    """bm25s's Lucene BM25 score matrix of chunks × terms (chunk n's term ids are
    `flat[offsets[n]:offsets[n + 1]]`) in CSC form (`data`, `indices`, `indptr`,
    `num_docs`): entry (d, t) = `idf(t) · tf / (tf + k1 · (1 − b + b · |d| / avgdl))`, with
    `idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))` (Lucene's BM25, as `bm25s`, Lù 2024).

    Two passes over blocks of 4,000 chunks, each sorting the block's (term, chunk) keys and
    counting runs: the first counts each term's chunks (df, hence the column sizes), the second
    scores the block's entries and writes them at their place in the final arrays (rows in chunk
    order within each column). Memory: the result (8 bytes an entry) and one block's keys.
    """
    num_docs = len(offsets) - 1
    lengths = np.diff(offsets).astype(np.int64)
    df = np.zeros(vocab_size, dtype=np.int64)
    for first in range(0, num_docs, _BLOCK):
        term, _, _ = _block_entries(flat, offsets, lengths, first, vocab_size)
        df += np.bincount(term, minlength=vocab_size)
    indptr = np.zeros(vocab_size + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    entries = int(indptr[-1])
    data = np.empty(entries, dtype=np.float32)
    indices = np.empty(entries, dtype=np.int32)
    idf = np.log(1 + (num_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    del df
    # An empty field (no chunk has a title, e.g. an import without titles) has no entries to score:
    # any avgdl gives the same empty matrix, and 0 would divide 0 by 0 (a numpy RuntimeWarning).
    total = int(lengths.sum())
    avgdl = np.float32(total / num_docs if total else 1.0)
    norm = (k1 * ((1 - b) + b * lengths.astype(np.float32) / avgdl)).astype(np.float32)
    filled = indptr[:-1].copy()  # the next free place of each column
    for first in range(0, num_docs, _BLOCK):
        term, doc, tf = _block_entries(flat, offsets, lengths, first, vocab_size)
        if not len(term):
            continue
        # Entries come sorted by (term, chunk): an entry's place is its column's next free place
        # plus its rank among the block's entries of that term.
        starts = np.flatnonzero(np.concatenate([[True], term[1:] != term[:-1]]))
        counts = np.diff(np.append(starts, len(term)))
        rank = np.arange(len(term), dtype=np.int64) - np.repeat(starts, counts)
        places = filled[term] + rank
        data[places] = idf[term] * (tf / (norm[doc] + tf))
        indices[places] = doc
        filled[term[starts]] += counts
    return {"data": data, "indices": indices, "indptr": indptr, "num_docs": num_docs}


def _block_entries(
    flat: np.ndarray, offsets: np.ndarray, lengths: np.ndarray, first: int, vocab_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (term, chunk) pairs of chunks `first` … `first + _BLOCK - 1`, sorted by term
    then chunk: (term ids int32, chunk numbers int32, term frequencies float32)."""
    size = min(_BLOCK, len(offsets) - 1 - first)
    run = flat[offsets[first] : offsets[first + size]]
    keys = run.astype(np.int64) * size
    keys += np.repeat(np.arange(size, dtype=np.int64), lengths[first : first + size])
    keys.sort()
    if not len(keys):
        empty = np.zeros(0, np.int32)
        return empty, empty, np.zeros(0, np.float32)
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    unique = keys[starts]
    tf = np.diff(np.append(starts, len(keys))).astype(np.float32)
    del keys, starts
    term = (unique // size).astype(np.int32)
    doc = (unique % size + first).astype(np.int32)
    return term, doc, tf


def save_model(folder: Path, matrix: dict[str, Any], vocab: dict[str, int], *, k1: float, b: float) -> None:
    """Write `matrix` and `vocab` as `bm25s.BM25(k1=k1, b=b, method="lucene").save(folder)` does
    (loaded with `bm25s.BM25.load`); every vocabulary id is a column (unused ones score 0)."""
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "data.csc.index.npy", matrix["data"], allow_pickle=False)
    np.save(folder / "indices.csc.index.npy", matrix["indices"], allow_pickle=False)
    np.save(folder / "indptr.csc.index.npy", matrix["indptr"], allow_pickle=False)
    vocab_text = json.dumps(vocab, ensure_ascii=False, separators=(",", ":"))
    (folder / "vocab.index.json").write_text(vocab_text, encoding="utf-8")
    params = {
        "k1": k1,
        "b": b,
        "delta": 0.5,
        "method": "lucene",
        "idf_method": "lucene",
        "dtype": "float32",
        "int_dtype": "int32",
        "num_docs": matrix["num_docs"],
        "version": importlib.metadata.version("bm25s"),
        "backend": "numpy",
    }
    (folder / "params.index.json").write_text(json.dumps(params, indent=4), encoding="utf-8")
