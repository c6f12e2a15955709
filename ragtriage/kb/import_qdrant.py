"""`kb import --qdrant-url URL | --qdrant-path DIR --collection NAME`: scroll production's collection.

Read only: the collection is checked, counted and scrolled with payload and vectors; nothing is
written to it. Each point becomes a row with the columns `id` (the point id as text),
`payload.<key>` for every payload key (a nested object's keys too: `payload.metadata.doc_id`),
and `vector` (an unnamed vector, or the named vector chosen with `--vector-field`, required when
the collection has several).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from ragtriage.errors import InputError
from ragtriage.kb.import_rows import SourceRow

__all__ = ["QdrantSource"]

ProgressCallback = Callable[[int, int], None]
VECTOR_COLUMN = "vector"


class QdrantSource:
    """The points of one Qdrant collection as chunk rows."""

    schemaless = True
    columns: list[str] | None = None
    vector_column = VECTOR_COLUMN

    def __init__(
        self,
        *,
        url: str | None,
        path: Path | None,
        collection: str,
        vector_name: str | None = None,
        batch_size: int = 2000,
    ) -> None:
        self.where = url or str(path)
        self.collection = collection
        self.batch_size = batch_size
        self.name = f"qdrant {self.where} collection {collection}"
        # A foreign local folder can be big: qdrant-client's size warning would land in our progress.
        warnings.filterwarnings("ignore", message="Local mode is not recommended", category=UserWarning)
        try:
            self._client = QdrantClient(url=url, timeout=30) if url else QdrantClient(path=str(path))
        except RuntimeError as error:
            raise InputError(
                f"{self.name}: cannot open ({error}); fix: stop the process using that folder"
            ) from None
        try:
            self._vector_name = self._check_collection(vector_name)
        except BaseException:
            self._client.close()
            raise

    def _check_collection(self, vector_name: str | None) -> str | None:
        try:
            exists = self._client.collection_exists(self.collection)
            names = [c.name for c in self._client.get_collections().collections] if not exists else []
        except (ResponseHandlingException, UnexpectedResponse, OSError) as error:
            raise InputError(
                f"--qdrant-url: cannot reach Qdrant at {self.where} ({_first_line(error)}); "
                "fix: check the URL and that the server is running"
            ) from None
        if not exists:
            raise InputError(
                f"{self.name}: no such collection (there: {', '.join(names) or 'none'}); fix: --collection NAME"
            )
        vectors = self._client.get_collection(self.collection).config.params.vectors
        if isinstance(vectors, dict):
            if vector_name is None and len(vectors) == 1:
                return next(iter(vectors))
            if vector_name not in vectors:
                raise InputError(
                    f"{self.name}: the collection has named vectors {', '.join(vectors)}; "
                    "fix: choose one with --vector-field NAME"
                )
            return vector_name
        return None

    def batches(self, on_progress: ProgressCallback | None = None) -> Iterator[list[SourceRow]]:
        """All points in scroll order, in batches of `batch_size`."""
        total = int(self._client.count(self.collection, exact=True).count)
        done = 0
        offset: Any = None
        while True:
            points, offset = self._client.scroll(
                self.collection,
                limit=self.batch_size,
                offset=offset,
                with_payload=True,
                with_vectors=[self._vector_name] if self._vector_name else True,
            )
            rows = []
            for point in points:
                values: dict[str, Any] = {"id": str(point.id)}
                values.update(_payload_columns(point.payload or {}, "payload"))
                vector: Any = point.vector
                if isinstance(vector, dict):
                    # LangChain names its dense vector "" (beside `langchain-sparse` when hybrid).
                    vector = vector.get(self._vector_name or "")
                rows.append(
                    SourceRow(
                        f"{self.name}: point {point.id}",
                        values,
                        None if vector is None else np.asarray(vector, dtype=np.float32),
                    )
                )
            done += len(rows)
            if rows:
                yield rows
            if on_progress is not None:
                on_progress(done, total)
            if offset is None:
                return

    def close(self) -> None:
        """Close the client (releases a local-mode folder)."""
        self._client.close()


def _payload_columns(payload: dict[str, Any], prefix: str) -> dict[str, Any]:
    """`prefix.<key>` for each key; a non-empty nested object gives a column per key inside it
    instead (LangChain keeps everything but the text under `metadata`). A key that is already
    there keeps its first value."""
    columns: dict[str, Any] = {}
    for key, value in payload.items():
        column = f"{prefix}.{key}"
        if isinstance(value, dict) and value:
            for inner, inner_value in _payload_columns(value, column).items():
                columns.setdefault(inner, inner_value)
        else:
            columns.setdefault(column, value)
    return columns


def _first_line(error: object) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
