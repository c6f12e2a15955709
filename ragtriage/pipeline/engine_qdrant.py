"""An existing collection of a Qdrant server as a route, read with production's payload field names.

Production's collection is searched through qdrant-client's REST transport (`POST
/collections/{c}/points/query`) with the query vector the pipeline embedded; the chunk id comes from
the payload key `id_payload_key` (dotted), never from the point id (production may use any ids).
The query vector must come from production's embedding model: name it in `[embedder]`.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import numpy as np

from ragtriage.config.settings import QdrantEngine
from ragtriage.errors import PipelineError
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.engine_http import at_path, is_missing


class QdrantServerRetriever:
    """A route searching production's own Qdrant collection (a `VectorRetriever`: the pipeline embeds)."""

    def __init__(
        self, route: str, name: str, settings: QdrantEngine, *, kind: Literal["bm25", "dense"]
    ) -> None:
        from qdrant_client import QdrantClient

        self.kind = kind
        self.name = name
        self.settings = settings
        self.where = (
            f"route {route} (engine {name}): {settings.url.rstrip('/')}/collections/{settings.collection}"
        )
        api_key = None
        if settings.api_key_env:
            api_key = os.environ.get(settings.api_key_env) or None
        # No version probe at start: the first query reports an unreachable server with the route.
        self._client = QdrantClient(
            url=settings.url,
            api_key=api_key,
            timeout=int(max(1, settings.timeout_s)),
            check_compatibility=False,
            https=settings.url.startswith("https"),
        )

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        """Text search is not possible: this route needs the query vector (the pipeline passes it)."""
        raise PipelineError(f"{self.where} searches by vector; the pipeline must embed the query first")

    def search_vector(self, vector: np.ndarray, k: int) -> list[ScoredChunk]:
        """Hits (ranks from 1, at most k). Raises `PipelineError` (one line) on any failure."""
        from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

        settings = self.settings
        try:
            response = self._client.query_points(
                settings.collection,
                query=[float(x) for x in np.asarray(vector).ravel()],
                using=settings.vector_name,
                limit=k,
                with_payload=True,
            )
        except UnexpectedResponse as error:
            raise PipelineError(
                f"{self.where} answered HTTP {error.status_code}: {_reason(error)}; {_fix(error, self.name)}"
            ) from None
        except (ResponseHandlingException, OSError) as error:
            raise PipelineError(
                f"{self.where} is unreachable ({type(error).__name__}); check [engines.{self.name}] url "
                "and that the server is up"
            ) from None
        hits: list[ScoredChunk] = []
        for number, point in enumerate(response.points, start=1):
            chunk_id = at_path(point.payload or {}, settings.id_payload_key)
            if is_missing(chunk_id) or chunk_id is None:
                raise PipelineError(
                    f"{self.where}: point {number} (id {point.id}) has no payload key "
                    f"'{settings.id_payload_key}'; set [engines.{self.name}] id_payload_key to the key holding "
                    "production's chunk id"
                )
            hits.append(ScoredChunk(chunk_id=str(chunk_id), rank=len(hits) + 1, score=float(point.score)))
        return hits

    def close(self) -> None:
        self._client.close()


def _reason(error: Any) -> str:
    try:
        body = error.structured()
    except ValueError:  # not JSON: fall back to the phrase
        return str(error.reason_phrase)
    status = at_path(body, "status.error")
    return str(status)[:200] if isinstance(status, str) else str(error.reason_phrase)


def _fix(error: Any, name: str) -> str:
    code = error.status_code or 0
    if code in (401, 403):
        return f"check the key in the variable [engines.{name}] api_key_env names"
    if code == 404:
        return f"check [engines.{name}] collection"
    if code >= 500:
        return "retry later or check the server"
    return f"check [engines.{name}] vector_name and that [embedder] is production's model (same dimension)"
