"""Production engines as routes: the `Retriever` of every route `[retrieval] route_engine` names.

- `ElasticsearchRetriever`: an Elasticsearch/OpenSearch index, `POST {url}/{index}/_search` with
  `[engines.NAME] query` ("{{query}}" and "{{k}}" filled in, `size` set to k); hits from `hits.hits[]`,
  the chunk id `_id` or a dotted path in `_source` (`id_field`), the score `_score`; key as `ApiKey`.
- `HTTPRetriever`: any JSON retrieval endpoint (Dify `/datasets/{id}/retrieve`, RAGFlow
  `/api/v1/retrieval`, …): the body template `request`, the answer mapped by the dotted paths
  `results_path`, `id_path` and `score_path`; key as `Bearer`.
- `QdrantServerRetriever`: an existing collection of a Qdrant server, searched through qdrant-client's
  REST transport with the query vector the pipeline embedded (production's model: name it in
  `[embedder]`); the chunk id comes from the payload key `id_payload_key`, never the point id.

Keys come from environment variables only. Every failure is one `PipelineError` line naming the
route, the engine and the setting that fixes it.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import httpx
import numpy as np

from ragtriage.config.profiles import check_route_engines
from ragtriage.config.settings import ElasticsearchEngine, HTTPEngine, QdrantEngine, Settings
from ragtriage.errors import PipelineError
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.types import Retriever

LOCAL = "local"
_MISSING = object()
#: A dotted path in a JSON answer and the `[engines.NAME]` setting that fixes it.
PathSetting = tuple[str, str]


def build_route_engines(settings: Settings) -> dict[str, tuple[str, Retriever]]:
    """Route name → (engine name, retriever) for every route whose `route_engine` is not `local`.

    Raises:
        ConfigError: a route names an engine without an `[engines.NAME]` table.
        PipelineError: an engine's client library is missing.
    """
    check_route_engines(settings, str(settings.config_file or "settings"))
    routes: dict[str, tuple[str, Retriever]] = {}
    for route, name in settings.retrieval.route_engine.items():
        if name != LOCAL and route in settings.retrieval.routes:
            # One client per route, so every error names the route it came from.
            engine = settings.engines[name]
            kind: Literal["bm25", "dense"] = "bm25" if route.startswith("bm25") else "dense"
            retriever: Retriever
            if isinstance(engine, ElasticsearchEngine):
                retriever = ElasticsearchRetriever(route, name, engine, kind=kind)
            elif isinstance(engine, QdrantEngine):
                retriever = QdrantServerRetriever(route, name, engine, kind=kind)
            else:
                retriever = HTTPRetriever(route, name, engine, kind=kind)
            routes[route] = (name, retriever)
    return routes


def fill_template(template: Any, query: str, k: int) -> Any:
    """A copy of `template` with "{{query}}" → query and "{{k}}" → k (a whole-string "{{k}}" becomes an int)."""
    if isinstance(template, dict):
        return {key: fill_template(value, query, k) for key, value in template.items()}
    if isinstance(template, list):
        return [fill_template(value, query, k) for value in template]
    if isinstance(template, str):
        if template == "{{k}}":
            return k
        return template.replace("{{query}}", query).replace("{{k}}", str(k))
    return template


def at_path(data: Any, path: str) -> Any:
    """The value at a dotted path (`data.chunks`, `segment.id`, `0.id`), or `_MISSING`."""
    node = data
    for part in path.split(".") if path else []:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


class JSONRoute:
    """A route that POSTs a JSON body built from the query to one URL and maps the answer's hits by
    dotted paths (`results`, and `chunk_id` and `score` inside one hit)."""

    def __init__(
        self,
        route: str,
        name: str,
        settings: ElasticsearchEngine | HTTPEngine,
        *,
        kind: Literal["bm25", "dense"],
        url: str,
        auth_scheme: str,
        results: PathSetting,
        chunk_id: PathSetting,
        score: PathSetting,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.name = name
        self.url = url
        self.where = f"route {route} (engine {name}): {url}"
        self.paths = (results, chunk_id, score)
        merged = {"Content-Type": "application/json", **(headers or {})}
        if api_key_env := settings.api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise PipelineError(
                    f"route {route} (engine {name}): ${api_key_env} is not set; export the API key "
                    f"in it (keys are read from the environment only, [engines.{name}] api_key_env)"
                )
            merged["Authorization"] = f"{auth_scheme} {key}"
        self._client = httpx.Client(timeout=settings.timeout_s, headers=merged)

    def _body(self, query: str, k: int) -> Any:
        raise NotImplementedError

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        """Hits (ranks from 1, at most k, first occurrence of an id wins) and no flags.
        Raises `PipelineError` (one line) on any failure."""
        answer = self._post(self._body(query, k))
        (results, results_setting), (id_path, id_setting), (score_path, score_setting) = self.paths
        items = at_path(answer, results)
        if not isinstance(items, list):
            raise self._missing(results, results_setting, answer)
        hits: list[ScoredChunk] = []
        for number, item in enumerate(items, start=1):
            chunk_id = at_path(item, id_path)
            if chunk_id is _MISSING or chunk_id is None:
                raise PipelineError(
                    f"{self.where}: hit {number} has no '{id_path}'; set [engines.{self.name}] "
                    f"{id_setting} to the field holding production's chunk id"
                )
            score = at_path(item, score_path)
            if not isinstance(score, (int, float)):
                raise PipelineError(
                    f"{self.where}: hit {number} has no numeric '{score_path}'; set "
                    f"[engines.{self.name}] {score_setting}"
                )
            if any(hit.chunk_id == str(chunk_id) for hit in hits):
                continue
            hits.append(ScoredChunk(chunk_id=str(chunk_id), rank=len(hits) + 1, score=float(score)))
            if len(hits) == k:
                break
        return hits, []

    def _post(self, body: Any) -> Any:
        """The decoded JSON answer; `PipelineError` when unreachable, timed out, HTTP 4xx/5xx or not JSON."""
        engine = f"[engines.{self.name}]"
        try:
            response = self._client.post(self.url, json=body)
        except httpx.TimeoutException:
            raise PipelineError(
                f"{self.where} timed out; raise {engine} timeout_s or check the service"
            ) from None
        except httpx.HTTPError as error:
            raise PipelineError(
                f"{self.where} is unreachable ({type(error).__name__}); check {engine} url "
                "and that the service is up"
            ) from None
        status = response.status_code
        if status in (401, 403):
            raise PipelineError(
                f"{self.where} refused the request (HTTP {status}); check the key in the "
                f"variable {engine} api_key_env names"
            )
        if status >= 400:
            fix = (
                "retry later or check the service"
                if status >= 500
                else f"check {engine} url and request template"
            )
            raise PipelineError(f"{self.where} answered HTTP {status}: {_reason(response)}; {fix}")
        try:
            return response.json()
        except ValueError:
            raise PipelineError(
                f"{self.where} answered with something that is not JSON; check the URL"
            ) from None

    def _missing(self, path: str, setting: str, answer: Any) -> PipelineError:
        """The error for an answer that lacks `path` (with the service's own message, if it sent one:
        RAGFlow answers HTTP 200 with `{"code": 102, "message": …}`)."""
        said = next(
            (v for p in ("message", "error", "detail") if isinstance(v := at_path(answer, p), str) and v),
            None,
        )
        if said:
            return PipelineError(f"{self.where}: the service answered '{said[:200]}' instead of results")
        return PipelineError(
            f"{self.where}: the response has no '{path}'; set [engines.{self.name}] {setting} to where "
            "the response holds it"
        )

    def close(self) -> None:
        self._client.close()


def _reason(response: httpx.Response) -> str:
    """A short reason from an error answer (its `error.reason`, `message` or first 120 characters)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:120].replace("\n", " ") or response.reason_phrase
    for path in ("error.reason", "error.root_cause.0.reason", "status.error", "message", "error", "detail"):
        value = at_path(body, path)
        if isinstance(value, str) and value:
            return value[:200]
    return str(body)[:120]


class ElasticsearchRetriever(JSONRoute):
    """A route searching production's Elasticsearch/OpenSearch index with its own query template."""

    def __init__(
        self, route: str, name: str, settings: ElasticsearchEngine, *, kind: Literal["bm25", "dense"]
    ) -> None:
        self.settings = settings
        super().__init__(
            route,
            name,
            settings,
            kind=kind,
            url=f"{settings.url.rstrip('/')}/{settings.index}/_search",
            auth_scheme="ApiKey",
            results=("hits.hits", "url and index (is this an _search answer?)"),
            chunk_id=("_id" if settings.id_field == "_id" else f"_source.{settings.id_field}", "id_field"),
            score=("_score", "query (no _score: sorted?)"),
        )

    def _body(self, query: str, k: int) -> Any:
        body: dict[str, Any] = fill_template(self.settings.query, query, k)
        body["size"] = k
        return body


class HTTPRetriever(JSONRoute):
    """A route that POSTs the query to a JSON retrieval endpoint and maps its answer to ranked chunk ids."""

    def __init__(
        self, route: str, name: str, settings: HTTPEngine, *, kind: Literal["bm25", "dense"]
    ) -> None:
        self.settings = settings
        super().__init__(
            route,
            name,
            settings,
            kind=kind,
            url=settings.url,
            auth_scheme="Bearer",
            headers=settings.headers,
            results=(settings.results_path, "results_path"),
            chunk_id=(settings.id_path, "id_path"),
            score=(settings.score_path, "score_path"),
        )

    def _body(self, query: str, k: int) -> Any:
        return fill_template(self.settings.request, query, k)


class QdrantServerRetriever:
    """A route searching production's own Qdrant collection (a `VectorRetriever`: the pipeline embeds)."""

    def __init__(
        self, route: str, name: str, settings: QdrantEngine, *, kind: Literal["bm25", "dense"]
    ) -> None:
        # qdrant-client takes 0.5-2 s to import: paid only by a profile that searches a Qdrant server.
        from qdrant_client import QdrantClient

        self.kind = kind
        self.name = name
        self.settings = settings
        self.where = (
            f"route {route} (engine {name}): {settings.url.rstrip('/')}/collections/{settings.collection}"
        )
        api_key = os.environ.get(settings.api_key_env) or None if settings.api_key_env else None
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

        settings, engine = self.settings, f"[engines.{self.name}]"
        try:
            response = self._client.query_points(
                settings.collection,
                query=[float(x) for x in np.asarray(vector).ravel()],
                using=settings.vector_name,
                limit=k,
                with_payload=True,
            )
        except UnexpectedResponse as error:
            code = error.status_code or 0
            if code in (401, 403):
                fix = f"check the key in the variable {engine} api_key_env names"
            elif code == 404:
                fix = f"check {engine} collection"
            elif code >= 500:
                fix = "retry later or check the server"
            else:
                fix = f"check {engine} vector_name and that [embedder] is production's model (same dimension)"
            raise PipelineError(
                f"{self.where} answered HTTP {error.status_code}: {_qdrant_reason(error)}; {fix}"
            ) from None
        except (ResponseHandlingException, OSError) as error:
            raise PipelineError(
                f"{self.where} is unreachable ({type(error).__name__}); check {engine} url and that the server is up"
            ) from None
        hits: list[ScoredChunk] = []
        for number, point in enumerate(response.points, start=1):
            chunk_id = at_path(point.payload or {}, settings.id_payload_key)
            if chunk_id is _MISSING or chunk_id is None:
                raise PipelineError(
                    f"{self.where}: point {number} (id {point.id}) has no payload key "
                    f"'{settings.id_payload_key}'; set {engine} id_payload_key to the key holding "
                    "production's chunk id"
                )
            hits.append(ScoredChunk(chunk_id=str(chunk_id), rank=len(hits) + 1, score=float(point.score)))
        return hits

    def close(self) -> None:
        self._client.close()


def _qdrant_reason(error: Any) -> str:
    try:
        body = error.structured()
    except ValueError:  # not JSON: fall back to the phrase
        return str(error.reason_phrase)
    status = at_path(body, "status.error")
    return str(status)[:200] if isinstance(status, str) else str(error.reason_phrase)
