"""An Elasticsearch or OpenSearch index as a route: `POST {url}/{index}/_search` with production's query.

The body is `[engines.NAME] query` with "{{query}}" and "{{k}}" filled in and `size` set to k.
Hits are read from `hits.hits[]`: the chunk id is `_id`, or a dotted path in `_source` (`id_field`),
and the score is `_score`. The key, if any, is sent as `Authorization: ApiKey …`.
"""

from __future__ import annotations

from typing import Any, Literal

from ragtriage.config.settings import ElasticsearchEngine
from ragtriage.pipeline.engine_http import AnswerPaths, JSONRoute, fill_template


class ElasticsearchRetriever(JSONRoute[ElasticsearchEngine]):
    """A route searching production's Elasticsearch/OpenSearch index with its own query template."""

    def __init__(
        self, route: str, name: str, settings: ElasticsearchEngine, *, kind: Literal["bm25", "dense"]
    ) -> None:
        super().__init__(
            route,
            name,
            settings,
            kind=kind,
            url=f"{settings.url.rstrip('/')}/{settings.index}/_search",
            auth_scheme="ApiKey",
            paths=AnswerPaths(
                results="hits.hits",
                results_setting="url and index (is this an _search answer?)",
                chunk_id="_id" if settings.id_field == "_id" else f"_source.{settings.id_field}",
                id_setting="id_field",
                score="_score",
                score_setting="query (no _score: sorted?)",
            ),
        )

    def _body(self, query: str, k: int) -> Any:
        body: dict[str, Any] = fill_template(self.settings.query, query, k)
        body["size"] = k
        return body
