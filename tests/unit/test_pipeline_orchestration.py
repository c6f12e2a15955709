"""Orchestration of `Pipeline` with fakes: routes, batching, options, trace assembly, cancellation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from ragtriage.config.settings import Settings
from ragtriage.errors import InputError
from ragtriage.index.types import ScoredChunk
from ragtriage.kb.types import ChunkRecord
from ragtriage.pipeline.chunk_lookup import ChunkLookup
from ragtriage.pipeline.pipeline import Pipeline, RunCancelled
from ragtriage.pipeline.rerank import Reranker
from ragtriage.pipeline.rewrite import AliasDictionary, RuleRewriter
from ragtriage.pipeline.types import RewriteResult, RunOptions


def _hits(ids: Sequence[str]) -> list[ScoredChunk]:
    return [ScoredChunk(chunk_id=c, rank=i, score=1.0 / i) for i, c in enumerate(ids, start=1)]


class FakeBM25:
    """BM25 stand-in: a table from query text to ranked ids; records calls."""

    kind = "bm25"

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[tuple[str, int]] = []

    def search(self, query: str, k: int) -> tuple[list[ScoredChunk], list[str]]:
        self.calls.append((query, k))
        if query.strip("的了和？！。 ") == "":
            return [], ["query-tokenizes-to-nothing"]
        return _hits(self.table.get(query, [])[:k]), []


class FakeEmbedder:
    """Embeds text i of each call as a vector whose first cell points at the text; records batches."""

    name = "fake-embedder"
    dim = 2

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.texts: list[str] = []

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        rows = []
        for text in texts:
            self.texts.append(text)
            rows.append([float(len(self.texts) - 1), 0.0])
        return np.asarray(rows, dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        raise AssertionError("queries only")


def _record(chunk_id: str, title: str = "") -> ChunkRecord:
    return ChunkRecord(
        chunk_id=chunk_id,
        doc_id=f"doc-{chunk_id}",
        title=title or chunk_id,
        ordinal=0,
        content=f"content of {chunk_id}",
        content_hash=chunk_id,
        anchor=f"a-{chunk_id}",
    )


def _build(
    bm25_table: dict[str, list[str]],
    dense_table: dict[str, list[str]],
    settings: Settings | None = None,
    aliases: dict[str, list[str]] | None = None,
) -> tuple[Pipeline, FakeBM25, FakeEmbedder]:
    settings = settings or Settings()
    bm25 = FakeBM25(bm25_table)
    embedder = FakeEmbedder()

    def dense_search(vector: np.ndarray, k: int) -> list[ScoredChunk]:
        return _hits(dense_table.get(embedder.texts[int(vector[0])], [])[:k])

    ids = {c for table in (bm25_table, dense_table) for ranked in table.values() for c in ranked} - {"ghost"}
    pipeline = Pipeline(
        settings,
        rules=RuleRewriter(AliasDictionary.from_mapping(aliases or {}), tokenize=str.split),
        reranker=Reranker(settings.rerank),
        chunks=ChunkLookup.from_records(_record(c) for c in sorted(ids)),
        bm25=bm25,
        embedder=embedder,
        dense_search=dense_search,
        kb_version=lambda: 7,
    )
    return pipeline, bm25, embedder


def test_routes_fusion_and_candidate_pool() -> None:
    aliases = {"vm": ["virtual machine"]}
    pipeline, bm25, embedder = _build(
        {"vm slow": ["c1", "c2"], "vm slow virtual machine": ["c3", "c1"]},
        {"vm slow": ["c2", "c4"], "vm slow virtual machine": ["c3"]},
        aliases=aliases,
    )
    trace = pipeline.run("  ｖｍ   slow ", gold=["c4"])
    assert trace.query == "  ｖｍ   slow "
    assert trace.rewrite.normalized_query == "vm slow"
    assert trace.rewrite.rewritten_query == "vm slow virtual machine"
    assert [r.name for r in trace.routes] == ["bm25_raw", "dense_raw", "bm25_rewritten", "dense_rewritten"]
    assert [h.chunk_id for h in trace.route("bm25_rewritten").hits] == ["c3", "c1"]  # type: ignore[union-attr]
    # One embedding call for both dense texts of the run.
    assert embedder.batches == [["vm slow", "vm slow virtual machine"]]
    # c1: bm25_raw 1 + bm25_rewritten 2; c3: bm25_rewritten 1 + dense_rewritten 1
    scores = {c.chunk_id: c.score for c in trace.fused}
    assert scores["c3"] == pytest.approx(2 / 61)
    assert scores["c1"] == pytest.approx(1 / 61 + 1 / 62)
    assert [c.chunk_id for c in trace.candidates] == [c.chunk_id for c in trace.fused]
    c4 = trace.candidate("c4")
    assert c4 is not None and c4.doc_id == "doc-c4" and c4.anchor == "a-c4" and c4.known
    assert c4.routes["dense_raw"].rank == 2 and "bm25_raw" not in c4.routes
    assert trace.rerank_mode == "features-only"
    assert trace.final == [c.chunk_id for c in trace.reranked][:6]
    assert all(c.is_selected == (c.chunk_id in trace.final) for c in trace.candidates)
    assert set(trace.timings_ms) >= {
        "normalize",
        "rewrite",
        "embed",
        "bm25",
        "dense",
        "fusion",
        "rerank",
        "total",
    }
    assert trace.kb_version == 7 and trace.embedder == "fake-embedder" and trace.gold == ["c4"]
    assert trace.config_hash == Settings().config_hash()


def test_rewritten_route_equal_to_raw_is_flagged_not_run() -> None:
    pipeline, bm25, embedder = _build({"disk full": ["c1"]}, {"disk full": ["c2"]})
    trace = pipeline.run("disk full")
    rewritten = trace.route("bm25_rewritten")
    assert rewritten is not None and rewritten.hits == [] and rewritten.flags == ["skipped: same text as raw"]
    assert [q for q, _ in bm25.calls] == ["disk full"]
    assert embedder.batches == [["disk full"]]


def test_query_that_tokenizes_to_nothing_still_runs_dense() -> None:
    pipeline, _, _ = _build({}, {"的了和": ["c9"]})
    trace = pipeline.run("的了和")
    assert trace.route("bm25_raw").flags == ["query-tokenizes-to-nothing"]  # type: ignore[union-attr]
    assert [c.chunk_id for c in trace.fused] == ["c9"]
    assert "bm25_raw: query-tokenizes-to-nothing" in trace.flags


def test_empty_query_is_an_input_error() -> None:
    pipeline, _, _ = _build({}, {})
    with pytest.raises(InputError, match="empty query; pass --query with text"):
        pipeline.run(" \u3000 ")


def test_sub_query_routes_and_options() -> None:
    table = {"a b and c d": ["c1"], "a b": ["c2"], "c d": ["c3"]}
    pipeline, bm25, embedder = _build(table, table)
    trace = pipeline.run("a b and c d")
    assert [r.name for r in trace.routes][-2:] == ["dense_sub_1", "dense_sub_2"]
    assert trace.route("dense_sub_2").query == "c d"  # type: ignore[union-attr]

    options = RunOptions(routes=["bm25_raw"], bm25_k=1, rerank="off", top_n=1)
    restricted = pipeline.run("a b and c d", options=options)
    assert [r.name for r in restricted.routes] == ["bm25_raw"]
    assert bm25.calls[-1] == ("a b and c d", 1)
    assert restricted.rerank_mode == "off" and restricted.reranked == [] and restricted.final == ["c1"]
    assert restricted.run_options == options

    dense_only = pipeline.run("a b and c d", options=RunOptions(routes=["dense_raw", "dense_sub"], dense_k=1))
    assert [r.name for r in dense_only.routes] == ["dense_raw", "dense_sub_1", "dense_sub_2"]
    assert all(len(r.hits) <= 1 for r in dense_only.routes)

    off = pipeline.run("a b and c d", options=RunOptions(rewrite_mode="off"))
    assert off.rewrite.mode == "off" and not any(r.name.startswith("dense_sub") for r in off.routes)


def test_candidate_pool_and_top_n_and_unknown_chunks() -> None:
    ids = [f"c{i}" for i in range(1, 9)] + ["ghost"]
    pipeline, _, _ = _build({"q": ids}, {})
    trace = pipeline.run("q", options=RunOptions(candidate_pool=4, top_n=2, routes=["bm25_raw"]))
    assert trace.rerank_input == ["c1", "c2", "c3", "c4"]
    assert len(trace.final) == 2 and set(trace.final) <= set(trace.rerank_input)
    ghost = trace.candidate("ghost")
    assert ghost is not None and not ghost.known and not ghost.in_rerank_input and ghost.fused.rank == 9
    assert any("not in the KB" in f for f in trace.flags)


def test_logged_rewrite_and_extra_aliases() -> None:
    pipeline, bm25, _ = _build({}, {})
    logged = RewriteResult(
        raw_query="x", normalized_query="nginx 502", rewritten_query="nginx 502 bad gateway"
    )
    trace = pipeline.run("nginx 502", options=RunOptions(rewrite_override=logged, routes=["bm25_rewritten"]))
    assert trace.rewrite.mode == "logged" and trace.rewrite.raw_query == "nginx 502"
    assert bm25.calls[-1][0] == "nginx 502 bad gateway"
    extra = pipeline.run("nginx 502", options=RunOptions(extra_aliases={"502": ["bad gateway"]}))
    assert extra.rewrite.aliases == {"502": ["bad gateway"]}
    assert pipeline.run("nginx 502").rewrite.aliases == {}


def test_refusal_below_threshold() -> None:
    # A cosine is never above 1: every run refuses (fakes have no BM25 document frequencies, so the
    # default lexical support would be n/a and not judge).
    settings = Settings.model_validate(
        {"rerank": {"refusal_threshold": 5.0, "refusal_score": "dense_cosine"}}
    )
    pipeline, _, _ = _build({"q": ["c1"]}, {}, settings=settings)
    trace = pipeline.run("q")
    assert trace.refused and trace.final == [] and "refusal_threshold" in (trace.refusal_reason or "")
    assert trace.reranked[0].chunk_id == "c1"


def test_lexical_support_without_document_frequencies_is_not_judged() -> None:
    # A BM25 retriever that cannot count document frequencies (a production engine's route).
    settings = Settings.model_validate(
        {"rerank": {"refusal_threshold": 0.9, "refusal_score": "lexical_support"}}
    )
    pipeline, _, _ = _build({"q": ["c1"]}, {}, settings=settings)
    trace = pipeline.run("q")
    assert not trace.refused and trace.final == ["c1"] and trace.refusal_score is None
    assert trace.refusal_score_kind == "lexical_support"
    assert trace.lexical_support is not None and "no local BM25 index" in (trace.lexical_support.note or "")
    assert any(flag.startswith("refusal not judged: lexical support n/a") for flag in trace.flags)


def test_run_many_batches_embeddings_and_stops() -> None:
    pipeline, _, embedder = _build({}, {"q1": ["c1"], "q2": ["c2"]})
    pipeline.warm_up()
    embedder.batches.clear()
    progress: list[tuple[int, int]] = []
    traces = pipeline.run_many(["q1", "q2", "q1"], on_progress=lambda d, t: progress.append((d, t)))
    assert [t.fused[0].chunk_id for t in traces] == ["c1", "c2", "c1"]
    assert embedder.batches == [["q1", "q2"]]
    assert progress == [(3, 3)]
    assert pipeline.run_many(["q1"], should_stop=lambda: True) == []


def test_should_stop_between_stages_cancels_run() -> None:
    pipeline, bm25, _ = _build({"q": ["c1"]}, {})
    calls = iter([False, True])
    with pytest.raises(RunCancelled):
        pipeline.run("q", should_stop=lambda: next(calls))
    assert bm25.calls == []


def test_llm_mode_without_an_llm_rewriter_falls_back_to_rules() -> None:
    pipeline, _, _ = _build({}, {})
    trace = pipeline.run("q", options=RunOptions(rewrite_mode="llm"))
    assert trace.rewrite.mode == "rules"
    assert "not configured" in (trace.rewrite.fallback_reason or "")


def test_rewritten_routes_alone_search_even_an_unchanged_query() -> None:
    """Ablation D (rewritten routes only) must not score 0 on queries the rewrite leaves unchanged."""
    pipeline, bm25, _ = _build({"disk full": ["c1"]}, {"disk full": ["c2"]})
    trace = pipeline.run("disk full", options=RunOptions(routes=["bm25_rewritten", "dense_rewritten"]))
    assert [r.name for r in trace.routes] == ["bm25_rewritten", "dense_rewritten"]
    assert [h.chunk_id for h in trace.route("bm25_rewritten").hits] == ["c1"]  # type: ignore[union-attr]
    assert [h.chunk_id for h in trace.route("dense_rewritten").hits] == ["c2"]  # type: ignore[union-attr]
    assert [q for q, _ in bm25.calls] == ["disk full"]


def test_weighted_fusion_per_route_normalisation_and_keep_from_the_settings() -> None:
    fusion = {
        "method": "weighted",
        "weights": {"dense_raw": 0.7, "bm25_raw": 0.3},
        "normalization": {"dense_raw": "none", "bm25_raw": "max"},
        "keep": 2,
    }
    settings = Settings(
        rewrite={"enabled": False},  # type: ignore[arg-type]
        retrieval={"routes": ["bm25_raw", "dense_raw"], "fusion": fusion},  # type: ignore[arg-type]
    )
    pipeline, _, _ = _build({"q": ["c1", "c2", "c3"]}, {"q": ["c4", "c1"]}, settings)
    trace = pipeline.run("q")
    # Scores 1/rank: c1 = 0.7 × 0.5 (raw) + 0.3 × 1/1; c4 = 0.7 × 1; c2, c3 are cut by keep = 2.
    assert [(c.chunk_id, round(c.score, 6)) for c in trace.fused] == [("c4", 0.7), ("c1", 0.65)]
    assert trace.rerank_input == ["c4", "c1"]
    c2 = trace.candidate("c2")
    assert c2 is not None and c2.fused.rank is None and "bm25_raw" in c2.routes


def test_a_larger_candidate_pool_widens_the_fused_cut() -> None:
    # The larger-k counterfactual asks for a bigger pool: production's cut must not hide it.
    settings = Settings(
        rewrite={"enabled": False},  # type: ignore[arg-type]
        retrieval={"routes": ["bm25_raw", "dense_raw"], "fusion": {"method": "weighted", "keep": 2}},  # type: ignore[arg-type]
    )
    pipeline, _, _ = _build({"q": ["c1", "c2", "c3"]}, {"q": ["c4", "c1"]}, settings)
    assert len(pipeline.run("q").fused) == 2
    wider = pipeline.run("q", options=RunOptions(candidate_pool=3))
    assert len(wider.fused) == 3 and len(wider.rerank_input) == 3
