"""The retrieval pipeline: normalize → rewrite → multi-route recall → fusion → rerank → final/refusal.

Every stage is recorded in a `Trace`. Backends come in through small interfaces (a BM25
`Retriever`, an `Embedder`, a dense `search_vector` callable, a `Reranker`, and per-route
production engines that are `Retriever`s too), so `factory.py` is the only module that knows which
implementations run. The settings (one replay profile's) choose routes, k, fusion and rerank.
Route planning (which routes run, with which text, engine and k; `dense_sub` in a setting stands
for every sub-query route) and the trace's candidate pool (every chunk any route returned, at every
stage) are built here too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np

from ragtriage.config.settings import RetrievalSettings, Settings
from ragtriage.errors import RagtriageError
from ragtriage.index.analyzer import normalize_text as analyzed
from ragtriage.index.analyzer import query_terms
from ragtriage.index.types import Embedder, ScoredChunk
from ragtriage.pipeline import refusal as refusal_rules
from ragtriage.pipeline.chunk_lookup import ChunkLookup
from ragtriage.pipeline.fusion import fuse
from ragtriage.pipeline.lexical_support import candidates_support, dense_gap, with_dense_gap
from ragtriage.pipeline.normalize import normalize_query, normalize_text
from ragtriage.pipeline.rerank import Reranker, RerankItem, RerankOutcome, route_scores
from ragtriage.pipeline.rewrite import RuleRewriter, extract_keywords, off_rewrite
from ragtriage.pipeline.stage_loading import TeamRoute, TeamStage
from ragtriage.pipeline.stages import Passage
from ragtriage.pipeline.types import (
    ROUTE_BM25_RAW,
    ROUTE_BM25_REWRITTEN,
    ROUTE_DENSE_RAW,
    ROUTE_DENSE_REWRITTEN,
    ROUTE_DENSE_SUB_PREFIX,
    Candidate,
    LexicalSupport,
    ProfileRef,
    Retriever,
    Rewriter,
    RewriteResult,
    RouteResult,
    RunOptions,
    StageRank,
    Trace,
    VectorRetriever,
)

SKIPPED_SAME_AS_RAW = "skipped: same text as raw"
SKIPPED_NO_INDEX = "skipped: no index"
Engines = Mapping[str, tuple[str, Retriever]]


@dataclass
class PlannedRoute:
    """One recall route of a query before it runs: its text, engine, and why it is skipped (if it is)."""

    name: str
    kind: Literal["bm25", "dense"]
    query: str
    skip_flag: str | None = None
    vector_row: int | None = None
    engine: str | None = None
    """Name of the production engine this route searches (None: the local index)."""


DenseSearch = Callable[[np.ndarray, int], list[ScoredChunk]]
_Value = TypeVar("_Value")
#: A team's whole pipeline run in process (`ragtriage.replay.framework`): query, run options → its trace.
WholeRun = Callable[[str, RunOptions], Trace]
StopCheck = Callable[[], bool]


class RunCancelled(RagtriageError):
    """`should_stop()` returned True between two stages; the partial run is discarded."""

    title = "cancelled"


@dataclass
class _Prepared:
    """One query after normalize and rewrite, with its routes planned and dense texts listed."""

    raw_query: str
    options: RunOptions
    gold: list[str]
    rewrite: RewriteResult
    routes: list[PlannedRoute]
    timings: dict[str, float] = field(default_factory=dict)
    started: float = 0.0


@dataclass
class _Ranked:
    """The rerank stage's result for one query: the final context and, when it ran, how it refused."""

    final: list[str]
    rerank_input: list[str] = field(default_factory=list)
    outcome: RerankOutcome | None = None
    refusal: str | None = None
    refusal_kind: str | None = None
    refusal_value: float | None = None
    support: LexicalSupport | None = None
    not_judged: str | None = None


class Pipeline:
    """Runs queries through every stage and returns one `Trace` per query."""

    def __init__(
        self,
        settings: Settings,
        *,
        rules: RuleRewriter,
        reranker: Reranker,
        chunks: ChunkLookup,
        bm25: Retriever | None = None,
        embedder: Embedder | None = None,
        dense_search: DenseSearch | None = None,
        llm_rewriter: Rewriter | None = None,
        kb_version: Callable[[], int | None] | None = None,
        on_close: Callable[[], None] | None = None,
        indexes: Any = None,
        engines: dict[str, tuple[str, Retriever]] | None = None,
        profile: ProfileRef | None = None,
        stages: Mapping[str, TeamStage] | None = None,
        whole: WholeRun | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.settings = settings
        self.rules = rules
        self.reranker = reranker
        self.chunks = chunks
        self.bm25 = bm25
        self.embedder = embedder
        self.dense_search = dense_search
        self.llm_rewriter = llm_rewriter
        self._kb_version = kb_version
        self._on_close = on_close
        self.indexes = indexes
        """The opened `Indexes` this pipeline searches (None in unit tests); diagnosis reads them too."""
        self.engines = dict(engines or {})
        """Route name (`dense_sub` for every sub-query route) → (engine name, retriever)."""
        self.profile = profile
        """The replay profile these settings come from; every trace records it."""
        self.stages = dict(stages or {})
        """The team's own rewrite, fusion, rerank and select stages (`[stages]`); its routes are in `engines`."""
        self.whole = whole
        """The team's whole pipeline (`[stages.pipeline]`): when set, it runs instead of every stage."""
        self._clock = clock

    # ------------------------------------------------------------------ public API

    def run(
        self,
        query: str,
        *,
        options: RunOptions | None = None,
        gold: Sequence[str] = (),
        should_stop: StopCheck | None = None,
    ) -> Trace:
        """Run one query. Raises `InputError` for an empty query, `RunCancelled` when stopped."""
        return self._run_batch([query], [options or RunOptions()], [list(gold)], should_stop)[0]

    def run_many(
        self,
        queries: Sequence[str],
        *,
        options: RunOptions | Sequence[RunOptions] | None = None,
        golds: Sequence[Sequence[str]] | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        should_stop: StopCheck | None = None,
        batch_size: int = 64,
    ) -> list[Trace]:
        """Run many queries; query embeddings are computed in one call per batch of `batch_size` queries.

        `options` is one `RunOptions` for all, or one per query (e.g. each logged request's time).
        Stops before the next batch when `should_stop()` is true and returns the traces finished so far.
        """
        gold_lists = [list(g) for g in golds] if golds is not None else [[] for _ in queries]
        if len(gold_lists) != len(queries):
            raise ValueError(f"{len(queries)} queries but {len(gold_lists)} gold lists")
        if options is None or isinstance(options, RunOptions):
            option_list = [options or RunOptions()] * len(queries)
        else:
            option_list = list(options)
            if len(option_list) != len(queries):
                raise ValueError(f"{len(queries)} queries but {len(option_list)} run options")
        traces: list[Trace] = []
        for start in range(0, len(queries), batch_size):
            if should_stop is not None and should_stop():
                break
            batch = list(queries[start : start + batch_size])
            try:
                traces.extend(
                    self._run_batch(
                        batch,
                        option_list[start : start + batch_size],
                        gold_lists[start : start + batch_size],
                        should_stop,
                    )
                )
            except RunCancelled:
                break
            if on_progress is not None:
                on_progress(len(traces), len(queries))
        return traces

    def warm_up(self) -> None:
        """Load what the first query would otherwise pay for (jieba's dictionary, the embedding
        model, the chunk metadata), so the first trace's timings are representative."""
        self.rules.tokenize("预热 warm up")
        if self.embedder is not None:
            self.embedder.embed_queries(["预热"])
        self.chunks.refresh()

    def close(self) -> None:
        """Release the indexes (Qdrant local mode locks its folder) and the engines' connections."""
        for _, engine in self.engines.values():
            close = getattr(engine, "close", None)
            if callable(close):
                close()
        self.engines = {}
        if self._on_close is not None:
            self._on_close()
            self._on_close = None

    # ------------------------------------------------------------------ stages

    def _run_batch(
        self,
        queries: list[str],
        options: list[RunOptions],
        golds: list[list[str]],
        should_stop: StopCheck | None,
    ) -> list[Trace]:
        def checkpoint() -> None:
            if should_stop is not None and should_stop():
                raise RunCancelled("stopped by the caller")

        self.chunks.refresh()
        if self.whole is not None:
            traces = []
            for query, option, gold in zip(queries, options, golds, strict=True):
                checkpoint()
                traces.append(self._whole_trace(self.whole, query, option, gold))
            return traces
        prepared = [self._prepare(q, o, g) for q, o, g in zip(queries, options, golds, strict=True)]
        checkpoint()
        vectors, embed_ms = self._embed(prepared)
        checkpoint()
        total_texts = sum(1 for p in prepared for r in p.routes if r.vector_row is not None)
        traces = []
        for item in prepared:
            own_texts = sum(1 for r in item.routes if r.vector_row is not None)
            # A batched embedding call is shared; each trace carries its share of the time.
            item.timings["embed"] = embed_ms * own_texts / total_texts if total_texts else 0.0
            traces.append(self._finish(item, vectors, checkpoint))
        return traces

    def _whole_trace(self, whole: WholeRun, query: str, options: RunOptions, gold: list[str]) -> Trace:
        """The trace of the team's whole pipeline, with the candidate pool and what this run was."""
        started = self._clock()
        trace = whole(query, options)
        outcome = RerankOutcome(list(trace.reranked), [], trace.rerank_mode) if trace.reranked else None
        trace.candidates = build_candidates(
            trace.routes, trace.fused, trace.rerank_input, outcome, trace.final, self.chunks
        )
        trace.timings_ms["total"] = (self._clock() - started) * 1000
        trace.config_hash = self.settings.config_hash()
        trace.kb_version = self._kb_version() if self._kb_version else None
        trace.gold = gold
        trace.run_options = options if options != RunOptions() else None
        trace.profile = self.profile
        return trace

    def _prepare(self, raw_query: str, options: RunOptions, gold: list[str]) -> _Prepared:
        started = self._clock()
        normalized = normalize_query(raw_query)
        timings = {"normalize": (self._clock() - started) * 1000}
        tick = self._clock()
        rewrite = self._rewrite(raw_query, normalized, options)
        timings["rewrite"] = (self._clock() - tick) * 1000
        return _Prepared(
            raw_query, options, gold, rewrite, self._plan_routes(rewrite, options), timings, started
        )

    def _rewrite(self, raw_query: str, normalized: str, options: RunOptions) -> RewriteResult:
        if options.rewrite_override is not None:
            override = options.rewrite_override
            return override.model_copy(update={"mode": "logged", "raw_query": raw_query})
        team = self.stages.get("rewrite")
        if team is not None and options.rewrite_mode != "off":
            return self._team_rewrite(team, raw_query, normalized, options)
        mode = options.rewrite_mode
        if mode == "default":
            rewrite_settings = self.settings.rewrite
            mode = "llm" if rewrite_settings.llm.enabled else ("rules" if rewrite_settings.enabled else "off")
        if mode == "off":
            return off_rewrite(raw_query, normalized)
        if mode == "llm":
            if self.llm_rewriter is None:
                return self.rules.rewrite(
                    raw_query, normalized, extra_aliases=options.extra_aliases
                ).model_copy(
                    update={
                        "fallback_reason": "LLM rewrite not configured ([rewrite.llm] url); used the rules"
                    }
                )
            return self.llm_rewriter.rewrite(raw_query, normalized, extra_aliases=options.extra_aliases)
        return self.rules.rewrite(raw_query, normalized, extra_aliases=options.extra_aliases)

    def _team_rewrite(
        self, team: TeamStage, raw_query: str, normalized: str, options: RunOptions
    ) -> RewriteResult:
        """The team's rewrite of the raw query; a one-off change it cannot take is said, not replaced."""
        if options.rewrite_mode != "default":
            raise team.cannot_take(
                f"the {options.rewrite_mode} rewrite",
                "the built-in rewrite is not production's; compare with rewrite off instead",
            )
        if options.extra_aliases and not team.accepts("aliases"):
            raise team.cannot_take(
                "extra aliases",
                "give the function an `aliases` keyword (term → synonyms) to run the alias counterfactual",
            )
        extra = (
            {"aliases": {t: list(s) for t, s in options.extra_aliases.items()}}
            if options.extra_aliases
            else {}
        )
        answer = team.rewrite(team(raw_query, **extra))
        return RewriteResult(
            raw_query=raw_query,
            normalized_query=normalized,
            rewritten_query=answer.query,
            sub_queries=list(answer.sub_queries),
            mode="stage",
        )

    def _plan_routes(self, rewrite: RewriteResult, options: RunOptions) -> list[PlannedRoute]:
        enabled = set(options.routes if options.routes is not None else self.settings.retrieval.routes)
        local = {"bm25": self.bm25 is not None, "dense": self.dense_search is not None}
        return plan_routes(rewrite, enabled, self.engines, local)

    def _embed(self, prepared: list[_Prepared]) -> tuple[np.ndarray | None, float]:
        texts: list[str] = []
        row_of: dict[str, int] = {}
        for item in prepared:
            for route in item.routes:
                if needs_vector(self.engines, route) and route.skip_flag is None:
                    # Identical texts (the same query twice in a batch) are embedded once.
                    route.vector_row = row_of.setdefault(route.query, len(texts))
                    if route.vector_row == len(texts):
                        texts.append(route.query)
        if not texts or self.embedder is None:
            return None, 0.0
        tick = self._clock()
        vectors = np.asarray(self.embedder.embed_queries(texts))
        return vectors, (self._clock() - tick) * 1000

    def _finish(self, item: _Prepared, vectors: np.ndarray | None, checkpoint: Callable[[], None]) -> Trace:
        options = item.options
        routes = self._recall(item, vectors)
        checkpoint()
        tick = self._clock()
        fused = self._fuse(routes, options.candidate_pool)
        item.timings["fusion"] = (self._clock() - tick) * 1000
        checkpoint()
        tick = self._clock()
        top_n = options.top_n or self.settings.rerank.top_n
        if (options.rerank == "off" or not self.settings.rerank.enabled) and "select" in self.stages:
            ranked = self._team_select(self.stages["select"], item, fused, top_n)
        elif options.rerank == "off" or not self.settings.rerank.enabled:
            ranked = _Ranked(final=[c.chunk_id for c in fused[:top_n]])
        else:
            ranked = self._rerank(item, routes, fused, top_n)
        item.timings["rerank"] = (self._clock() - tick) * 1000
        item.timings["total"] = (self._clock() - item.started) * 1000

        outcome = ranked.outcome
        candidates = build_candidates(routes, fused, ranked.rerank_input, outcome, ranked.final, self.chunks)
        flags = [f"{r.name}: {f}" for r in routes for f in r.flags if not f.startswith("skipped")]
        flags.extend(outcome.notes if outcome else [])
        if outcome is not None and ranked.not_judged:
            flags.append(ranked.not_judged)
        unknown = sum(1 for c in candidates if not c.known)
        if unknown:
            noun = "chunk is" if unknown == 1 else "chunks are"
            flags.append(f"{unknown} candidate {noun} not in the KB (stale index or another KB)")
        return Trace(
            query=item.raw_query,
            rewrite=item.rewrite,
            routes=routes,
            fused=fused,
            rerank_input=ranked.rerank_input,
            reranked=outcome.reranked if outcome else [],
            rerank_mode=outcome.mode if outcome else "off",
            rerank_pairs=outcome.pairs if outcome else [],
            truncated_pairs=outcome.truncated_pairs if outcome else 0,
            final=ranked.final,
            refused=ranked.refusal is not None,
            refusal_reason=ranked.refusal,
            refusal_score_kind=ranked.refusal_kind,
            refusal_score=ranked.refusal_value,
            lexical_support=ranked.support,
            candidates=candidates,
            timings_ms=item.timings,
            flags=flags,
            config_hash=self.settings.config_hash(),
            kb_version=self._kb_version() if self._kb_version else None,
            embedder=self.embedder.name if self.embedder is not None else None,
            gold=item.gold,
            run_options=options if options != RunOptions() else None,
            profile=self.profile,
        )

    def _recall(self, item: _Prepared, vectors: np.ndarray | None) -> list[RouteResult]:
        """Every planned route's hits (a skipped route keeps its flag and no hits)."""
        routes: list[RouteResult] = []
        stage_ms = {"bm25": 0.0, "dense": 0.0}
        for planned in item.routes:
            result = RouteResult(
                name=planned.name, kind=planned.kind, query=planned.query, engine=planned.engine
            )
            if planned.skip_flag is not None:
                result.flags.append(planned.skip_flag)
            else:
                tick = self._clock()
                k = route_k(self.settings.retrieval, planned, item.options)
                team = engine_for(self.engines, planned.name)
                if team is not None and isinstance(team[1], TeamRoute):
                    # A team's route gets the text production's route got, not the normalised one.
                    result.query = team_route_text(item.rewrite, planned)
                    result.hits, result.flags = team[1].search(result.query, k)
                else:
                    result.hits, result.flags = self._search(planned, vectors, k)
                result.ms = (self._clock() - tick) * 1000
                stage_ms[planned.kind] += result.ms
            routes.append(result)
        item.timings.update(stage_ms)
        return routes

    def _rerank(
        self, item: _Prepared, routes: list[RouteResult], fused: list[ScoredChunk], top_n: int
    ) -> _Ranked:
        """Rerank the candidate pool, then judge refusal (the final context is empty when it refuses)."""
        rerank = self.settings.rerank
        pool = fused[: item.options.candidate_pool or self.settings.retrieval.candidate_pool]
        items = rerank_items(pool, routes, self.chunks)
        team = self.stages.get("rerank")
        if team is not None:
            outcome = RerankOutcome(
                reranked=team.hits(team(stage_query(item.rewrite), self._passages(items, routes))),
                pairs=[],
                mode=f"stage:{team.use}",
            )
        else:
            outcome = self.reranker.rerank(
                item.rewrite.normalized_query, self._keywords(item.rewrite), items, now=item.options.as_of
            )
        select = self.stages.get("select")
        if select is not None:
            return self._team_select(select, item, outcome.reranked, top_n, pool, outcome)
        support = with_dense_gap(
            candidates_support(item.raw_query, outcome.reranked[:top_n], self.chunks, self.bm25),
            dense_gap(routes),
            rerank.refusal_dense_gap,
        )
        scores = refusal_rules.refusal_scores(routes, fused, outcome.reranked, outcome.pairs, support)
        kind, value = refusal_rules.chosen_score(scores, rerank.refusal_score)
        # A threshold calibrated for another score kind is on another scale: not judged, said.
        threshold, not_judged = refusal_rules.judged_threshold(
            rerank.refusal_threshold, rerank.refusal_threshold_score, kind
        )
        refusal = refusal_rules.refusal_reason(threshold, kind, value, len(outcome.reranked), support)
        return _Ranked(
            final=[] if refusal else self.reranker.final(outcome.reranked, top_n),
            rerank_input=[c.chunk_id for c in pool],
            outcome=outcome,
            refusal=refusal,
            refusal_kind=kind,
            refusal_value=value,
            support=support,
            not_judged=not_judged or refusal_rules.not_judged_note(threshold, kind, support),
        )

    def _passages(self, items: Sequence[RerankItem], routes: Sequence[RouteResult]) -> list[Passage]:
        """The rerank stage's input: each pool chunk with its text, fused score and raw route scores."""
        raw: dict[str, dict[str, float]] = {}
        for route in routes:
            for hit in route.hits:
                raw.setdefault(hit.chunk_id, {})[route.name] = hit.score
        passages = []
        for entry in items:
            meta = self.chunks.get(entry.chunk_id)
            known = {
                "doc_id": meta.doc_id if meta else None,
                "updated_at": entry.updated_at,
                "product_line": entry.product_line,
            }
            passages.append(
                Passage(
                    chunk_id=entry.chunk_id,
                    text=entry.content,
                    title=entry.title,
                    fused_score=entry.rrf_score,
                    route_scores=raw.get(entry.chunk_id, {}),
                    metadata={k: v for k, v in known.items() if v is not None},
                )
            )
        return passages

    def _team_select(
        self,
        team: TeamStage,
        item: _Prepared,
        ranked: Sequence[ScoredChunk],
        top_n: int,
        pool: Sequence[ScoredChunk] = (),
        outcome: RerankOutcome | None = None,
    ) -> _Ranked:
        """The final context (and refusal) as the team's select stage chose it."""
        hits = [(c.chunk_id, c.score) for c in ranked]
        chosen = team.selection(team(stage_query(item.rewrite), hits, top_n))
        refusal = f"the team's select stage refused: {chosen.reason or 'no reason given'}"
        return _Ranked(
            final=[] if chosen.refused else [str(c) for c in chosen.final],
            rerank_input=[c.chunk_id for c in pool],
            outcome=outcome,
            refusal=refusal if chosen.refused else None,
            refusal_kind="stage" if chosen.refused else None,
        )

    def _search(
        self, planned: PlannedRoute, vectors: np.ndarray | None, k: int
    ) -> tuple[list[ScoredChunk], list[str]]:
        """One route's top `k` hits and flags: from its production engine (by vector when it is a
        vector engine and the query was embedded), else the local BM25 index or dense search."""
        vector = (
            vectors[planned.vector_row] if vectors is not None and planned.vector_row is not None else None
        )
        engine = engine_for(self.engines, planned.name)
        if engine is not None:
            if isinstance(engine[1], VectorRetriever) and vector is not None:
                return list(engine[1].search_vector(vector, k)), []
            hits, flags = engine[1].search(planned.query, k)
            return list(hits), list(flags)
        if planned.kind == "bm25" and self.bm25 is not None:
            hits, flags = self.bm25.search(planned.query, k)
            return list(hits), list(flags)
        if vector is not None and self.dense_search is not None:
            return list(self.dense_search(vector, k)), []
        return [], []

    def _fuse(self, routes: Sequence[RouteResult], pool: int | None = None) -> list[ScoredChunk]:
        """The fused list by `[retrieval.fusion] method`, cut at `[retrieval.fusion] keep` (a one-off
        larger candidate `pool`, the larger-k counterfactual, widens that cut to the pool), or by
        the team's fusion stage (routes without hits take no part)."""
        team = self.stages.get("fusion")
        if team is not None:
            lists = {r.name: [(h.chunk_id, h.score) for h in r.hits] for r in routes if r.hits}
            return team.hits(team(lists))
        retrieval = self.settings.retrieval
        fusion = retrieval.fusion
        return fuse(
            fusion.method,
            {r.name: [(h.chunk_id, h.score) for h in r.hits] for r in routes if r.hits},
            rrf_k=retrieval.rrf_k,
            weights=fusion_weights(fusion.weights, routes),
            normalization=(
                fusion.normalization
                if isinstance(fusion.normalization, str)
                else fusion_weights(fusion.normalization, routes)
            ),
            missing=fusion.missing,
            top_n=max(fusion.keep, pool or 0) if fusion.keep is not None else None,
        )

    def _keywords(self, rewrite: RewriteResult) -> list[str]:
        """The query words `title_hit` looks for: the rewrite's keywords, or with `[rerank]
        title_match = "tokens"` the terms the BM25 route searches for the (rewritten) query."""
        if self.settings.rerank.title_match == "tokens":
            index = self.settings.index
            return query_terms(
                normalize_text(rewrite.rewritten_query) or rewrite.normalized_query,
                segmentation=index.query_segmentation,
                stop_words=frozenset(analyzed(w) for w in index.query_stop_words),
            )
        return rewrite.keywords or extract_keywords(rewrite.normalized_query, self.rules.tokenize)


# ---------------------------------------------------------------- route planning


def _setting_key(route_name: str) -> str:
    return "dense_sub" if route_name.startswith(ROUTE_DENSE_SUB_PREFIX) else route_name


def engine_for(engines: Engines, route_name: str) -> tuple[str, Retriever] | None:
    """(engine name, retriever) of a route that searches a production engine, else None."""
    return engines.get(_setting_key(route_name))


def needs_vector(engines: Engines, route: PlannedRoute) -> bool:
    """True when the route searches with a query vector (local dense, or a vector engine)."""
    engine = engine_for(engines, route.name)
    if engine is not None:
        return isinstance(engine[1], VectorRetriever)
    return route.kind == "dense"


def route_k(retrieval: RetrievalSettings, route: PlannedRoute, options: RunOptions) -> int:
    """Per-route k: a one-off option wins, then `[retrieval] route_k`, then bm25_k / dense_k."""
    override = options.bm25_k if route.kind == "bm25" else options.dense_k
    return override or retrieval.hits(route.name)


def plan_routes(
    rewrite: RewriteResult, enabled: Collection[str], engines: Engines, local: Mapping[str, bool]
) -> list[PlannedRoute]:
    """The enabled routes in run order, each with its query text, engine and skip flag.

    `local` says whether the local index of a kind (`bm25`, `dense`) is open.
    """
    raw_text = rewrite.normalized_query
    rewritten = normalize_text(rewrite.rewritten_query) or raw_text

    def same_as(raw_route: str) -> str | None:
        # Skip a rewritten route only when the raw route of its kind runs too (ablation D runs
        # the rewritten routes alone, and then they must search even an unchanged query).
        return SKIPPED_SAME_AS_RAW if rewritten == raw_text and raw_route in enabled else None

    planned = [
        PlannedRoute(ROUTE_BM25_RAW, "bm25", raw_text),
        PlannedRoute(ROUTE_DENSE_RAW, "dense", raw_text),
        PlannedRoute(ROUTE_BM25_REWRITTEN, "bm25", rewritten, same_as(ROUTE_BM25_RAW)),
        PlannedRoute(ROUTE_DENSE_REWRITTEN, "dense", rewritten, same_as(ROUTE_DENSE_RAW)),
    ]
    if rewrite.mode != "off":
        for number, sub_query in enumerate(rewrite.sub_queries, start=1):
            text = normalize_text(sub_query)
            flag = SKIPPED_SAME_AS_RAW if text in (raw_text, "") else None
            planned.append(PlannedRoute(f"{ROUTE_DENSE_SUB_PREFIX}{number}", "dense", text, flag))
    routes = [
        r
        for r in planned
        if r.name in enabled or (_setting_key(r.name) == "dense_sub" and "dense_sub" in enabled)
    ]
    for route in routes:
        engine = engine_for(engines, route.name)
        route.engine = engine[0] if engine is not None else None
        if route.skip_flag is None and engine is None and not local.get(route.kind, False):
            route.skip_flag = SKIPPED_NO_INDEX
    return routes


def stage_query(rewrite: RewriteResult) -> str:
    """The query a team's rerank or select stage gets: the rewritten one, or the raw one as written
    when nothing rewrote it."""
    return rewrite.raw_query if rewrite.mode == "off" else rewrite.rewritten_query


def team_route_text(rewrite: RewriteResult, route: PlannedRoute) -> str:
    """The text a team's route searches: the raw query, the rewritten query or a sub-query, as written."""
    if route.name.startswith(ROUTE_DENSE_SUB_PREFIX):
        number = int(route.name[len(ROUTE_DENSE_SUB_PREFIX) :])
        return rewrite.sub_queries[number - 1] if number <= len(rewrite.sub_queries) else route.query
    if route.name.endswith("_rewritten"):
        return stage_query(rewrite)
    return rewrite.raw_query


def fusion_weights(weights: Mapping[Any, _Value], routes: Sequence[RouteResult]) -> dict[str, _Value]:
    """`[retrieval.fusion] weights` (or a `normalization` table) per route name: a `dense_sub`
    entry holds for every sub-query route."""
    by_route = {str(route): weight for route, weight in weights.items()}
    for route in routes:
        if route.name.startswith(ROUTE_DENSE_SUB_PREFIX) and "dense_sub" in by_route:
            by_route[route.name] = by_route["dense_sub"]
    return by_route


# ---------------------------------------------------------------- the trace's candidate pool


def rerank_items(
    fused: Sequence[ScoredChunk], routes: Sequence[RouteResult], chunks: ChunkLookup
) -> list[RerankItem]:
    """The reranker's input: each fused chunk with its text, KB metadata and best route scores."""
    contents = chunks.contents([c.chunk_id for c in fused])
    scores = route_scores((r.kind, [(h.chunk_id, h.score) for h in r.hits]) for r in routes)
    items = []
    for chunk in fused:
        meta = chunks.get(chunk.chunk_id)
        items.append(
            RerankItem(
                chunk_id=chunk.chunk_id,
                rrf_score=chunk.score,
                title=meta.title if meta else None,
                content=contents.get(chunk.chunk_id, ""),
                updated_at=meta.updated_at if meta else None,
                product_line=meta.product_line if meta else None,
                bm25_score=scores.get(chunk.chunk_id, {}).get("bm25_score", 0.0),
                dense_score=scores.get(chunk.chunk_id, {}).get("dense_score", 0.0),
            )
        )
    return items


def build_candidates(
    routes: Sequence[RouteResult],
    fused: Sequence[ScoredChunk],
    rerank_input: Sequence[str],
    outcome: RerankOutcome | None,
    final: Sequence[str],
    chunks: ChunkLookup,
) -> list[Candidate]:
    """One `Candidate` per chunk seen in any route, ordered by fused rank, with KB metadata.

    A chunk id the KB does not know (or no longer publishes) is kept with `known = False`: that is
    the signature of a stale index, which triage must see rather than lose.
    """
    order: list[str] = [c.chunk_id for c in fused]
    for route in routes:
        order.extend(h.chunk_id for h in route.hits)
    pool = list(dict.fromkeys(order))
    by_id: dict[str, Candidate] = {}
    for chunk_id in pool:
        meta = chunks.get(chunk_id)
        by_id[chunk_id] = Candidate(
            chunk_id=chunk_id,
            doc_id=meta.doc_id if meta else None,
            title=meta.title if meta else None,
            anchor=meta.anchor if meta else None,
            heading_path=list(meta.heading_path) if meta else [],
            known=meta is not None,
        )
    for route in routes:
        for hit in route.hits:
            # The first occurrence wins if a backend ever returns a chunk twice.
            by_id[hit.chunk_id].routes.setdefault(route.name, StageRank(rank=hit.rank, score=hit.score))
    for chunk in fused:
        by_id[chunk.chunk_id].fused = StageRank(rank=chunk.rank, score=chunk.score)
    for chunk_id in rerank_input:
        by_id[chunk_id].in_rerank_input = True
    if outcome is not None:
        for chunk in outcome.reranked:
            by_id[chunk.chunk_id].reranked = StageRank(rank=chunk.rank, score=chunk.score)
        for pair in outcome.pairs:
            by_id[pair.chunk_id].features = dict(pair.features)
            if pair.cross_encoder_score is not None:
                by_id[pair.chunk_id].features["cross_encoder"] = pair.cross_encoder_score
            by_id[pair.chunk_id].truncated = pair.truncated
    for rank, chunk_id in enumerate(final, start=1):
        by_id[chunk_id].final_rank = rank
        by_id[chunk_id].is_selected = True
    return [by_id[c] for c in pool]
