"""What the indexes hand up: a chunk id at a rank with its score, and the embedder interface."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np
from pydantic import BaseModel


class ScoredChunk(BaseModel):
    """A chunk id at a rank (from 1) with the score that put it there."""

    chunk_id: str
    rank: int
    score: float


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape (n, dim)."""

    name: str

    @property
    def dim(self) -> int:
        """Vector size (a plain attribute satisfies this too)."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray: ...
