"""Counterfactual orchestration with a fake `run`: which replays run, their options, and confirmation."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ragtriage.pipeline.types import RunOptions, Trace
from ragtriage.triage.counterfactual import describe_ranks
from ragtriage.triage.diagnose import diagnose
from tests.unit.triage_fakes import FakeContext, chunk, make_trace

GOLD = chunk("g", "差旅 报销 流程 需要 发票 原件", title="报销 指南", doc_id="travel", ordinal=1)
OTHER = chunk("a", "会议室 预订 规则", title="会议室", doc_id="rooms", ordinal=0)
HINT = chunk("h", "报账 即 报销 的 口语 说法", title="术语", doc_id="glossary", ordinal=0)
QUERY = "报账 流程"


def alias_run(query: str, options: RunOptions) -> Trace:
    """The pipeline finds gold only once 报账 → 报销 is an alias."""
    if "报销" in options.extra_aliases.get("报账", []):
        return make_trace(query, routes={"bm25_raw": ["g", "h"]}, final=["g", "h"])
    return make_trace(
        query, routes={"bm25_raw": ["h", "a"], "dense_raw": ["a"]}, rerank_input=["h"], final=["h"]
    )


def test_alias_case_runs_only_relevant_replays_and_is_confirmed_by_alias_added() -> None:
    ctx = FakeContext([GOLD, OTHER, HINT], run=alias_run)
    diagnosis = diagnose(ctx, QUERY, gold=["g"])
    assert diagnosis.suggestion.label == "alias_missing"
    assert diagnosis.suggestion.confirmed_by == "alias_added"
    by_name = {r.name: r for r in diagnosis.counterfactuals}
    assert by_name["alias_added"].improves and by_name["alias_added"].gold_final_ranks == {"g": 1}
    assert by_name["alias_added"].options == {"extra_aliases": {"报账": ["报销"]}}
    assert not by_name["current_index"].available  # no logged request
    # The baseline replay plus one replay per pipeline counterfactual, nothing for labels that did not fire.
    assert "rerank_off" not in by_name and "rewrite_off" not in by_name
    assert len(ctx.runs) == 1 + sum(1 for r in diagnosis.counterfactuals if r.options)
    assert diagnosis.journeys["replay"].gold[0].dropped_at == "routes"


def test_unconfirmed_suggestion_loses_confidence() -> None:
    def never(query: str, options: RunOptions) -> Trace:
        return make_trace(
            query, routes={"bm25_raw": ["h", "a"], "dense_raw": ["a"]}, rerank_input=["h"], final=["h"]
        )

    confirmed = diagnose(FakeContext([GOLD, OTHER, HINT], run=alias_run), QUERY, gold=["g"])
    refuted = diagnose(FakeContext([GOLD, OTHER, HINT], run=never), QUERY, gold=["g"])
    assert refuted.suggestion.label == "alias_missing" and refuted.suggestion.confirmed_by is None
    assert refuted.suggestion.confidence < confirmed.suggestion.confidence
    assert any(line.startswith("not confirmed") for line in refuted.suggestion.evidence)


def test_rerank_case_uses_rerank_off_and_larger_k_multiplies_the_settings() -> None:
    seen: list[RunOptions] = []

    def run(query: str, options: RunOptions) -> Trace:
        seen.append(options)
        if options.rerank == "off":
            return make_trace(query, routes={"bm25_raw": ["g", "a"]}, final=["g", "a"])
        return make_trace(query, routes={"bm25_raw": ["g", "a"]}, reranked=["a", "g"], final=["a"])

    diagnosis = diagnose(FakeContext([GOLD, OTHER], run=run), "差旅 报销", gold=["g"])
    assert diagnosis.suggestion.label == "rerank_error"
    assert diagnosis.suggestion.confirmed_by == "rerank_off"
    assert [r.name for r in diagnosis.counterfactuals] == ["rerank_off"]


def test_larger_k_options_and_llm_rewrite_unavailable_without_llm() -> None:
    from ragtriage.triage.counterfactual import run_counterfactuals
    from ragtriage.triage.facts import collect_facts

    ctx = FakeContext([GOLD, OTHER], run=lambda q, o: make_trace(q, routes={"bm25_raw": ["a"]}, final=["a"]))
    baseline = make_trace("差旅 报销", routes={"bm25_raw": ["a"]}, final=["a"])
    facts = collect_facts(ctx, "差旅 报销", logged=None, replay=baseline, gold=["g"])
    results = run_counterfactuals(ctx, facts, ["llm_rewrite", "larger_k", "rewrite_off"], baseline)
    by_name = {r.name: r for r in results}
    assert by_name["larger_k"].options == {"bm25_k": 50, "dense_k": 50, "candidate_pool": 150}
    assert by_name["rewrite_off"].options == {"rewrite_mode": "off"}
    assert not by_name["llm_rewrite"].available and "no LLM" in (by_name["llm_rewrite"].reason or "")
    assert not any(r.improves for r in results)


def test_neighbours_merged_simulation_confirms_a_split_answer() -> None:
    leave = chunk("g", "年假 申请 流程", title="休假制度", doc_id="leave", ordinal=1)
    nxt = chunk("n", "天数 按 工龄 计算", title="休假制度", doc_id="leave", ordinal=2)

    def similarity(query: str, texts: Sequence[str]) -> list[float]:
        return [sum(term in text for term in query.split()) / 3 for text in texts]

    def run(query: str, options: RunOptions) -> Trace:
        return make_trace(query, routes={"bm25_raw": ["a"]}, final=["a"])

    ctx = FakeContext([leave, nxt, OTHER], run=run, similarity=similarity)
    diagnosis = diagnose(ctx, "年假 天数 工龄", gold=["g"])
    assert diagnosis.suggestion.label == "chunk_split_bad"
    assert diagnosis.suggestion.confirmed_by == "neighbours_merged"
    merged = next(r for r in diagnosis.counterfactuals if r.name == "neighbours_merged")
    assert merged.reaches_final is None
    assert merged.detail == [
        "g+n: merged covers 3/3 terms (parts 1/3, 2/3)"
    ]  # the terms decide: no embedding


def test_neighbours_merged_falls_back_to_embedder_similarity_when_terms_do_not_decide() -> None:
    from ragtriage.triage.counterfactual import merged_match
    from ragtriage.triage.facts import collect_facts

    leave = chunk("g", "年假 申请 流程", title="休假制度", doc_id="leave", ordinal=1)
    nxt = chunk("n", "年假 天数 说明", title="休假制度", doc_id="leave", ordinal=2)
    ctx = FakeContext([leave, nxt], similarity=lambda q, texts: [0.80, 0.82, 0.90][: len(texts)])
    baseline = make_trace("年假 天数", routes={"bm25_raw": ["n"]}, final=["n"])
    facts = collect_facts(ctx, "年假 天数", logged=None, replay=baseline, gold=["g"])
    result = merged_match(ctx, facts)
    assert result.improves
    assert result.detail == [
        "g+n: merged covers 2/2 terms (parts 1/2, 2/2); similarity 0.900 (parts 0.800, 0.820)"
    ]


def test_logged_request_replayed_against_current_index_confirms_index_stale() -> None:
    logged = make_trace("差旅 报销", routes={"bm25": ["old-1", "a"]}, final=["old-1", "a"], unknown=["old-1"])
    ctx = FakeContext([GOLD, OTHER], run=lambda q, o: make_trace(q, routes={"bm25_raw": ["g"]}, final=["g"]))
    diagnosis = diagnose(ctx, "差旅 报销", logged=logged, gold=["g"], request_id="r1")
    assert diagnosis.suggestion.label == "index_stale"
    assert diagnosis.suggestion.confirmed_by == "current_index"
    assert set(diagnosis.journeys) == {"logged", "replay"}
    assert diagnosis.journeys["logged"].gold[0].dropped_at == "routes"
    assert diagnosis.journeys["replay"].reached_final


def test_unknown_gold_says_what_is_needed_and_offers_likely_chunks() -> None:
    ctx = FakeContext(
        [GOLD, OTHER, HINT],
        run=lambda q, o: make_trace(q, routes={"bm25_raw": ["a", "g", "h"]}, final=["a", "g", "h"]),
    )
    diagnosis = diagnose(ctx, "差旅 报销 原件", gold=None)
    assert diagnosis.needs is not None and "--gold" in diagnosis.needs.message
    assert [c.chunk_id for c in diagnosis.needs.likeliest] == ["g", "h"]
    assert diagnosis.needs.likeliest[0].overlap_terms == ["差旅", "报销", "原件"]
    assert diagnosis.counterfactuals == [] and len(ctx.runs) == 1


@pytest.mark.parametrize(
    "ranks, words",
    [
        ({}, "no gold"),
        ({"c1": 2, "c2": 4}, "gold c1 at final rank 2, c2 at final rank 4"),
        ({"c1": None}, "gold c1 not in the final context"),
        ({"c1": None, "c2": None, "c3": None}, "none of the 3 gold chunks in the final context"),
        (
            {"c1": 2, "c2": None, "c3": None, "c4": None},
            "gold c1 at final rank 2; 3 of 4 gold chunks not in the final context",
        ),
    ],
)
def test_gold_ranks_are_summarised_not_repeated_per_chunk(ranks: dict[str, int | None], words: str) -> None:
    """Any-of gold marks every chunk of a section: one line per missing chunk buried the one that counts."""
    assert describe_ranks(ranks) == words
