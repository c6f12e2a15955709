"""The retrieval pipeline: normalize → rewrite → multi-route recall → fusion → rerank → top-N.

Every stage is recorded in a `Trace`. Backends come in through small interfaces (a BM25
`Retriever`, an `Embedder`, a dense `search_vector` callable, a `Reranker`, and per-route
production engines that are `Retriever`s too), so `factory.py` is the only module that knows which
implementations run. The settings (one replay profile's) choose routes, k, fusion and rerank.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragtriage.config.settings import Settings
from ragtriage.errors import RagtriageError
from ragtriage.index.types import Embedder, ScoredChunk
from ragtriage.pipeline import refusal as refusal_rules
from ragtriage.pipeline.chunk_lookup import ChunkLookup
from ragtriage.pipeline.fusion import fuse
from ragtriage.pipeline.lexical_support import candidates_support, dense_gap, with_dense_gap
from ragtriage.pipeline.normalize import normalize_query
from ragtriage.pipeline.rerank import Reranker, RerankOutcome
from ragtriage.pipeline.rewrite import Rewriter, RuleRewriter, extract_keywords, off_rewrite
from ragtriage.pipeline.route_plan import (
    PlannedRoute,
    engine_for,
    fusion_weights,
    needs_vector,
    plan_routes,
    route_k,
    search_route,
)
from ragtriage.pipeline.trace_build import build_candidates, rerank_items
from ragtriage.pipeline.types import (
    LexicalSupport,
    ProfileRef,
    Retriever,
    RewriteResult,
    RouteResult,
    RunOptions,
    Trace,
)

DenseSearch = Callable[[np.ndarray, int], list[ScoredChunk]]
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
        options, retrieval = item.options, self.settings.retrieval
        routes: list[RouteResult] = []
        stage_ms = {"bm25": 0.0, "dense": 0.0}
        for planned in item.routes:
            result = RouteResult(
                name=planned.name,
                kind=planned.kind,  # type: ignore[arg-type]
                query=planned.query,
                engine=planned.engine,
            )
            if planned.skip_flag is not None:
                result.flags.append(planned.skip_flag)
            else:
                tick = self._clock()
                result.hits, result.flags = self._search(
                    planned, vectors, route_k(retrieval, planned, options)
                )
                result.ms = (self._clock() - tick) * 1000
                stage_ms[planned.kind] += result.ms
            routes.append(result)
        item.timings.update(stage_ms)
        checkpoint()

        tick = self._clock()
        fused = self._fuse(routes)
        item.timings["fusion"] = (self._clock() - tick) * 1000
        checkpoint()

        top_n = options.top_n or self.settings.rerank.top_n
        pool = options.candidate_pool or retrieval.candidate_pool
        tick = self._clock()
        outcome: RerankOutcome | None = None
        refusal: str | None = None
        refusal_kind: str | None = None
        refusal_value: float | None = None
        support: LexicalSupport | None = None
        not_judged: str | None = None
        if options.rerank == "off" or not self.settings.rerank.enabled:
            rerank_input: list[str] = []
            final = [c.chunk_id for c in fused[:top_n]]
            mode = "off"
        else:
            rerank_input = [c.chunk_id for c in fused[:pool]]
            outcome = self.reranker.rerank(
                item.rewrite.normalized_query,
                self._keywords(item.rewrite),
                rerank_items(fused[:pool], routes, self.chunks),
                now=options.as_of,
            )
            support = with_dense_gap(
                candidates_support(item.raw_query, outcome.reranked[:top_n], self.chunks, self.bm25),
                dense_gap(routes),
                self.settings.rerank.refusal_dense_gap,
            )
            scores = refusal_rules.refusal_scores(routes, fused, outcome.reranked, outcome.pairs, support)
            rerank = self.settings.rerank
            refusal_kind, refusal_value = refusal_rules.chosen_score(scores, rerank.refusal_score)
            # A threshold calibrated for another score kind is on another scale: not judged, said.
            threshold, not_judged = refusal_rules.judged_threshold(
                rerank.refusal_threshold, rerank.refusal_threshold_score, refusal_kind
            )
            refusal = refusal_rules.refusal_reason(
                threshold, refusal_kind, refusal_value, len(outcome.reranked), support
            )
            not_judged = not_judged or refusal_rules.not_judged_note(threshold, refusal_kind, support)
            final = [] if refusal else self.reranker.final(outcome.reranked, top_n)
            mode = outcome.mode
        item.timings["rerank"] = (self._clock() - tick) * 1000
        item.timings["total"] = (self._clock() - item.started) * 1000

        candidates = build_candidates(routes, fused, rerank_input, outcome, final, self.chunks)
        flags = [f"{r.name}: {f}" for r in routes for f in r.flags if not f.startswith("skipped")]
        flags.extend(outcome.notes if outcome else [])
        if outcome is not None and not_judged:
            flags.append(not_judged)
        unknown = sum(1 for c in candidates if not c.known)
        if unknown:
            noun = "chunk is" if unknown == 1 else "chunks are"
            flags.append(f"{unknown} candidate {noun} not in the KB (stale index or another KB)")
        return Trace(
            query=item.raw_query,
            rewrite=item.rewrite,
            routes=routes,
            fused=fused,
            rerank_input=rerank_input,
            reranked=outcome.reranked if outcome else [],
            rerank_mode=mode,
            rerank_pairs=outcome.pairs if outcome else [],
            truncated_pairs=outcome.truncated_pairs if outcome else 0,
            final=final,
            refused=refusal is not None,
            refusal_reason=refusal,
            refusal_score_kind=refusal_kind,
            refusal_score=refusal_value,
            lexical_support=support,
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

    def _search(
        self, planned: PlannedRoute, vectors: np.ndarray | None, k: int
    ) -> tuple[list[ScoredChunk], list[str]]:
        """One route's hits and flags, from its production engine or the local index."""
        vector = (
            vectors[planned.vector_row] if vectors is not None and planned.vector_row is not None else None
        )
        engine = engine_for(self.engines, planned.name)
        return search_route(
            planned, vector, k, engine=engine[1] if engine else None, bm25=self.bm25, dense=self.dense_search
        )

    def _fuse(self, routes: Sequence[RouteResult]) -> list[ScoredChunk]:
        """The fused list by `[retrieval.fusion] method` (routes without hits take no part)."""
        retrieval = self.settings.retrieval
        fusion = retrieval.fusion
        return fuse(
            fusion.method,
            {r.name: [(h.chunk_id, h.score) for h in r.hits] for r in routes if r.hits},
            rrf_k=retrieval.rrf_k,
            weights=fusion_weights(fusion.weights, routes),
            normalization=fusion.normalization,
            missing=fusion.missing,
        )

    def _keywords(self, rewrite: RewriteResult) -> list[str]:
        return rewrite.keywords or extract_keywords(rewrite.normalized_query, self.rules.tokenize)
