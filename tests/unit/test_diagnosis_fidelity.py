"""Diagnosis is honest about fidelity: a replayed stage that differs from the logged one is not
evidence against that stage; the logged list is, and the evidence says so and names the fidelity;
stale logged ids name the document they belong to."""

from __future__ import annotations

from ragtriage.pipeline.types import Trace
from ragtriage.triage.diagnose import diagnose
from ragtriage.triage.facts import collect_facts
from ragtriage.triage.rules import findings, recall_lost
from tests.unit.triage_fakes import FakeContext, chunk, make_trace

GOLD = chunk("g", "差旅 报销 流程 需要 发票 原件", title="报销 指南", doc_id="travel", ordinal=1)
OTHER = chunk("a", "会议室 预订 规则", title="会议室", doc_id="rooms", ordinal=0)
QUERY = "差旅 报销"


def _replay_where_only_the_raw_dense_route_finds_gold() -> Trace:
    """The replay the rewrite_error tests judge: the rewrite drifted (会议室), the rewritten routes
    and raw BM25 miss gold, and the raw query's dense route finds it at rank 1."""
    return make_trace(
        QUERY,
        routes={
            "bm25_raw": ["a"],
            "dense_raw": ["g", "a"],
            "bm25_rewritten": ["a"],
            "dense_rewritten": ["a"],
        },
        rewritten="差旅 报销 会议室",
        rerank_input=["a"],
        final=["a"],
    )


def test_a_diverged_raw_route_of_the_replay_is_not_evidence_of_a_rewrite_error() -> None:
    ctx = FakeContext([GOLD, OTHER])
    # Production's dense route missed gold; the replay's dense route finds it (it does not reproduce it).
    logged = make_trace(QUERY, routes={"bm25": ["a"], "dense": ["a"]}, rerank_input=["a"], final=["a"])
    replay = _replay_where_only_the_raw_dense_route_finds_gold()
    facts = collect_facts(ctx, QUERY, logged=logged, replay=replay, gold=["g"])
    assert (
        facts.fidelity is not None
        and facts.fidelity.diverged("dense")
        and not facts.fidelity.diverged("bm25")
    )
    found = findings(facts)
    rewrite = next((f for f in found if f.label == "rewrite_error"), None)
    assert rewrite is None, "raw reach is judged from the logged dense list, which misses gold"


def test_the_same_replay_when_it_reproduces_the_log_still_blames_the_rewrite() -> None:
    ctx = FakeContext([GOLD, OTHER])
    logged = make_trace(QUERY, routes={"bm25": ["a"], "dense": ["g", "a"]}, rerank_input=["a"], final=["a"])
    replay = _replay_where_only_the_raw_dense_route_finds_gold()
    result = diagnose(ctx, QUERY, logged=logged, replay=replay, gold=["g"], counterfactuals=False)
    assert result.suggestion.label == "rewrite_error"
    assert any(line.startswith("replay fidelity bm25 1/1 · dense 2/2") for line in result.suggestion.evidence)
    assert any("every logged stage reproduced" in line for line in result.suggestion.evidence)
    assert result.fidelity is not None and "dense 2/2" in result.fidelity


def test_evidence_says_which_blamed_stage_was_judged_from_the_logged_list() -> None:
    ctx = FakeContext([GOLD, OTHER])
    # Logged: BM25 finds gold at 1, dense misses it (dense_drift from the log). Replay: dense differs.
    logged = make_trace(
        QUERY, routes={"bm25": ["g"], "dense": ["a", "b"]}, fused=["a", "g"], rerank_input=["a"], final=["a"]
    )
    replay = make_trace(
        QUERY,
        routes={"bm25_raw": ["g"], "dense_raw": ["a", "c"]},
        fused=["a", "g"],
        rerank_input=["a"],
        final=["a"],
    )
    result = diagnose(ctx, QUERY, logged=logged, replay=replay, gold=["g"], counterfactuals=False)
    assert result.suggestion.label == "dense_drift"
    assert (
        "replayed dense differs from logged (overlap 1/2): judged from the logged list"
        in result.suggestion.evidence
    )


def test_a_query_without_a_logged_request_says_it_relies_on_the_replay() -> None:
    ctx = FakeContext([GOLD, OTHER])
    replay = make_trace(QUERY, routes={"bm25_raw": ["g"]}, final=["g"])
    result = diagnose(ctx, QUERY, replay=replay, gold=["g"], counterfactuals=False)
    assert result.suggestion.evidence[-1] == "no logged request: judged from the replay alone"
    assert result.fidelity is None


def test_stale_logged_ids_name_their_document_deleted_rows_included() -> None:
    old = chunk("travel#old1", "差旅 报销 旧版", title="报销 指南", doc_id="travel", ordinal=1)
    deleted = old.model_copy(update={"status": "deleted"})
    ctx = FakeContext([GOLD, OTHER, deleted])
    logged = make_trace(QUERY, routes={"bm25": ["travel#old1", "a"]}, final=["travel#old1", "a"])
    replay = make_trace(QUERY, routes={"bm25_raw": ["g", "a"]}, final=["g", "a"])
    facts = collect_facts(ctx, QUERY, logged=logged, replay=replay, gold=["g"])
    assert facts.fidelity is not None and facts.fidelity.stale_documents == {"travel": ["travel#old1"]}
    top = findings(facts)[0]
    assert top.label == "index_stale" and top.confidence == 0.85
    assert "logged chunk id travel#old1 belongs to an older version of document travel" in "\n".join(
        top.evidence
    )
    assert any("the gold's own document travel" in line for line in top.evidence)


def test_foreign_unknown_ids_are_said_to_be_unknown() -> None:
    ctx = FakeContext([GOLD, OTHER])
    foreign = "7d1c5c0e-0a9b-4f0e-8d43-2f4a1b3c5d6e"
    logged = make_trace(QUERY, routes={"bm25": [foreign, "a"]}, final=[foreign, "a"], unknown=[foreign])
    replay = make_trace(QUERY, routes={"bm25_raw": ["g"]}, final=["g"])
    top = findings(collect_facts(ctx, QUERY, logged=logged, replay=replay, gold=["g"]))[0]
    assert top.label == "index_stale"
    assert any(
        "unknown to the KB" in line and foreign in line and "no document can be named" in line
        for line in top.evidence
    )


def test_a_replaced_term_reads_in_the_singular() -> None:
    ctx = FakeContext([GOLD, OTHER])
    # The over-broad entry 报销 → 费用 replaced the user's term with one the gold never uses.
    replay = make_trace(
        QUERY,
        routes={"bm25_raw": ["a"], "bm25_rewritten": ["a"]},
        rewritten="差旅 费用",
        aliases={"报销": ["费用"]},
        final=["a"],
    )
    facts = collect_facts(ctx, QUERY, logged=None, replay=replay, gold=["g"])
    rewrite = next(f for f in findings(facts) if f.label == "rewrite_error")
    assert (
        "the rewrite replaced the query's own term (报销 → 费用) with an alias the gold does not contain"
        in rewrite.evidence[-1]
    )


def test_the_top_n_of_a_logged_request_is_its_own_final_context_not_the_settings() -> None:
    # Production's reranker kept 3 (reranker.top_k = 3); the settings' [rerank] top_n is 6. Ids are UUIDs.
    ids = [f"0000000{i}-5f0e-4c1a-9b7d-3e2f1a0b9c8d" for i in range(1, 9)]
    chunks = [
        chunk(c, f"会议室 预订 规则 {i}", title="会议室", doc_id="rooms", ordinal=i)
        for i, c in enumerate(ids)
    ]
    gold = chunk("g", "差旅 报销 流程 需要 发票 原件", title="报销 指南", doc_id="travel", ordinal=1)
    ctx = FakeContext([gold, *chunks])
    assert ctx.settings.rerank.top_n == 6
    # Gold fused at 2, inside production's 3: the reranker cut it.
    logged = make_trace(QUERY, routes={"bm25": [ids[0], "g", *ids[1:5]]}, reranked=ids[:3], final=ids[:3])
    facts = collect_facts(ctx, QUERY, logged=logged, replay=None, gold=["g"])
    assert facts.top_n == 3
    top = findings(facts)[0]
    assert top.label == "rerank_error"
    assert top.evidence[0].endswith("the final context keeps 3 (rerank: features-only)")
    # Gold fused at 5: inside the settings' 6 but outside production's 3, so the fused rank alone did
    # not carry it into the final context (recall is to blame as much as the rerank).
    logged = make_trace(QUERY, routes={"bm25": [*ids[:4], "g", *ids[4:6]]}, reranked=ids[:3], final=ids[:3])
    assert recall_lost(collect_facts(ctx, QUERY, logged=logged, replay=None, gold=["g"]))
    # A replay alone keeps the configured top N.
    replay = make_trace(QUERY, routes={"bm25_raw": ids[:4]}, final=ids[:2])
    assert collect_facts(ctx, QUERY, logged=None, replay=replay, gold=["g"]).top_n == 6
