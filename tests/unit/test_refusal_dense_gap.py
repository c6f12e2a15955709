"""Dense agreement for refusal by lexical support (`[rerank] refusal_dense_gap`): the share of query
terms the candidates lack refuses only when the dense route's list is flat (first − tenth cosine
below the threshold); an out-of-vocabulary name still refuses alone. By hand on plain lists here;
the pipeline on a real KB in `tests/integration/test_lexical_support_real.py`."""

from __future__ import annotations

import pytest

from ragtriage.config.settings import Settings
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.lexical_support import DENSE_GAP_RANK, dense_gap, lexical_support, with_dense_gap
from ragtriage.pipeline.refusal import refusal_reason
from ragtriage.pipeline.types import RouteResult
from tests.unit.test_lexical_support import TableFrequencies


def _route(name: str, kind: str, scores: list[float]) -> RouteResult:
    hits = [ScoredChunk(chunk_id=f"{name}-{i}", score=s, rank=i + 1) for i, s in enumerate(scores)]
    return RouteResult(name=name, kind=kind, query="q", hits=hits)  # type: ignore[arg-type]


def test_gap_is_first_minus_tenth_of_the_best_dense_route() -> None:
    flat = [0.90 - 0.001 * i for i in range(12)]  # first 0.900, tenth 0.891
    steep = [0.95, *[0.90 - 0.001 * i for i in range(11)]]  # first 0.950, tenth 0.892
    routes = [
        _route("bm25_raw", "bm25", [12.0, 3.0]),  # BM25 scores never count
        _route("dense_raw", "dense", flat),
        _route("dense_rewritten", "dense", steep),
    ]
    assert DENSE_GAP_RANK == 10
    assert dense_gap(routes) == pytest.approx(0.95 - 0.892)  # the route whose first hit is highest
    assert dense_gap(routes[:2]) == pytest.approx(0.009)
    # Fewer than ten hits (a small k or a tiny KB: two chunks may score alike for a question either
    # answers) or no dense route: no gap, so only the veto refuses.
    assert dense_gap([_route("dense_raw", "dense", [0.9, 0.899, 0.85])]) is None
    assert dense_gap([_route("dense_raw", "dense", flat[:9]), routes[0]]) is None
    assert dense_gap([_route("bm25_raw", "bm25", [3.0 - 0.1 * i for i in range(12)])]) is None


def test_a_standing_out_dense_hit_sets_the_share_aside() -> None:
    # 补卡 is the user's word; the KB says 补签 (an alias gap): share 0, but dense found the section.
    support = lexical_support(
        "补卡怎么申请", ["补签申请：忘记打卡后三天内提交"], TableFrequencies(10, {"申请": 6})
    )
    assert support.score is not None and support.score < 0.5 and support.term_share == support.score
    kept = with_dense_gap(support, 0.03, 0.009)
    assert kept.score == 1.0 and kept.term_share == support.term_share and kept.dense_gap == 0.03
    assert kept.dense_stands_out()
    assert kept.explain().startswith(
        f"lexical support 1: term share {support.term_share:.3f} set aside, the dense route's first hit "
        "stands out (first − tenth cosine 0.0300 ≥ 0.009)"
    )
    assert refusal_reason(0.15, "lexical_support", kept.score, 6, kept) is None
    # A flat dense list agrees: the share decides and the reason says both.
    flat = with_dense_gap(support, 0.004, 0.009)
    assert flat.score == support.score and not flat.dense_stands_out()
    reason = refusal_reason(0.15, "lexical_support", flat.score, 6, flat)
    assert reason is not None and "candidates lack 补卡" in reason
    assert reason.endswith("and no dense hit stands out (first − tenth cosine 0.0040 < 0.009)")
    assert "dense route flat (first − tenth cosine 0.0040)" in flat.explain()
    # Exactly at the threshold the hit stands out (refuse below it only).
    assert with_dense_gap(support, 0.009, 0.009).score == 1.0


def test_without_a_dense_route_only_the_veto_refuses() -> None:
    support = lexical_support("补卡怎么申请", ["补签申请"], TableFrequencies(10, {"申请": 6}))
    alone = with_dense_gap(support, None, 0.009)
    assert alone.score == 1.0 and "no dense route of 10 hits to confirm it" in alone.explain()
    frequencies = TableFrequencies(10, {"客户端": 2, "配置": 3})
    named = lexical_support("wireguard客户端怎么配置", ["客户端配置说明"], frequencies)
    assert named.oov_names() == ["wireguard"]
    for gap in (None, 0.5):
        vetoed = with_dense_gap(named, gap, 0.009)
        assert vetoed.score == 0.0 and vetoed.term_share == named.term_share
        assert refusal_reason(0.15, "lexical_support", vetoed.score, 6, vetoed) == (
            "lexical_support score 0.0000 < refusal_threshold 0.15: the KB never mentions wireguard"
        )


def test_unset_or_not_applicable_leaves_the_score_alone() -> None:
    support = lexical_support("补卡怎么申请", ["补签申请"], TableFrequencies(10, {"申请": 6}))
    # The setting unset: the share alone decides, and the gap is recorded (calibrate-refusal sweeps it).
    unset = with_dense_gap(support, 0.5, None)
    assert unset.score == support.score and unset.dense_gap == 0.5 and unset.dense_gap_threshold is None
    assert unset.model_copy(update={"dense_gap": None}) == support
    empty = lexical_support("怎么办", ["补签申请"], TableFrequencies(10, {}))
    assert empty.score is None and with_dense_gap(empty, 0.5, 0.009) == empty


def test_setting_default_and_off() -> None:
    assert (
        Settings().rerank.refusal_dense_gap == 0.009 and Settings().rerank.refusal_score == "lexical_support"
    )
    off = Settings(rerank={"refusal_dense_gap": "off"})  # type: ignore[arg-type]
    assert off.rerank.refusal_dense_gap is None and off.config_hash() != Settings().config_hash()
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        Settings(rerank={"refusal_dense_gap": -0.1})  # type: ignore[arg-type]


def test_redaction_placeholders_are_no_names() -> None:
    # `promote` writes <PHONE> for a phone number: the word phone is in no chunk, but it names nothing
    # the user asked about, so it neither vetoes nor counts in the share.
    frequencies = TableFrequencies(10, {"出差": 2, "发票": 3, "电话": 1})
    support = lexical_support(
        "出差发票多久内交 电话<PHONE>", ["出差发票须在十五天内提交，电话咨询财务"], frequencies
    )
    assert support.oov_names() == [] and "phone" not in [t.term for t in support.terms]
    assert support.score == support.term_share and support.score is not None and support.score > 0.4
    # A lower-case tag is no placeholder but markup (`pipeline.lexical_support.markup_words`): in no chunk, it is left
    # out of the terms, neither a name nor a missing word.
    tagged = lexical_support("出差发票 <script>", ["出差发票"], frequencies)
    assert tagged.oov_names() == [] and tagged.markup == ["script"] and tagged.score == 1.0
    # The same word written as prose is a name the KB never mentions.
    named = lexical_support("出差发票 script", ["出差发票"], frequencies)
    assert named.oov_names() == ["script"] and named.score == 0.0 and named.markup == []
