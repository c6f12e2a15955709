"""Record types and stage interfaces shared by the pipeline, diagnosis, eval and both faces.

Pure data: no backend imports. `Trace` is the JSON form of one run of the pipeline and is the
source of `schemas/trace.schema.json`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, Field

from ragtriage.index.types import ScoredChunk
from ragtriage.wording import plural

#: Route names in the order the pipeline runs them. `dense_sub_1`, `dense_sub_2`, … are per sub-query.
ROUTE_BM25_RAW = "bm25_raw"
ROUTE_DENSE_RAW = "dense_raw"
ROUTE_BM25_REWRITTEN = "bm25_rewritten"
ROUTE_DENSE_REWRITTEN = "dense_rewritten"
ROUTE_DENSE_SUB_PREFIX = "dense_sub_"


class RouteResult(BaseModel):
    """One recall call: which retriever, on which query text, and its ranked hits."""

    name: str
    """e.g. `bm25_raw`, `dense_rewritten`, `dense_sub_1`."""
    kind: Literal["bm25", "dense"]
    query: str
    hits: list[ScoredChunk] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)
    """e.g. `query-tokenizes-to-nothing`, `skipped: same text as raw`."""
    ms: float = 0.0
    engine: str | None = None
    """The `[engines.NAME]` production engine this route searched (None: the local index)."""


class RewriteResult(BaseModel):
    """What the rewrite stage produced. The raw query is always kept."""

    raw_query: str
    normalized_query: str
    rewritten_query: str
    """The text the `*_rewritten` routes search with (normalized + aliases/keywords)."""
    keywords: list[str] = Field(default_factory=list)
    aliases: dict[str, list[str]] = Field(default_factory=dict)
    """Query term → synonyms added from the alias dictionary (or the LLM)."""
    sub_queries: list[str] = Field(default_factory=list)
    mode: Literal["off", "rules", "llm", "logged", "stage"] = "rules"
    """`stage`: the team's own rewrite stage (`[stages.rewrite]`) wrote it."""
    fallback_reason: str | None = None
    """Set when the LLM rewrite failed (timeout, bad JSON) and the rules were used instead."""


class RerankPair(BaseModel):
    """One candidate as the reranker scored it: cross-encoder probability, features, combined score."""

    chunk_id: str
    cross_encoder_score: float | None = None
    """Probability in [0, 1] after sigmoid; None when no cross-encoder ran."""
    features: dict[str, float] = Field(default_factory=dict)
    score: float
    truncated: bool = False


class StageRank(BaseModel):
    """A chunk's rank (from 1) and score at one route or stage; None where it did not appear."""

    rank: int | None = None
    score: float | None = None


class Candidate(BaseModel):
    """One chunk of the candidate pool with its rank and score at every route and stage."""

    chunk_id: str
    doc_id: str | None = None
    title: str | None = None
    anchor: str | None = None
    heading_path: list[str] = Field(default_factory=list)
    routes: dict[str, StageRank] = Field(default_factory=dict)
    fused: StageRank = Field(default_factory=StageRank)
    reranked: StageRank = Field(default_factory=StageRank)
    final_rank: int | None = None
    is_selected: bool = False
    in_rerank_input: bool = False
    features: dict[str, float] = Field(default_factory=dict)
    truncated: bool = False
    known: bool = True
    """False when the chunk id is not in the KB (a stale index or another KB)."""


class ProfileRef(BaseModel):
    """Which replay profile a trace ran with, and why (`ragtriage.config.profiles`)."""

    name: str
    config_hash: str
    """`Settings.config_hash()` of the profile's settings (the same as the trace's `config_hash`)."""
    source: str
    """Where the profile is defined: a settings file table, a profile file, or `preset`."""
    matched_by: Literal["requested", "exact", "glob", "default"] = "requested"
    """`requested`: named by the caller; `exact`/`glob`: a `[replay.versions]` entry matched the
    request's pipeline_version; `default`: nothing matched (or no version), so the default profile ran."""
    pattern: str | None = None
    """The `[replay.versions]` key that matched."""
    pipeline_version: str | None = None
    """The pipeline_version the replayed request logged."""


class TermSupport(BaseModel):
    """One content term of the query: its KB document frequency, weight, and whether the candidates hold it."""

    term: str
    df: int
    """Chunks of the KB holding the term (title or text), from the BM25 index."""
    weight: float
    """idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))."""
    supported: bool
    """The term occurs in at least one of the first `candidates` candidates."""
    spelled_as: list[str] = Field(default_factory=list)
    """Indexed words a misspelt term (df 0, Latin, 5+ characters) is one edit from; any of them in a
    candidate supports it."""
    oov: bool = False
    """An out-of-vocabulary name: a word in Latin letters or digits inside a CJK query that no chunk of
    the KB holds, nor a word one edit away (`pipeline.lexical_support.oov_names`)."""


class LexicalSupport(BaseModel):
    """The lexical support of one run: the score, its terms, and what it was judged on."""

    score: float | None = None
    """IDF-weighted share of content terms the candidates contain, in [0, 1], or 0 when the query
    names something the KB never contains (`oov_names`); None: n/a (see `note`)."""
    term_share: float | None = None
    """The IDF-weighted share alone, before an out-of-vocabulary name sets the score to 0."""
    terms: list[TermSupport] = Field(default_factory=list)
    candidates: int = 0
    """Candidates whose text was read (the first `[rerank] top_n` after rerank that the KB holds)."""
    indexed_chunks: int | None = None
    """N: chunks in the BM25 index the document frequencies come from."""
    note: str | None = None
    """Why the score is n/a, in plain words."""
    dense_gap: float | None = None
    """The best dense route's first cosine minus its tenth, recorded whether or not `[rerank]
    refusal_dense_gap` is set (None: no dense route of ten hits, or the score is n/a)."""
    dense_gap_threshold: float | None = None
    """`[rerank] refusal_dense_gap` when it was applied."""
    markup: list[str] = Field(default_factory=list)
    """Query words read as markup that no chunk holds (`<br>`, `&nbsp;`, the `yaml` of `config.yaml`;
    `pipeline.lexical_support.markup_words`): left out of the terms, so neither names nor missing content."""
    ordinary_words: list[str] = Field(default_factory=list)
    """Ordinary English words of a pasted message that no chunk holds (`unexpected`, `refused`:
    wordfreq Zipf ≥ 3, in a run of Latin words of a CJK query; `pipeline.lexical_support.ordinary_words`): left out
    of the terms, so neither names nor missing content."""

    def dense_stands_out(self) -> bool:
        """Whether the dense route's first hit stood out (gap ≥ threshold), so the share was set aside."""
        return self.dense_gap_threshold is not None and (
            self.dense_gap is None or self.dense_gap >= self.dense_gap_threshold
        )

    def oov_names(self) -> list[str]:
        """The query's out-of-vocabulary names (words the KB never contains), in query order."""
        return [t.term for t in self.terms if t.oov]

    def unsupported(self) -> list[TermSupport]:
        """The terms no candidate contains, heaviest first."""
        return sorted((t for t in self.terms if not t.supported), key=lambda t: -t.weight)

    def explain(self) -> str:
        """One plain sentence: which query terms the candidates lack (or why there is no score), and
        the markup and ordinary English words left out of the terms."""
        said = self._explain_terms()
        if self.markup:
            said += f"; markup left out: {', '.join(self.markup)}"
        if self.ordinary_words:
            said += (
                f"; ordinary English words left out (in no chunk; common English in a run of Latin "
                f"words, so no name): {', '.join(self.ordinary_words)}"
            )
        return said

    def _explain_terms(self) -> str:
        if self.score is None:
            return f"lexical support n/a: {self.note or 'not computed'}"
        found = [
            t.term + (f" (as {'/'.join(t.spelled_as)})" if t.spelled_as else "")
            for t in self.terms
            if t.supported
        ]
        missing = [t for t in self.unsupported() if not t.oov]
        names = self.oov_names()
        if names:
            # The veto comes first: it alone decides the score, the share is context.
            head = (
                f"lexical support 0: the KB never mentions {', '.join(names)} (no chunk holds "
                f"{'it' if len(names) == 1 else 'them'})"
            )
            if self.term_share is not None:
                head += f"; term share {self.term_share:.3f} over the top {self.candidates} candidates"
        elif self.dense_stands_out() and self.term_share is not None:
            why = (
                f"the dense route's first hit stands out (first − tenth cosine {self.dense_gap:.4f} ≥ "
                f"{self.dense_gap_threshold:g})"
                if self.dense_gap is not None
                else "no dense route of 10 hits to confirm it"
            )
            head = f"lexical support 1: term share {self.term_share:.3f} set aside, {why}"
            if not missing:
                return head
        else:
            head = f"lexical support {self.score:.3f} over the top {self.candidates} candidates"
            if self.dense_gap is not None and self.dense_gap_threshold is not None:
                head += f", dense route flat (first − tenth cosine {self.dense_gap:.4f})"
            if not missing:
                return f"{head}: they contain every query term ({', '.join(found)})"
        where = ", ".join(
            f"{t.term} (in no chunk of the KB)"
            if t.df == 0
            else f"{t.term} (in {plural(t.df, 'chunk')} of the KB, none of these)"
            for t in missing
        )
        parts = (
            [head]
            + ([f"not found: {where}"] if where else [])
            + ([f"found: {', '.join(found)}"] if found else [])
        )
        return "; ".join(parts) if names else f"{head}: " + "; ".join(parts[1:])


class Trace(BaseModel):
    """The full record of one pipeline run (or of a logged request, with fewer fields)."""

    trace_version: int = 1
    query: str
    rewrite: RewriteResult
    routes: list[RouteResult] = Field(default_factory=list)
    fused: list[ScoredChunk] = Field(default_factory=list)
    rerank_input: list[str] = Field(default_factory=list)
    """Chunk ids handed to the reranker (the top of the fused list)."""
    reranked: list[ScoredChunk] = Field(default_factory=list)
    rerank_mode: str = "features-only"
    """`features-only`, or the cross-encoder backend and model, e.g. `cross-encoder:BAAI/bge-reranker-base`."""
    rerank_pairs: list[RerankPair] = Field(default_factory=list)
    truncated_pairs: int = 0
    final: list[str] = Field(default_factory=list)
    not_logged: list[str] = Field(default_factory=list)
    """Stages a logged request did not record at all (`routes`, `fused`, `reranked`, `final`), as
    opposed to recording them empty: a pipeline without a reranker logs no final context, so its
    `final` is [] here without meaning a refusal. Always [] for a replay."""
    refused: bool = False
    refusal_reason: str | None = None
    refusal_score_kind: str | None = None
    """The score refusal judged by: `cross_encoder`, `dense_cosine`, `fused`, `final` or `lexical_support`
    (None: no rerank stage)."""
    refusal_score: float | None = None
    """Its value in this run (compared with `[rerank] refusal_threshold`)."""
    lexical_support: LexicalSupport | None = None
    """How much of the query the final candidates contain (`pipeline.lexical_support`; None: no rerank stage)."""
    candidates: list[Candidate] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    """Per stage: normalize, rewrite, embed, bm25, dense, fusion, rerank, total."""
    flags: list[str] = Field(default_factory=list)
    config_hash: str | None = None
    kb_version: int | None = None
    embedder: str | None = None
    gold: list[str] = Field(default_factory=list)
    """Gold chunk ids the caller marked (for display; the pipeline never uses them)."""
    run_options: RunOptions | None = None
    """The one-off changes this run used (None: the settings as they are)."""
    citations: list[str] | None = None
    """Chunk ids the logged answer cited (logged requests only; None: not logged)."""
    profile: ProfileRef | None = None
    """The replay profile this run used (None: a logged request, or a pipeline built without one)."""

    def route(self, name: str) -> RouteResult | None:
        """The route called `name`, or None."""
        return next((r for r in self.routes if r.name == name), None)

    def candidate(self, chunk_id: str) -> Candidate | None:
        """The candidate with this chunk id, or None."""
        return next((c for c in self.candidates if c.chunk_id == chunk_id), None)

    def refusal_support(self) -> LexicalSupport | None:
        """The lexical support to show a triager: when the request was refused, or when lexical support
        is the refusal score (it says which query words the final candidates lack); else None."""
        if self.lexical_support is not None and (
            self.refused or self.refusal_score_kind == "lexical_support"
        ):
            return self.lexical_support
        return None


class RunOptions(BaseModel):
    """One-off changes to a pipeline run: counterfactual replays, ablations, logged-rewrite replays.

    Defaults change nothing; every field overrides one setting for this run only.
    """

    rewrite_mode: Literal["default", "off", "rules", "llm"] = "default"
    """`off`: the rewritten routes search the normalized raw query and no sub-queries run."""
    rewrite_override: RewriteResult | None = None
    """Use this rewrite instead of computing one (replay with the logged rewrite)."""
    extra_aliases: dict[str, list[str]] = Field(default_factory=dict)
    """Aliases added on top of the dictionary for this run (the alias counterfactual)."""
    routes: list[str] | None = None
    """Restrict to these route names (`dense_sub` stands for every sub-query route)."""
    bm25_k: int | None = None
    dense_k: int | None = None
    candidate_pool: int | None = None
    rerank: Literal["default", "off"] = "default"
    """`off`: the final list is the fused order (no cross-encoder, no features)."""
    top_n: int | None = None
    as_of: datetime | None = None
    """Evaluate time-dependent features (rerank freshness) at this moment instead of now: a replay
    of a logged request passes the request's time, as production scored it then (a profile's
    `[rerank] freshness_now` still wins: it says production's clock was fixed)."""


# ---------------------------------------------------------------- stage interfaces


@runtime_checkable
class Retriever(Protocol):
    """One recall backend (BM25 or dense). Returns at most k hits, ranks from 1."""

    kind: Literal["bm25", "dense"]

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        """Hits and flags (e.g. `query-tokenizes-to-nothing`)."""
        ...


@runtime_checkable
class VectorRetriever(Protocol):
    """A retriever that can also search with a query vector (so the pipeline embeds in batches)."""

    def search_vector(self, vector: np.ndarray, k: int) -> list[ScoredChunk]: ...


class Rewriter(Protocol):
    """Turns a normalized query into a `RewriteResult` (the raw query is kept by the caller)."""

    def rewrite(
        self,
        raw_query: str,
        normalized_query: str,
        *,
        extra_aliases: Mapping[str, Sequence[str]] | None = None,
    ) -> RewriteResult: ...


@runtime_checkable
class CrossEncoderScorer(Protocol):
    """Scores (query, passage) pairs; returns probabilities in [0, 1] and per-pair truncation."""

    name: str

    def score(self, query: str, passages: Sequence[str]) -> tuple[list[float], list[bool]]: ...
