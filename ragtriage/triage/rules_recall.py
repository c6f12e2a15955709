"""Root-cause rules for recall and rerank: BM25 miss, dense drift, rerank error, and the fallback
that blames the recall family which ranked gold worse."""

from __future__ import annotations

from ragtriage.triage.facts import Facts, covered
from ragtriage.triage.rules_common import (
    RELEVANT_COVERAGE,
    WEAK_COVERAGE,
    Finding,
    gold_lost,
    recall_lost,
    route_split,
    short_ids,
    words,
)


def rule_bm25_miss(facts: Facts) -> Finding | None:
    """Lexical routes miss gold while a dense route finds it."""
    if not gold_lost(facts) or not recall_lost(facts):
        return None
    lexical_ran, lexical_rank, _, dense_rank = route_split(facts)
    if lexical_ran and lexical_rank is None and dense_rank is not None:
        return Finding(
            label="bm25_miss",
            confidence=0.7,
            evidence=[f"BM25 routes miss gold; dense routes find it at rank {dense_rank}"],
            counterfactuals=["larger_k", "alias_added"],
        )
    return None


def rule_dense_drift(facts: Facts) -> Finding | None:
    """Dense routes miss gold while BM25 finds it, or dense top hits are generic chunks."""
    if not gold_lost(facts) or facts.primary is None or not recall_lost(facts):
        return None
    _, lexical_rank, dense_ran, dense_rank = route_split(facts)
    if dense_ran and dense_rank is None and lexical_rank is not None:
        return Finding(
            label="dense_drift",
            confidence=0.7,
            evidence=[f"dense routes miss gold; BM25 finds it at rank {lexical_rank}"],
            counterfactuals=["larger_k", "rewrite_off"],
        )
    terms = facts.terms
    if dense_ran and terms and len(covered(terms, facts.gold_text)) / len(terms) >= RELEVANT_COVERAGE:
        top = [hit.chunk_id for r in facts.primary.routes if r.kind == "dense" for hit in r.hits[:3]]
        texts = {c: facts.candidate_texts[c] for c in dict.fromkeys(top) if c in facts.candidate_texts}
        generic = [c for c, text in texts.items() if len(covered(terms, text)) / len(terms) < WEAK_COVERAGE]
        if texts and len(generic) == len(texts) and (dense_rank is None or dense_rank > 3):
            return Finding(
                label="dense_drift",
                confidence=0.55,
                evidence=[
                    f"dense top hits {short_ids(generic)} carry almost none of the key terms ({words(terms)}) "
                    "(generic chunks)",
                    f"gold carries them; dense ranks gold {'nowhere' if dense_rank is None else dense_rank}",
                ],
                counterfactuals=["larger_k", "rewrite_off"],
            )
    return None


def rule_rerank_error(facts: Facts) -> Finding | None:
    """Gold was in the reranker's input and cut from its output (the final top N)."""
    journey = facts.primary_journey
    if not gold_lost(facts) or journey is None or facts.primary is None:
        return None
    for stages in journey.gold:
        entered = stages.rerank_input if "rerank_input" in journey.stages else stages.reranked
        if entered is None:
            continue
        where = f"at rank {stages.reranked}" if stages.reranked is not None else "not at all"
        return Finding(
            label="rerank_error",
            confidence=0.8,
            evidence=[
                f"gold {stages.chunk_id} entered the reranker at position {entered} and came out {where}; "
                f"the final context keeps {facts.top_n} (rerank: {facts.primary.rerank_mode})"
            ],
            counterfactuals=["rerank_off"],
        )
    return None


def rule_fallback(facts: Facts) -> Finding | None:
    """Gold lost and no specific rule fired: blame the recall family that ranked gold worse."""
    if not gold_lost(facts):
        return None
    _, lexical_rank, _, dense_rank = route_split(facts)
    lexical_worse = lexical_rank is None or (dense_rank is not None and lexical_rank > dense_rank)
    label = "bm25_miss" if lexical_worse else "dense_drift"
    journey = facts.primary_journey
    drop = journey.first_drop if journey is not None else None
    return Finding(
        label=label,
        confidence=0.3,
        evidence=[
            f"gold dropped out at stage {drop}; best BM25 rank {lexical_rank or 'none'}, "
            f"best dense rank {dense_rank or 'none'}",
            "no more specific cause found; try the larger-k replay",
        ],
        counterfactuals=["larger_k"],
    )
