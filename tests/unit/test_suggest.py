"""Root-cause rules on hand-built traces: one positive and one near miss per label, and precedence."""

from __future__ import annotations

from collections.abc import Sequence

from ragtriage.pipeline.types import LexicalSupport, Trace
from ragtriage.triage.facts import collect_facts
from ragtriage.triage.rules import Finding, findings
from tests.unit.triage_fakes import FakeContext, chunk, make_trace

GOLD = chunk("g", "差旅 报销 流程 需要 发票 原件", title="报销 指南", doc_id="travel", ordinal=1)
OTHER = chunk("a", "会议室 预订 规则", title="会议室", doc_id="rooms", ordinal=0)
GENERIC = chunk("b", "欢迎 使用 员工 手册", title="手册", doc_id="intro", ordinal=0)


def run_rules(
    ctx: FakeContext,
    query: str,
    *,
    replay: Trace | None = None,
    logged: Trace | None = None,
    gold: Sequence[str] | None = ("g",),
    must_have: Sequence[str] = (),
) -> list[Finding]:
    facts = collect_facts(ctx, query, logged=logged, replay=replay, gold=gold, must_have=must_have)
    return findings(facts)


def labels(found: list[Finding]) -> list[str]:
    return [f.label for f in found]


def lost_trace(query: str, **routes: list[str]) -> Trace:
    """Gold retrieved by the given routes (or not), but nothing past them: final is `a`."""
    return make_trace(
        query, routes=routes or {"bm25_raw": ["a"], "dense_raw": ["a"]}, rerank_input=["a"], final=["a"]
    )


# ---------------------------------------------------------------- label_error


def test_unknown_gold_id_is_a_label_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    found = run_rules(ctx, "差旅 报销", replay=lost_trace("差旅 报销"), gold=["nope"])
    assert found[0].label == "label_error" and "nope" in found[0].evidence[0]


def test_gold_without_the_key_terms_while_a_final_chunk_has_them_is_a_label_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace("会议室 预订", routes={"bm25_raw": ["a"], "dense_raw": ["a"]}, final=["a"])
    found = run_rules(ctx, "会议室 预订", replay=trace)
    assert found[0].label == "label_error"
    assert any("a in the final context covers 2/2" in line for line in found[0].evidence)


def test_near_miss_gold_with_the_key_terms_is_not_a_label_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace(
        "差旅 报销", routes={"bm25_raw": ["a"], "dense_raw": ["g", "a"]}, rerank_input=["a"], final=["a"]
    )
    assert "label_error" not in labels(run_rules(ctx, "差旅 报销", replay=trace))


# ---------------------------------------------------------------- index_stale


def test_gold_missing_from_an_index_is_index_stale() -> None:
    ctx = FakeContext([GOLD, OTHER], indexed={"g": {"bm25": None, "dense": GOLD.content_hash}})
    found = run_rules(ctx, "差旅 报销", replay=lost_trace("差旅 报销"))
    assert found[0].label == "index_stale"
    assert found[0].evidence == ["gold g is missing from the BM25 index"]


def test_indexed_hash_older_than_the_kb_is_index_stale() -> None:
    ctx = FakeContext([GOLD, OTHER], indexed={"g": {"bm25": GOLD.content_hash, "dense": "0ld" * 10}})
    found = run_rules(ctx, "差旅 报销", replay=lost_trace("差旅 报销"))
    assert found[0].label == "index_stale" and "older than the KB" in found[0].evidence[0]


def test_logged_ids_unknown_to_the_kb_are_index_stale() -> None:
    ctx = FakeContext([GOLD, OTHER])
    logged = make_trace("差旅 报销", routes={"bm25": ["old-1", "a"]}, final=["old-1", "a"], unknown=["old-1"])
    replay = make_trace("差旅 报销", routes={"bm25_raw": ["g"]}, final=["g"])
    found = run_rules(ctx, "差旅 报销", logged=logged, replay=replay)
    assert found[0].label == "index_stale"
    assert "old-1" in found[0].evidence[0] and found[0].confidence == 0.8


def test_near_miss_unknown_logged_ids_but_gold_in_final_is_not_index_stale() -> None:
    ctx = FakeContext([GOLD, OTHER])
    logged = make_trace("差旅 报销", routes={"bm25": ["old-1", "g"]}, final=["old-1", "g"], unknown=["old-1"])
    found = run_rules(ctx, "差旅 报销", logged=logged, replay=logged)
    assert labels(found) == ["generation_error"]


# ---------------------------------------------------------------- chunk_split_bad

LEAVE = chunk("g", "年假 申请 流程", title="休假制度", doc_id="leave", ordinal=1)
LEAVE_NEXT = chunk("n", "天数 按 工龄 计算", title="休假制度", doc_id="leave", ordinal=2)


def test_terms_covered_only_by_adjacent_chunks_is_chunk_split_bad() -> None:
    ctx = FakeContext([LEAVE, LEAVE_NEXT, OTHER])
    found = run_rules(ctx, "年假 天数 计算", replay=lost_trace("年假 天数 计算"))
    assert found[0].label == "chunk_split_bad"
    assert found[0].counterfactuals == ["neighbours_merged"]


def test_near_miss_neighbour_lacking_a_term_is_not_chunk_split_bad() -> None:
    partial = chunk("n", "按 工龄 计算", title="休假制度", doc_id="leave", ordinal=2)
    ctx = FakeContext([LEAVE, partial, OTHER])
    assert "chunk_split_bad" not in labels(
        run_rules(ctx, "年假 天数 计算", replay=lost_trace("年假 天数 计算"))
    )


# ---------------------------------------------------------------- rewrite_error


def test_raw_routes_reach_gold_and_rewritten_ones_do_not_is_rewrite_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace(
        "差旅 报销",
        routes={"bm25_raw": ["g"], "bm25_rewritten": ["a"], "dense_rewritten": ["a"]},
        rewritten="差旅 报销 会议室",
        rerank_input=["a"],
        final=["a"],
    )
    found = run_rules(ctx, "差旅 报销", replay=trace)
    assert found[0].label == "rewrite_error" and "raw-query routes reach gold" in found[0].evidence[0]


def test_rewrite_that_dropped_a_constraint_term_is_rewrite_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace("差旅 报销 原件", routes={"bm25_raw": ["a"]}, rewritten="差旅 报销", final=["a"])
    found = run_rules(ctx, "差旅 报销 原件", replay=trace)
    assert found[0].label == "rewrite_error" and "constraint term 原件 that" in found[0].evidence[0]
    assert "['" not in found[0].evidence[0]  # words, never a Python list


def test_rewrite_that_replaced_a_term_with_an_alias_gold_lacks_is_rewrite_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace(
        "差旅 撤销",
        routes={"bm25_rewritten": ["a"], "dense_rewritten": ["a"]},
        rewritten="差旅 作废",
        aliases={"撤销": ["作废"]},
        final=["a"],
    )
    found = run_rules(ctx, "差旅 撤销", logged=trace)
    assert found[0].label == "rewrite_error"
    assert any("撤销 → 作废" in line for line in found[0].evidence)


def test_near_miss_replacing_rewrite_to_the_gold_term_is_not_rewrite_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace(
        "差旅 报账",
        routes={"bm25_rewritten": ["a"], "dense_rewritten": ["a"]},
        rewritten="差旅 报销",
        aliases={"报账": ["报销"]},
        final=["a"],
    )
    assert "rewrite_error" not in labels(run_rules(ctx, "差旅 报账", logged=trace))


def test_near_miss_raw_routes_missing_gold_too_is_not_rewrite_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace(
        "差旅 报销",
        routes={"bm25_raw": ["a"], "dense_raw": ["a"], "bm25_rewritten": ["a"], "dense_rewritten": ["g"]},
        rewritten="差旅 报销 费用",
        rerank_input=["a"],
        final=["a"],
    )
    assert "rewrite_error" not in labels(run_rules(ctx, "差旅 报销", replay=trace))


# ---------------------------------------------------------------- alias_missing

HINT = chunk("h", "报账 即 报销 的 口语 说法", title="术语", doc_id="glossary", ordinal=0)


def test_query_term_absent_from_gold_with_a_synonym_in_its_heading_is_alias_missing() -> None:
    ctx = FakeContext([GOLD, OTHER, HINT])
    trace = make_trace(
        "报账 流程", routes={"bm25_raw": ["h", "a"], "dense_raw": ["a"]}, rerank_input=["h"], final=["h"]
    )
    found = run_rules(ctx, "报账 流程", replay=trace)
    assert found[0].label == "alias_missing"
    assert "proposed alias: 报账 → 报销" in found[0].evidence
    assert found[0].counterfactuals[0] == "alias_added"


def test_a_tokenizer_mis_split_is_never_an_alias_term() -> None:
    # 能设 is jieba's HMM gluing the modal 能 to 设 (最长能设多少天): not a word, so no pair, even
    # though it shares 能 with the heading term 功能.
    gold = chunk("g", "委托 期限 最长 三十 天", title="功能", doc_id="release", ordinal=0)
    ctx = FakeContext([gold, OTHER])
    ctx.not_in_dictionary = {"能设"}
    trace = make_trace("委托 最长 能设", routes={"bm25_raw": ["a"]}, final=["a"])
    facts = collect_facts(ctx, "委托 最长 能设", replay=trace, logged=None, gold=["g"])
    assert facts.alias_pairs == []
    assert "alias_missing" not in labels(run_rules(ctx, "委托 最长 能设", replay=trace))


def test_a_coined_term_outside_the_dictionary_can_still_be_an_alias() -> None:
    ctx = FakeContext([GOLD, OTHER, HINT])
    ctx.not_in_dictionary = {"报账"}  # an HMM guess that is a real word: no function word at its ends
    trace = make_trace(
        "报账 流程", routes={"bm25_raw": ["h", "a"], "dense_raw": ["a"]}, rerank_input=["h"], final=["h"]
    )
    assert run_rules(ctx, "报账 流程", replay=trace)[0].label == "alias_missing"


def test_a_query_term_the_kb_already_uses_is_not_an_alias_gap() -> None:
    # The KB says 报账 in a chunk that does not name it as 报销: the term is there, an alias is not missing.
    plain = chunk("p", "报账 系统 维护 通知", title="通知", doc_id="notice", ordinal=0)
    ctx = FakeContext([GOLD, OTHER, HINT, plain])
    trace = make_trace(
        "报账 流程", routes={"bm25_raw": ["h", "a"], "dense_raw": ["a"]}, rerank_input=["h"], final=["h"]
    )
    facts = collect_facts(ctx, "报账 流程", replay=trace, logged=None, gold=["g"])
    assert [p.term for p in facts.alias_pairs] == []


def test_near_miss_alias_already_applied_by_the_rewrite_is_not_alias_missing() -> None:
    ctx = FakeContext([GOLD, OTHER, HINT])
    trace = make_trace(
        "报账 流程",
        routes={"bm25_raw": ["h", "a"], "dense_raw": ["a"]},
        rerank_input=["h"],
        final=["h"],
        aliases={"报账": ["报销"]},
    )
    assert "alias_missing" not in labels(run_rules(ctx, "报账 流程", replay=trace))


def test_a_heading_term_without_any_synonym_source_is_not_proposed() -> None:
    ticket = chunk("g", "提交 服务请求 后 查看 进度", title="服务请求 进度", doc_id="it", ordinal=0)
    ctx = FakeContext([ticket, OTHER])
    found = run_rules(ctx, "工单 状态", replay=lost_trace("工单 状态"))
    assert "alias_missing" not in labels(found)


# ---------------------------------------------------------------- bm25_miss / dense_drift


def test_lexical_routes_missing_gold_that_dense_finds_is_bm25_miss() -> None:
    ctx = FakeContext([GOLD, OTHER])
    found = run_rules(ctx, "差旅 报销", replay=lost_trace("差旅 报销", bm25_raw=["a"], dense_raw=["a", "g"]))
    assert found[0].label == "bm25_miss" and "rank 2" in found[0].evidence[0]


def test_near_miss_bm25_finding_gold_is_not_bm25_miss() -> None:
    ctx = FakeContext([GOLD, OTHER])
    found = run_rules(
        ctx, "差旅 报销", replay=lost_trace("差旅 报销", bm25_raw=["a", "g"], dense_raw=["a", "g"])
    )
    assert "bm25_miss" not in labels(found)


def test_dense_routes_missing_gold_that_bm25_finds_is_dense_drift() -> None:
    ctx = FakeContext([GOLD, OTHER])
    found = run_rules(ctx, "差旅 报销", replay=lost_trace("差旅 报销", bm25_raw=["a", "g"], dense_raw=["a"]))
    assert found[0].label == "dense_drift"


def test_dense_top_hits_that_are_generic_chunks_is_dense_drift() -> None:
    ctx = FakeContext([GOLD, OTHER, GENERIC])
    found = run_rules(ctx, "差旅 报销", replay=lost_trace("差旅 报销", bm25_raw=["a"], dense_raw=["b", "a"]))
    assert found[0].label == "dense_drift" and "generic" in found[0].evidence[0]


def test_near_miss_dense_finding_gold_is_not_dense_drift() -> None:
    ctx = FakeContext([GOLD, OTHER])
    found = run_rules(ctx, "差旅 报销", replay=lost_trace("差旅 报销", bm25_raw=["a"], dense_raw=["g"]))
    assert "dense_drift" not in labels(found)


# ---------------------------------------------------------------- rerank_error / generation_error


def test_gold_in_rerank_input_cut_from_final_is_rerank_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace(
        "差旅 报销", routes={"bm25_raw": ["g", "a"], "dense_raw": ["g"]}, reranked=["a", "g"], final=["a"]
    )
    found = run_rules(ctx, "差旅 报销", replay=trace)
    assert labels(found) == ["rerank_error"]
    assert "entered the reranker at position 1 and came out at rank 2" in found[0].evidence[0]


def test_gold_in_final_context_is_generation_error_not_rerank_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace("差旅 报销", routes={"bm25_raw": ["g", "a"]}, final=["a", "g"])
    found = run_rules(ctx, "差旅 报销", replay=trace)
    assert labels(found) == ["generation_error"] and "g at rank 2" in found[0].evidence[0]


def test_near_miss_gold_cut_before_the_reranker_is_not_generation_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    found = run_rules(ctx, "差旅 报销", replay=lost_trace("差旅 报销", bm25_raw=["a", "g"], dense_raw=["g"]))
    assert "generation_error" not in labels(found) and "rerank_error" not in labels(found)


# ---------------------------------------------------------------- no_answer_in_kb


def test_no_gold_and_nothing_relevant_is_no_answer_in_kb() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace("停车 补贴", routes={"bm25_raw": ["a"]}, final=["a"])
    found = run_rules(ctx, "停车 补贴", replay=trace, gold=[])
    assert found[0].label == "no_answer_in_kb" and found[0].confidence == 0.8


def test_near_miss_no_gold_but_a_final_chunk_carries_the_query_is_not_no_answer() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace("差旅 报销", routes={"bm25_raw": ["g"]}, final=["g"])
    assert "no_answer_in_kb" not in labels(run_rules(ctx, "差旅 报销", replay=trace, gold=[]))


# ---------------------------------------------------------------- precedence


def test_first_upstream_failure_wins_index_over_rerank() -> None:
    ctx = FakeContext([GOLD, OTHER], indexed={"g": {"bm25": GOLD.content_hash, "dense": None}})
    trace = make_trace("差旅 报销", routes={"bm25_raw": ["g", "a"]}, reranked=["a", "g"], final=["a"])
    assert labels(run_rules(ctx, "差旅 报销", replay=trace)) == ["index_stale", "rerank_error"]


def test_first_upstream_failure_wins_rewrite_over_alias_and_bm25() -> None:
    ctx = FakeContext([GOLD, OTHER, HINT])
    trace = make_trace(
        "报账 流程",
        routes={"bm25_raw": ["h"], "dense_raw": ["g"], "bm25_rewritten": ["a"], "dense_rewritten": ["a"]},
        rewritten="报账 会议室",
        rerank_input=["h"],
        final=["h"],
    )
    found = labels(run_rules(ctx, "报账 流程", replay=trace))
    assert found[:3] == ["rewrite_error", "alias_missing", "bm25_miss"]


def test_unknown_gold_gives_no_retrieval_label() -> None:
    ctx = FakeContext([GOLD, OTHER])
    trace = make_trace("差旅 报销", routes={"bm25_raw": ["g"]}, final=["g"])
    assert run_rules(ctx, "差旅 报销", replay=trace, gold=None) == []


def test_no_answer_in_kb_says_which_words_did_not_veto() -> None:
    # Not refused, and lexical support left out a pasted message's words and markup: diagnose says
    # they were not read as names (the veto's why-not); a refused run gives its reason instead.
    ctx = FakeContext([GOLD, OTHER])
    support = LexicalSupport(
        score=1.0, term_share=1.0, ordinary_words=["connection", "refused"], markup=["br"]
    )
    trace = make_trace("停车 补贴 connection refused", routes={"bm25_raw": ["a"]}, final=["a"])
    trace = trace.model_copy(update={"lexical_support": support})
    found = run_rules(ctx, "停车 补贴 connection refused", replay=trace, gold=[])
    assert found[0].label == "no_answer_in_kb" and found[0].evidence[-1] == (
        "the pipeline did not refuse: it read connection, refused as ordinary English words (common "
        "English in a run of Latin words) and br as markup, not as names the KB never mentions"
    )
    refused = trace.model_copy(update={"refused": True, "refusal_reason": "the KB never mentions x"})
    evidence = run_rules(ctx, "停车 补贴 connection refused", replay=refused, gold=[])[0].evidence
    assert evidence[-1] == "the pipeline refused (the KB never mentions x)"
