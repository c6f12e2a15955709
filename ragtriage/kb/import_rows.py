"""The row types of `kb import`: what a source yields, what the mapper makes of it, and a bad row."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragtriage.errors import InputError

__all__ = ["ImportedChunk", "RowError", "SourceRow"]

# `json.dumps(…, ensure_ascii=False, sort_keys=True, default=str)`, without a new encoder per row.
_SOURCE_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str).encode


@dataclass
class SourceRow:
    """One row as a source read it: where it is (`file:line`, `row N`, `point ID`) and its columns."""

    where: str
    values: dict[str, Any]
    vector: np.ndarray | None = None
    """The vector, when the source decoded it already (Parquet list columns)."""


@dataclass
class ImportedChunk:
    """One mapped, validated row: the chunk fields, its metadata and its vector."""

    where: str
    chunk_id: str
    doc_id: str
    doc_title: str | None
    title: str
    heading_path: list[str]
    anchor: str | None
    ordinal: int
    content: str
    content_hash: str
    doc_version: str | None
    updated_at: dt.datetime | None
    product_line: str | None
    retrievable: bool
    """Passes the status filters (`status`, `published`, `deleted`)."""
    excluded_by: str | None = None
    """The filter that keeps it out (`deleted`, `not published`, `status DRAFT`); None when retrievable."""
    filtered_by: str | None = None
    """`excluded_by` with the source column and value, e.g. `not published (status=DRAFT)` (`kb show`)."""
    meta: dict[str, Any] = field(default_factory=dict)
    compared_meta: dict[str, Any] | None = None
    """The metadata as the change fingerprint compares it (`import_compare.compared_meta`); None:
    `meta` as it is."""
    vector: np.ndarray | None = None
    vector_hash: str | None = None
    index_hash: str | None = None
    """`kb_chunks.index_hash` of the chunk, once it is written (for the indexes)."""
    _source_hash: str | None = field(default=None, repr=False, compare=False)

    def source_hash(self) -> str:
        """sha256 over every mapped field, the metadata and the vector hash (unchanged detection).

        The same values written by another format hash the same: the mapped fields are parsed
        (ids and titles as text, ordinal as int, `updated_at` as a UTC instant, status as
        retrievable or not) and the metadata is compared in `import_compare`'s canonical form,
        which also says what counts as a change.
        """
        if self._source_hash is None:
            self._source_hash = self._compute_source_hash()
        return self._source_hash

    def _compute_source_hash(self) -> str:
        payload = [
            self.chunk_id,
            self.doc_id,
            self.doc_title,
            self.title,
            self.heading_path,
            self.anchor,
            self.ordinal,
            self.content_hash,
            self.doc_version,
            self.updated_at.isoformat() if self.updated_at else None,
            self.product_line,
            self.retrievable,
            self.meta if self.compared_meta is None else self.compared_meta,
            self.vector_hash,
        ]
        text = _SOURCE_JSON(payload)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RowError(InputError):
    """One row that cannot be imported: `where: reason; fix: …`."""

    def __init__(self, where: str, reason: str, fix: str) -> None:
        self.where = where
        self.reason = reason
        self.fix = fix
        super().__init__(f"{where}: {reason}; fix: {fix}")
