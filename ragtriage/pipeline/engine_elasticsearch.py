"""An Elasticsearch or OpenSearch index as a route: `POST {url}/{index}/_search` with production's query.

The body is `[engines.NAME] query` with "{{query}}" and "{{k}}" filled in and `size` set to k.
Hits are read from `hits.hits[]`: the chunk id is `_id`, or a dotted path in `_source` (`id_field`),
and the score is `_score`. The key, if any, is sent as `Authorization: ApiKey …`.
"""

from __future__ import annotations

from typing import Any, Literal

from ragtriage.config_replay import ElasticsearchEngine
from ragtriage.pipeline.engine_http import JSONEndpoint, at_path, fill_template, hits_from, is_missing
from ragtriage.pipeline.types import ScoredChunk


class ElasticsearchRetriever:
    """A route searching production's Elasticsearch/OpenSearch index with its own query template."""

    def __init__(
        self, route: str, name: str, settings: ElasticsearchEngine, *, kind: Literal["bm25", "dense"]
    ) -> None:
        self.kind = kind
        self.name = name
        self.settings = settings
        self.endpoint = JSONEndpoint(
            route=route,
            engine=name,
            url=f"{settings.url.rstrip('/')}/{settings.index}/_search",
            timeout_s=settings.timeout_s,
            api_key_env=settings.api_key_env,
            auth_scheme="ApiKey",
        )

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        """Hits (ranks from 1, at most k) and no flags. Raises `PipelineError` (one line) on any failure."""
        body: dict[str, Any] = fill_template(self.settings.query, query, k)
        body["size"] = k
        answer = self.endpoint.post(body)
        items = at_path(answer, "hits.hits")
        if is_missing(items) or not isinstance(items, list):
            raise self.endpoint.missing("hits.hits", "url and index (is this an _search answer?)", answer)
        id_path = "_id" if self.settings.id_field == "_id" else f"_source.{self.settings.id_field}"
        hits = hits_from(
            self.endpoint,
            items,
            id_path,
            "_score",
            k,
            id_setting="id_field",
            score_setting="query (no _score: sorted?)",
        )
        return hits, []

    def close(self) -> None:
        self.endpoint.close()
