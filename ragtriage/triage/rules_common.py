"""What every root-cause rule shares: the `Finding` it returns and small readers of `Facts`.

The rules themselves live by label group in `rules_upstream.py` (index, chunking, rewrite, alias),
`rules_recall.py` (BM25, dense, rerank, fallback) and `rules_outcome.py` (generation, no answer,
label error); `suggest.py` orders them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ragtriage.config.settings import DEFAULT_LABELS
from ragtriage.pipeline.types import RouteResult
from ragtriage.triage.facts import Facts, gold_route_reach

#: The default root-cause labels (DESIGN.md), retrieval causes in pipeline order, then outcomes.
LABELS = tuple(DEFAULT_LABELS)
#: Below this share of key terms a chunk "does not carry" the query; at or above RELEVANT it does.
WEAK_COVERAGE = 0.34
RELEVANT_COVERAGE = 0.8


class Finding(BaseModel):
    """One rule's verdict: a label, how sure, why, and which counterfactuals could confirm it."""

    label: str
    confidence: float = Field(ge=0.0, le=1.0)
    evidence: list[str]
    counterfactuals: list[str] = Field(default_factory=list)


def gold_lost(facts: Facts) -> bool:
    """Gold is known and every gold chunk dropped out at a stage the primary trace recorded (not
    when one reached the final context, nor when it is in the last stage of a log without a final
    context: production never recorded where it went from there)."""
    journey = facts.primary_journey
    return bool(facts.gold_chunks) and journey is not None and journey.first_drop is not None


def route_ran(route: RouteResult) -> bool:
    """The route searched (it was not skipped as a duplicate of another route or for lack of an index)."""
    return not any(flag.startswith("skipped") for flag in route.flags)


def gold_fused_rank(facts: Facts) -> int | None:
    """Best fused rank of any gold chunk in the primary trace (None: not fused)."""
    journey = facts.primary_journey
    if journey is None:
        return None
    ranks = [g.fused for g in journey.gold if g.fused is not None]
    return min(ranks) if ranks else None


def recall_lost(facts: Facts) -> bool:
    """Recall is to blame: gold never reached the reranker, or was fused too low to make the final
    top N on its own (a gold chunk fused within the top N was lost by the rerank, not by recall)."""
    journey = facts.primary_journey
    if journey is not None and "rerank_input" in journey.stages:
        if all(g.rerank_input is None for g in journey.gold):
            return True
    rank = gold_fused_rank(facts)
    return rank is None or rank > facts.top_n


def short_ids(ids: list[str], limit: int = 5) -> str:
    """At most `limit` ids, comma-separated, with how many more were left out."""
    shown = ", ".join(ids[:limit])
    return shown + (f" (+{len(ids) - limit} more)" if len(ids) > limit else "")


def route_split(facts: Facts) -> tuple[bool, int | None, bool, int | None]:
    trace = facts.primary
    if trace is None:
        return False, None, False, None
    gold = facts.gold or []
    lexical_ran, lexical_rank = gold_route_reach(trace, gold, lambda r: r.kind == "bm25")
    dense_ran, dense_rank = gold_route_reach(trace, gold, lambda r: r.kind == "dense")
    return lexical_ran, lexical_rank, dense_ran, dense_rank


def words(terms: Sequence[str]) -> str:
    """Terms for a sentence: `审批, 委托` (never a Python list)."""
    return ", ".join(terms) if terms else "none"
