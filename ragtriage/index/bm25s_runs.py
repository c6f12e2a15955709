"""Term ids of the bm25s index, one run per chunk, and those an import hands over (`SegmentedTerms`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragtriage.index.bulk_terms import SegmentedTerms

__all__ = ["Given", "Runs"]

_TRANSLATE_BLOCK = 1 << 20  # term ids translated at once (a 4 MB temporary)


@dataclass
class Runs:
    """One field's term ids, one run per chunk: run n is `flat[offsets[n]:offsets[n + 1]]`."""

    flat: np.ndarray
    offsets: np.ndarray

    @classmethod
    def empty(cls) -> Runs:
        """No chunk."""
        return cls(np.zeros(0, np.int32), np.zeros(1, np.int64))

    @classmethod
    def join(cls, runs: Sequence[np.ndarray]) -> Runs:
        """One flat array of `runs` (views into other flat arrays, copied once here)."""
        lengths = np.fromiter((len(run) for run in runs), dtype=np.int64, count=len(runs))
        flat = np.concatenate(runs).astype(np.int32, copy=False) if runs else np.zeros(0, np.int32)
        return cls(flat, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def run(self, n: int) -> np.ndarray:
        """The term ids of chunk `n` (a view)."""
        return self.flat[self.offsets[n] : self.offsets[n + 1]]


class Given:
    """Runs a `SegmentedTerms` holds, with its term ids translated into the index's vocabulary.

    The translation is done in place (`segmented` then counts in `vocab`'s numbering): the term
    ids of a 100k-chunk import are held once, not twice.
    """

    def __init__(self, segmented: SegmentedTerms | None, vocab: dict[str, int]) -> None:
        self.segmented = segmented
        self.flat = np.zeros(0, np.int32)
        if segmented is not None and len(segmented.words):
            remap = np.fromiter(
                (vocab.setdefault(word, len(vocab)) for word in segmented.words),
                dtype=np.int32,
                count=len(segmented.words),
            )
            flat = segmented.load()
            for start in range(0, len(flat), _TRANSLATE_BLOCK):
                block = flat[start : start + _TRANSLATE_BLOCK]
                block[:] = remap[block]
            segmented.words = list(vocab)
            self.flat = flat

    def has(self, kind: str, key: str) -> bool:
        """`segmented` holds the run of `key` (a content hash, or a title text) of `kind`."""
        return self.segmented is not None and key in getattr(self.segmented, kind)

    def run(self, kind: str, key: str) -> np.ndarray | None:
        """The run of `key`, or None when it was not given."""
        if self.segmented is None:
            return None
        n = getattr(self.segmented, kind).get(key)
        if n is None:
            return None
        offsets = self.segmented.offsets
        return self.flat[offsets[n] : offsets[n + 1]]
