"""Settings sections for replay profiles, fusion methods and production engines used as routes.

Imported by `config.py` (which re-exports them); see `ragtriage.pipeline.profiles` for how
profiles are resolved and `ragtriage.pipeline.engines` for the engine adapters.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ragtriage.config_base import StrictModel

#: Route names a setting may name; `dense_sub` stands for every sub-query route.
RouteName = Literal["bm25_raw", "dense_raw", "bm25_rewritten", "dense_rewritten", "dense_sub"]


class FusionSettings(StrictModel):
    """How the routes' lists are fused (`ragtriage.pipeline.fusion`)."""

    method: Literal["rrf", "weighted", "combsum", "combmnz"] = "rrf"
    """`rrf` uses ranks only ([retrieval] rrf_k); the others combine normalised scores."""
    weights: dict[RouteName, float] = Field(default_factory=dict)
    """Per-route weights of `weighted` fusion, e.g. {dense_raw = 0.7, bm25_raw = 0.3}; unlisted routes weigh 1.0."""
    normalization: Literal["none", "min-max", "max", "z-score"] = "min-max"
    """Per-list score normalisation of the score-based methods."""
    missing: Literal["zero", "min"] = "zero"
    """What a chunk missing from a route's list scores there in `weighted` fusion: 0 or that list's lowest score."""


class ElasticsearchEngine(StrictModel):
    """An Elasticsearch or OpenSearch index searched with `POST {url}/{index}/_search`."""

    type: Literal["elasticsearch"]
    url: str
    """Base URL of the cluster, e.g. `http://es.internal:9200`."""
    index: str
    query: dict[str, Any] = Field(default_factory=lambda: {"query": {"match": {"content": "{{query}}"}}})
    """Request body template; the strings "{{query}}" and "{{k}}" are replaced (`size` is set to k)."""
    id_field: str = "_id"
    """Where the chunk id is: `_id`, or a dotted path in `_source` (e.g. `metadata.chunk_id`)."""
    api_key_env: str | None = None
    """Environment variable holding the API key (sent as `Authorization: ApiKey …`); None: no auth."""
    timeout_s: float = Field(default=10.0, gt=0)


class QdrantEngine(StrictModel):
    """An existing collection of a Qdrant server, searched with production's own payload names."""

    type: Literal["qdrant"]
    url: str
    collection: str
    id_payload_key: str = "chunk_id"
    """Payload key (dotted path) that holds production's chunk id."""
    vector_name: str | None = None
    """Named vector of the collection (None: the default vector)."""
    api_key_env: str | None = "RAGTRIAGE_QDRANT_API_KEY"
    timeout_s: float = Field(default=10.0, gt=0)


class HTTPEngine(StrictModel):
    """Any JSON retrieval endpoint (Dify `/datasets/{id}/retrieve`, RAGFlow `/api/v1/retrieval`, …)."""

    type: Literal["http"]
    url: str
    request: dict[str, Any] = Field(default_factory=lambda: {"query": "{{query}}", "top_k": "{{k}}"})
    """JSON body template: the string "{{query}}" becomes the query, "{{k}}" the number k."""
    results_path: str = "records"
    """Dotted path to the list of hits in the response (Dify: `records`; RAGFlow: `data.chunks`)."""
    id_path: str = "id"
    """Dotted path to the chunk id inside one hit (Dify: `segment.id`; RAGFlow: `id`)."""
    score_path: str = "score"
    """Dotted path to the score inside one hit (Dify: `score`; RAGFlow: `similarity`)."""
    api_key_env: str | None = None
    """Environment variable holding the key, sent as `Authorization: Bearer …`; None: no auth."""
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(default=10.0, gt=0)


EngineSettings = Annotated[ElasticsearchEngine | QdrantEngine | HTTPEngine, Field(discriminator="type")]


class ProfileSettings(StrictModel):
    """One replay profile: an overlay of the retrieval sections on the settings (or on `extends`)."""

    description: str = ""
    extends: str | None = None
    """Another profile or a shipped preset this one starts from (None: the settings file itself)."""
    rewrite: dict[str, Any] = Field(default_factory=dict)
    retrieval: dict[str, Any] = Field(default_factory=dict)
    rerank: dict[str, Any] = Field(default_factory=dict)
    engines: dict[str, Any] = Field(default_factory=dict)


class ReplaySettings(StrictModel):
    """Which profile replays a logged request."""

    default_profile: str = "default"
    """Profile for requests no `versions` entry matches; `default` is the settings file as it is."""
    versions: dict[str, str] = Field(default_factory=dict)
    """Logged `pipeline_version` (exact, or a glob with * ? [..]) → profile name. Exact wins, then the
    glob with the most literal characters, then the alphabetically first."""
    profile_dir: str = "profiles"
    """Folder of `NAME.toml` profile files, relative to the settings file's folder."""
