"""Vectors that came with imported chunks (`kb import`): found, checked and read for the dense index.

They live in the store (`kb_chunk_vector`), not in the embedding cache: they are data production
made, not something ragtriage can compute again, and `kb reindex` must find them after the cache is
cleared. The dense index takes them as given, provided they come from the query embedder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from ragtriage.errors import IndexStateError
from ragtriage.index.types import Embedder
from ragtriage.store.db import read_session
from ragtriage.store.kb_tables import ChunkRow, ChunkVectorRow

__all__ = ["check_imported_vectors", "imported_vector_refs", "load_vectors"]


def imported_vector_refs(session: Any, kb: str) -> dict[str, tuple[str, str, int]]:
    """chunk id → (vector hash, embedder name, dim) of every published chunk imported with a vector."""
    statement = (
        select(
            ChunkVectorRow.chunk_id, ChunkVectorRow.vector_hash, ChunkVectorRow.embedder, ChunkVectorRow.dim
        )
        .join(ChunkRow, col(ChunkRow.chunk_id) == col(ChunkVectorRow.chunk_id))
        .where(ChunkRow.status == "published", ChunkRow.kb == kb)
    )
    return {
        chunk_id: (vector_hash, embedder, dim)
        for chunk_id, vector_hash, embedder, dim in session.exec(statement)
    }


def check_imported_vectors(
    refs: Sequence[tuple[str, int] | None], chunk_ids: Sequence[str], embedder: Embedder
) -> None:
    """Refuse imported vectors of another model than the query embedder, naming both and the chunk.

    Raises:
        IndexStateError: a vector's (embedder name, dim) differs from `embedder`'s.
    """
    for ref, chunk_id in zip(refs, chunk_ids, strict=True):
        if ref is not None and ref != (embedder.name, embedder.dim):
            name, dim = ref
            raise IndexStateError(
                f"chunk {chunk_id} was imported with a vector from {name} (dim {dim}) but queries "
                f"are embedded with {embedder.name} (dim {embedder.dim}); configure [embedder] as {name}, "
                "or import the chunks again without vectors to embed them"
            )


def load_vectors(engine: Engine, chunk_ids: list[str]) -> dict[str, np.ndarray]:
    """The float32 vectors of `chunk_ids` (at most a few thousand per call: one IN list)."""
    with read_session(engine) as session:
        rows = session.exec(
            select(ChunkVectorRow.chunk_id, ChunkVectorRow.vector).where(
                col(ChunkVectorRow.chunk_id).in_(chunk_ids)
            )
        ).all()
    return {chunk_id: np.frombuffer(blob, dtype="<f4") for chunk_id, blob in rows}
