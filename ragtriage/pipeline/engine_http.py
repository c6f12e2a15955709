"""A generic JSON retrieval endpoint as a route (Dify `/datasets/{id}/retrieve`, RAGFlow `/api/v1/retrieval`, …).

The request body is a template (`[engines.NAME] request`): the string "{{query}}" becomes the
query text and "{{k}}" the number of hits wanted. The response is mapped by dotted paths:
`results_path` to the list of hits, `id_path` and `score_path` inside one hit. The helpers here
(`fill_template`, `at_path`, `JSONEndpoint`, `JSONRoute`) serve the Elasticsearch adapter too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import httpx

from ragtriage.config.settings import ElasticsearchEngine, HTTPEngine
from ragtriage.errors import PipelineError
from ragtriage.index.types import ScoredChunk

_MISSING = object()
EngineT = TypeVar("EngineT", bound=ElasticsearchEngine | HTTPEngine)


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


def is_missing(value: Any) -> bool:
    """True for the marker `at_path` returns when a path is absent."""
    return value is _MISSING


class JSONEndpoint:
    """POSTs JSON to one URL and turns every failure into one `PipelineError` line naming the route and the fix."""

    def __init__(
        self,
        *,
        route: str,
        engine: str,
        url: str,
        timeout_s: float,
        api_key_env: str | None,
        auth_scheme: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.route, self.engine, self.url = route, engine, url
        self.where = f"route {route} (engine {engine}): {url}"
        merged = {"Content-Type": "application/json", **(headers or {})}
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise PipelineError(
                    f"route {route} (engine {engine}): ${api_key_env} is not set; export the API key "
                    f"in it (keys are read from the environment only, [engines.{engine}] api_key_env)"
                )
            merged["Authorization"] = f"{auth_scheme} {key}"
        self._client = httpx.Client(timeout=timeout_s, headers=merged)

    def post(self, body: Any) -> Any:
        """The decoded JSON answer.

        Raises:
            PipelineError: unreachable, timeout, HTTP 4xx/5xx, or an answer that is not JSON.
        """
        try:
            response = self._client.post(self.url, json=body)
        except httpx.TimeoutException:
            raise PipelineError(
                f"{self.where} timed out; raise [engines.{self.engine}] timeout_s or check the service"
            ) from None
        except httpx.HTTPError as error:
            raise PipelineError(
                f"{self.where} is unreachable ({type(error).__name__}); check [engines.{self.engine}] url "
                "and that the service is up"
            ) from None
        if response.status_code in (401, 403):
            raise PipelineError(
                f"{self.where} refused the request (HTTP {response.status_code}); check the key in the "
                f"variable [engines.{self.engine}] api_key_env names"
            )
        if response.status_code >= 400:
            fix = (
                "retry later or check the service"
                if response.status_code >= 500
                else f"check [engines.{self.engine}] url and request template"
            )
            raise PipelineError(
                f"{self.where} answered HTTP {response.status_code}: {_reason(response)}; {fix}"
            )
        try:
            return response.json()
        except ValueError:
            raise PipelineError(
                f"{self.where} answered with something that is not JSON; check the URL"
            ) from None

    def missing(self, path: str, setting: str, answer: Any) -> PipelineError:
        """The error for a response that lacks `path` (with the service's own message, if it sent one:
        RAGFlow answers HTTP 200 with `{"code": 102, "message": …}`)."""
        said = next(
            (v for p in ("message", "error", "detail") if isinstance(v := at_path(answer, p), str) and v),
            None,
        )
        if said:
            return PipelineError(f"{self.where}: the service answered '{said[:200]}' instead of results")
        return PipelineError(
            f"{self.where}: the response has no '{path}'; set [engines.{self.engine}] {setting} to where "
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


def hits_from(
    endpoint: JSONEndpoint,
    items: Any,
    id_path: str,
    score_path: str,
    k: int,
    *,
    id_setting: str,
    score_setting: str,
) -> list[ScoredChunk]:
    """Ranked hits from a list of result objects (ranks from 1, at most k, first occurrence of an id wins)."""
    hits: list[ScoredChunk] = []
    seen: set[str] = set()
    for number, item in enumerate(items, start=1):
        chunk_id = at_path(item, id_path)
        if is_missing(chunk_id) or chunk_id is None:
            raise PipelineError(
                f"{endpoint.where}: hit {number} has no '{id_path}'; set [engines.{endpoint.engine}] "
                f"{id_setting} to the field holding production's chunk id"
            )
        score = at_path(item, score_path)
        if is_missing(score) or not isinstance(score, (int, float)):
            raise PipelineError(
                f"{endpoint.where}: hit {number} has no numeric '{score_path}'; set "
                f"[engines.{endpoint.engine}] {score_setting}"
            )
        if str(chunk_id) in seen:
            continue
        seen.add(str(chunk_id))
        hits.append(ScoredChunk(chunk_id=str(chunk_id), rank=len(hits) + 1, score=float(score)))
        if len(hits) == k:
            break
    return hits


@dataclass(frozen=True)
class AnswerPaths:
    """Where a JSON answer holds its hits (dotted paths), and the `[engines.NAME]` setting that fixes each."""

    results: str
    results_setting: str
    chunk_id: str
    id_setting: str
    score: str
    score_setting: str


class JSONRoute(Generic[EngineT]):
    """A route over one `JSONEndpoint`: POST a body built from the query, map the answer's hits.

    Subclasses build the body (`_body`); the endpoint (timeout, key from the environment, errors)
    and the answer mapping are shared.
    """

    def __init__(
        self,
        route: str,
        name: str,
        settings: EngineT,
        *,
        kind: Literal["bm25", "dense"],
        url: str,
        auth_scheme: str,
        paths: AnswerPaths,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.name = name
        self.settings = settings
        self.paths = paths
        self.endpoint = JSONEndpoint(
            route=route,
            engine=name,
            url=url,
            timeout_s=settings.timeout_s,
            api_key_env=settings.api_key_env,
            auth_scheme=auth_scheme,
            headers=headers,
        )

    def _body(self, query: str, k: int) -> Any:
        raise NotImplementedError

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        """Hits (ranks from 1, at most k) and no flags. Raises `PipelineError` (one line) on any failure."""
        answer = self.endpoint.post(self._body(query, k))
        paths = self.paths
        items = at_path(answer, paths.results)
        if is_missing(items) or not isinstance(items, list):
            raise self.endpoint.missing(paths.results, paths.results_setting, answer)
        hits = hits_from(
            self.endpoint,
            items,
            paths.chunk_id,
            paths.score,
            k,
            id_setting=paths.id_setting,
            score_setting=paths.score_setting,
        )
        return hits, []

    def close(self) -> None:
        self.endpoint.close()


class HTTPRetriever(JSONRoute[HTTPEngine]):
    """A route that POSTs the query to a JSON retrieval endpoint and maps its answer to ranked chunk ids."""

    def __init__(
        self, route: str, name: str, settings: HTTPEngine, *, kind: Literal["bm25", "dense"]
    ) -> None:
        super().__init__(
            route,
            name,
            settings,
            kind=kind,
            url=settings.url,
            auth_scheme="Bearer",
            headers=settings.headers,
            paths=AnswerPaths(
                results=settings.results_path,
                results_setting="results_path",
                chunk_id=settings.id_path,
                id_setting="id_path",
                score=settings.score_path,
                score_setting="score_path",
            ),
        )

    def _body(self, query: str, k: int) -> Any:
        return fill_template(self.settings.request, query, k)
