"""Embedding cache: vectors keyed by (embedder name, text hash) in `<home>/cache/embeddings.sqlite`.

Re-adding unchanged documents, or rebuilding an index, embeds nothing that was embedded before.
A separate SQLite file (not the triage store) so the store can live on PostgreSQL while the cache
stays local. WAL mode lets several processes read while one writes; writers use `BEGIN IMMEDIATE`
and a busy timeout, and each `put_many` is one short transaction.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ragtriage.errors import StoreError

__all__ = ["EmbeddingCache", "text_hash"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embedding (
    embedder TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (embedder, text_hash)
)
"""
_LOOKUP_CHUNK = 500  # stays under SQLite's bound-parameter limit


def text_hash(text: str) -> str:
    """sha256 of the exact text handed to the embedder (the cache key next to the embedder name)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Float32 vectors by (embedder, text_hash); safe for several processes on one file."""

    def __init__(self, path: Path, *, busy_timeout_s: float = 30.0) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._connection = sqlite3.connect(
                path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=NORMAL")
            self._connection.execute(_SCHEMA)
        except sqlite3.Error as error:
            raise StoreError(
                f"{path}: cannot open the embedding cache ({error}); delete it to reset"
            ) from None

    def get_many(self, embedder: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """Cached vectors for the hashes that have one."""
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(wanted), _LOOKUP_CHUNK):
                part = wanted[start : start + _LOOKUP_CHUNK]
                marks = ",".join("?" * len(part))
                rows = self._connection.execute(
                    "SELECT text_hash, dim, vector FROM embedding"
                    f" WHERE embedder = ? AND text_hash IN ({marks})",
                    [embedder, *part],
                ).fetchall()
                for key, dim, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (dim,):
                        found[key] = vector
        return found

    def put_many(
        self, embedder: str, vectors: Mapping[str, np.ndarray] | Sequence[tuple[str, np.ndarray]]
    ) -> None:
        """Store vectors (one short write transaction)."""
        items = list(vectors.items()) if isinstance(vectors, Mapping) else list(vectors)
        if not items:
            return
        rows = [
            (embedder, key, int(vector.shape[0]), np.ascontiguousarray(vector, dtype=np.float32).tobytes())
            for key, vector in items
        ]
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                self._connection.executemany(
                    "INSERT OR REPLACE INTO embedding (embedder, text_hash, dim, vector) VALUES (?, ?, ?, ?)",
                    rows,
                )
                self._connection.execute("COMMIT")
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise

    def count(self, embedder: str | None = None) -> int:
        """Number of cached vectors (for one embedder, or all)."""
        with self._lock:
            if embedder is None:
                row = self._connection.execute("SELECT COUNT(*) FROM embedding").fetchone()
            else:
                row = self._connection.execute(
                    "SELECT COUNT(*) FROM embedding WHERE embedder = ?", [embedder]
                ).fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._connection.close()
