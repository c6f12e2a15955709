"""Rerank stage: sigmoid calibration, features, linear combination, refusal, HTTP rerank service."""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from ragtriage.config.settings import FeatureWeights, RerankSettings
from ragtriage.errors import PipelineError
from ragtriage.pipeline.rerank import (
    FEATURE_NAMES,
    Reranker,
    RerankItem,
    build_scorer,
    freshness,
    key_term_hit,
    product_line_match,
    route_scores,
    title_hit,
)
from ragtriage.pipeline.rerank_backends import HTTPRerankScorer, estimate_tokens, sigmoid
from tests.conftest import REPO_ROOT

NOW = datetime(2026, 11, 30, tzinfo=timezone.utc)


def test_sigmoid_of_logits_matches_known_values() -> None:
    assert sigmoid([-8.1544, 6.1821]) == pytest.approx([0.000287, 0.997938], abs=1e-6)
    assert sigmoid([0.0]) == [0.5]
    assert sigmoid([-1000.0, 1000.0]) == [0.0, 1.0]  # no overflow
    # One candidate: a sigmoid keeps its meaning, where min-max over one value would give 0.
    assert sigmoid([2.0])[0] == pytest.approx(0.880797, abs=1e-6)


def test_features() -> None:
    assert title_hit(["nginx", "502"], "Nginx 返回 502") == 1.0
    assert title_hit(["nginx", "超时"], "Nginx 配置") == 0.5
    assert title_hit([], "x") == 0.0
    assert freshness("2026-11-30T00:00:00+00:00", NOW, 180) == 1.0
    assert freshness("2026-06-03", NOW, 180) == pytest.approx(0.5)
    assert freshness(None, NOW, 180) == 0.0 and freshness("not a date", NOW, 180) == 0.0
    assert product_line_match("Cloud", "cloud ") == 1.0
    assert product_line_match(None, "cloud") == 0.0
    assert key_term_hit("订单状态 PENDING 卡住", "状态为 pending 的订单", ["PENDING", "SHIPPED"]) == 1.0
    assert key_term_hit("订单状态卡住", "PENDING", ["PENDING"]) == 0.0


class FixedScorer:
    """Returns given probabilities; records the passages it saw."""

    name = "fixed:test"
    notes = ["note from scorer"]

    def __init__(self, probabilities: list[float]) -> None:
        self.probabilities = probabilities
        self.seen: list[str] = []

    def score(self, query: str, passages: Sequence[str]) -> tuple[list[float], list[bool]]:
        self.seen = list(passages)
        return self.probabilities[: len(passages)], [i == 0 for i in range(len(passages))]


ITEMS = [
    RerankItem("c1", rrf_score=1 / 61, title="安装指南", content="a"),
    RerankItem("c2", rrf_score=1 / 62, title="nginx 502 排查", content="b", updated_at="2026-11-30"),
]


def test_features_only_ranks_by_features_and_rrf() -> None:
    reranker = Reranker(RerankSettings(), now=lambda: NOW)
    outcome = reranker.rerank("nginx 502", ["nginx", "502"], ITEMS)
    assert outcome.mode == "features-only" and reranker.mode == "features-only"
    weights = RerankSettings().weights
    expected_c2 = weights.rrf / 62 + weights.title_hit * 1.0 + weights.freshness * 1.0
    assert [c.chunk_id for c in outcome.reranked] == ["c2", "c1"]
    assert outcome.reranked[0].score == pytest.approx(expected_c2)
    assert outcome.pairs[0].cross_encoder_score is None
    assert outcome.pairs[1].features == {
        "title_hit": 1.0,
        "freshness": 1.0,
        "product_line": 0.0,
        "key_terms": 0.0,
        "rrf": pytest.approx(1 / 62),
        "bm25_score": 0.0,
        "dense_score": 0.0,
    }


def test_cross_encoder_probability_is_combined_linearly() -> None:
    scorer = FixedScorer([0.9, 0.1])
    reranker = Reranker(RerankSettings(), scorer, now=lambda: NOW)
    outcome = reranker.rerank("nginx 502", ["nginx", "502"], ITEMS)
    assert scorer.seen == ["a", "b"]
    assert outcome.mode == "fixed:test" and outcome.notes == ["note from scorer"]
    assert [c.chunk_id for c in outcome.reranked] == ["c1", "c2"]
    assert outcome.reranked[0].score == pytest.approx(0.9 + 10 / 61)
    assert outcome.truncated_pairs == 1 and outcome.pairs[0].truncated


def test_equal_scores_keep_fused_order() -> None:
    items = [RerankItem(f"c{i}", rrf_score=0.0) for i in range(3)]
    outcome = Reranker(RerankSettings(), now=lambda: NOW).rerank("q", [], items)
    assert [c.chunk_id for c in outcome.reranked] == ["c0", "c1", "c2"]


def test_refusal_uses_the_cross_encoder_else_the_configured_score() -> None:
    from ragtriage.index.types import ScoredChunk
    from ragtriage.pipeline.refusal import chosen_score, refusal_reason, refusal_scores
    from ragtriage.pipeline.types import RouteResult

    reranker = Reranker(RerankSettings(refusal_threshold=0.5), FixedScorer([0.2]), now=lambda: NOW)
    outcome = reranker.rerank("q", [], ITEMS[:1])
    dense = RouteResult(
        name="dense_raw", kind="dense", query="q", hits=[ScoredChunk(chunk_id="c1", rank=1, score=0.83)]
    )
    fused = [ScoredChunk(chunk_id="c1", rank=1, score=1 / 61)]
    scores = refusal_scores([dense], fused, outcome.reranked, outcome.pairs)
    assert scores["cross_encoder"] == pytest.approx(0.2) and scores["dense_cosine"] == pytest.approx(0.83)
    # A cross-encoder scored: its probability is judged, whatever the fallback says.
    kind, value = chosen_score(scores, "fused")
    assert (
        kind == "cross_encoder"
        and refusal_reason(0.5, kind, value, 1) == "cross_encoder score 0.2000 < refusal_threshold 0.5"
    )
    assert refusal_reason(0.1, kind, value, 1) is None and refusal_reason(None, kind, value, 1) is None
    # Features only: the configured score.
    features = Reranker(RerankSettings()).rerank("q", [], ITEMS[:1])
    scores = refusal_scores([dense], fused, features.reranked, features.pairs)
    assert chosen_score(scores, "dense_cosine") == ("dense_cosine", pytest.approx(0.83))
    assert chosen_score(scores, "fused") == ("fused", pytest.approx(1 / 61))
    assert refusal_reason(0.9, "dense_cosine", 0.83, 1) is not None
    assert refusal_reason(0.1, "dense_cosine", None, 0) == "no candidates retrieved"


def _service(reply: object, seen: list[dict[str, object]] | None = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(json.loads(request.content))
        return httpx.Response(200, json=reply)

    return httpx.MockTransport(handler)


def test_http_tei_scores_already_calibrated_are_kept() -> None:
    seen: list[dict[str, object]] = []
    transport = _service([{"index": 1, "score": 0.25}, {"index": 0, "score": 0.75}], seen)
    scorer = HTTPRerankScorer("http://rr.local", transport=transport, environ={})
    probabilities, truncated = scorer.score("问题", ["第一段", "第二段"])
    assert probabilities == [0.75, 0.25] and truncated == [False, False]
    assert seen[0]["texts"] == ["第一段", "第二段"] and seen[0]["raw_scores"] is False
    assert scorer.url == "http://rr.local/rerank"


def test_http_logits_are_squashed_and_jina_shape_is_read() -> None:
    transport = _service(
        {"results": [{"index": 0, "relevance_score": -8.1544}, {"index": 1, "relevance_score": 6.1821}]}
    )
    scorer = HTTPRerankScorer("http://rr.local/rerank", scores="logit", transport=transport, environ={})
    probabilities, _ = scorer.score("q", ["a", "b"])
    assert probabilities == pytest.approx([0.000287, 0.997938], abs=1e-6)


def test_http_out_of_range_probability_and_failures_are_clear_errors() -> None:
    scorer = HTTPRerankScorer("http://rr.local", transport=_service([{"index": 0, "score": 3.2}]), environ={})
    with pytest.raises(PipelineError, match='outside \\[0, 1\\].*http_scores = "logit"'):
        scorer.score("q", ["a"])
    missing = HTTPRerankScorer("http://rr.local", transport=_service([]), environ={})
    with pytest.raises(PipelineError, match="scores for 1 passages are missing"):
        missing.score("q", ["a"])
    failing = HTTPRerankScorer(
        "http://rr.local", transport=httpx.MockTransport(lambda r: httpx.Response(503)), environ={}
    )
    with pytest.raises(PipelineError, match="HTTP 503"):
        failing.score("q", ["a"])


def test_http_cuts_the_passage_never_the_query() -> None:
    seen: list[dict[str, object]] = []
    transport = _service([{"index": 0, "score": 0.5}, {"index": 1, "score": 0.5}], seen)
    scorer = HTTPRerankScorer("http://rr.local", max_length=20, transport=transport, environ={})
    query = "磁盘满了怎么办"
    _, truncated = scorer.score(query, ["短", "很" * 100])
    assert truncated == [False, True]
    sent = seen[0]["texts"]
    assert isinstance(sent, list) and sent[0] == "短" and 0 < len(sent[1]) < 100
    assert estimate_tokens(query) + estimate_tokens(sent[1]) + 3 <= 20


def test_build_scorer_needs_model_or_url() -> None:
    assert build_scorer(RerankSettings()) is None
    with pytest.raises(PipelineError, match="needs \\[rerank\\] model"):
        build_scorer(RerankSettings(backend="flagembedding"))
    with pytest.raises(PipelineError, match="needs \\[rerank\\] url"):
        build_scorer(RerankSettings(backend="http"))


def test_route_scores_are_min_max_per_list_best_per_kind() -> None:
    scores = route_scores(
        [
            ("bm25", [("a", 24.0), ("b", 18.0), ("c", 12.0)]),
            ("bm25", [("c", 9.0), ("d", 3.0)]),  # a second BM25 route (e.g. on the rewritten query)
            ("dense", [("b", 0.90), ("e", 0.88), ("a", 0.85)]),
            ("dense", [("x", 0.7)]),  # one hit: the best of its list
            ("dense", []),
        ]
    )
    assert scores["a"] == {"bm25_score": 1.0, "dense_score": pytest.approx(0.0)}
    assert scores["b"] == {"bm25_score": pytest.approx(0.5), "dense_score": pytest.approx(1.0)}
    # c is last in one BM25 list and first in the other: the best counts.
    assert scores["c"] == {"bm25_score": 1.0}
    assert scores["d"] == {"bm25_score": 0.0} and scores["x"] == {"dense_score": 1.0}
    assert "f" not in scores


def test_score_features_are_weighted_and_shown_in_the_pair() -> None:
    items = [
        RerankItem("only-bm25-top", rrf_score=1 / 61, bm25_score=1.0),
        RerankItem("both-routes-low", rrf_score=1 / 70 + 1 / 70, bm25_score=0.1, dense_score=0.1),
    ]
    plain = Reranker(RerankSettings(), now=lambda: NOW).rerank("q", [], items)
    assert [c.chunk_id for c in plain.reranked] == ["both-routes-low", "only-bm25-top"]
    weighted = RerankSettings(weights={"bm25_score": 0.2, "dense_score": 0.2})
    outcome = Reranker(weighted, now=lambda: NOW).rerank("q", [], items)
    assert [c.chunk_id for c in outcome.reranked] == ["only-bm25-top", "both-routes-low"]
    top = outcome.pairs[0]
    assert top.features["bm25_score"] == 1.0 and top.features["dense_score"] == 0.0
    assert top.score == pytest.approx(10.0 / 61 + 0.2 * 1.0)


def _attribute_docstrings(cls: type) -> dict[str, str]:
    """Field name → the docstring written under it in the class body."""
    body = ast.parse(inspect.getsource(cls)).body[0]
    assert isinstance(body, ast.ClassDef)
    found: dict[str, str] = {}
    for field, doc in zip(body.body, body.body[1:], strict=False):
        if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name):
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                found[field.target.id] = str(doc.value.value)
    return found


def test_every_rerank_feature_is_documented_with_its_formula_and_settings() -> None:
    text = (REPO_ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    section = text.split("\n## Rerank features\n", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| `")}
    weights = FeatureWeights()
    for name in FEATURE_NAMES:
        assert f"`{name}`" in rows, f"docs/settings.md#rerank-features has no row for {name}"
        assert f"`[rerank.weights] {name}` ({getattr(weights, name)})" in rows[f"`{name}`"], name
    defaults = RerankSettings()
    assert (
        f"`[rerank] freshness_half_life_days` ({defaults.freshness_half_life_days} days)"
        in rows["`freshness`"]
    )
    assert "0.5 ^ (age_days ÷ `freshness_half_life_days`)" in rows["`freshness`"]
    # The worked example is the code's own arithmetic.
    aged = freshness(NOW - timedelta(days=90), NOW, defaults.freshness_half_life_days)
    assert f"0.5 ^ (90 ÷ 180) = {aged:.3f}" in " ".join(section.split())
    assert f"0.02 × {aged:.3f} = {weights.freshness * aged:.3f}" in " ".join(section.split())
    assert title_hit(["a", "b", "c", "d"], "a b") == 0.5  # "2 of the query's 4 keywords"
    # The settings a reader meets first point at the formulas.
    anchor = "docs/settings.md#rerank-features"
    assert anchor in (FeatureWeights.__doc__ or "")
    for cls, names in (
        (FeatureWeights, ("title_hit", "freshness")),
        (RerankSettings, ("freshness_half_life_days", "freshness_now")),
    ):
        docs = _attribute_docstrings(cls)
        for name in names:
            assert anchor in " ".join(docs.get(name, "").split()), (cls.__name__, name)


def test_title_match_tokens_is_the_share_of_query_terms_among_the_title_terms() -> None:
    from ragtriage.pipeline.rerank import title_token_share

    title = "aptitude 升级整个系统"
    # A substring match counts `apt` inside `aptitude`; the token variant (production's
    # len(set(q) & set(t)) / len(set(q))) does not.
    assert title_hit(["apt", "升级", "系统"], title) == pytest.approx(1.0)
    assert title_token_share(["apt", "升级", "系统"], title) == pytest.approx(2 / 3)
    assert title_token_share(["升级", "升级"], title) == 1.0  # distinct terms
    assert title_token_share([], title) == 0.0 and title_token_share(["apt"], None) == 0.0
    item = RerankItem(chunk_id="c1", rrf_score=0.5, title=title)
    tokens = Reranker(RerankSettings(title_match="tokens"), now=lambda: NOW)
    assert tokens.feature_values("q", ["apt", "升级", "系统"], item, NOW)["title_hit"] == pytest.approx(2 / 3)
    substring = Reranker(RerankSettings(), now=lambda: NOW)
    assert substring.feature_values("q", ["apt", "升级", "系统"], item, NOW)["title_hit"] == pytest.approx(
        1.0
    )


def test_title_match_tokens_takes_the_query_terms_the_bm25_route_searches() -> None:
    from ragtriage.config.settings import Settings
    from ragtriage.pipeline.chunk_lookup import ChunkLookup
    from ragtriage.pipeline.pipeline import Pipeline
    from ragtriage.pipeline.rewrite import AliasDictionary, RuleRewriter
    from ragtriage.pipeline.types import RewriteResult

    settings = Settings(
        rerank={"title_match": "tokens"},  # type: ignore[arg-type]
        index={"query_segmentation": "search", "query_stop_words": ["怎么"]},  # type: ignore[arg-type]
    )
    pipeline = Pipeline(
        settings,
        rules=RuleRewriter(AliasDictionary()),
        reranker=Reranker(settings.rerank),
        chunks=ChunkLookup.from_records([]),
    )
    query = "APT 怎么 升级系统"
    rewrite = RewriteResult(raw_query=query, normalized_query=query, rewritten_query=query, mode="off")
    assert pipeline._keywords(rewrite) == ["apt", "升级", "系统"]
