"""Counterfactual replays: the same query with one thing changed, to confirm a suggested root cause.

Each replay reports whether gold reaches the final top N and whether that is an improvement over
the baseline (the plain replay, or for `current_index` the logged request). Only the replays that
can confirm one of the candidate labels are run, which keeps a diagnosis under a second warm.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from ragtriage.pipeline.stage_loading import StageCannotTake
from ragtriage.pipeline.types import RunOptions, Trace
from ragtriage.triage.context import DiagnosisContext
from ragtriage.triage.facts import Facts, chunk_text, covered
from ragtriage.wording import plural_noun, quoted

#: Counterfactual name → what it changes (shown to the triager).
DESCRIPTIONS = {
    "current_index": "the logged request vs a replay against today's KB, index and configuration",
    "alias_added": "replay with the proposed alias pairs added to the dictionary",
    "rewrite_off": "replay with the rewrite turned off (rewritten routes search the normalised raw query)",
    "llm_rewrite": "replay with the other rewrite (LLM instead of rules, or rules instead of LLM)",
    "larger_k": "replay with 5× the hits per route and 5× the reranker's candidate pool",
    "rerank_off": "replay with the rerank stage off (final = fused order)",
    "neighbours_merged": "simulate each gold chunk merged with its neighbour; compare the match to each part",
}
#: Order in which counterfactuals are reported.
ORDER = tuple(DESCRIPTIONS)
LARGER_K_FACTOR = 5


class CounterfactualResult(BaseModel):
    """What one counterfactual changed and whether gold then reaches the final context."""

    name: str
    description: str
    available: bool = True
    reason: str | None = None
    """Why it could not run (e.g. no LLM configured, no alias pair proposed)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The `RunOptions` fields it set."""
    gold_final_ranks: dict[str, int | None] = Field(default_factory=dict)
    reaches_final: bool | None = None
    """None for simulations that do not run the pipeline."""
    baseline_reaches_final: bool | None = None
    improves: bool = False
    """True when it fixes the case: gold reaches the final top N and the baseline did not (or, for the
    merge simulation, the merged chunk matches the query better than either part)."""
    detail: list[str] = Field(default_factory=list)
    ms: float = 0.0


def describe_ranks(ranks: dict[str, int | None]) -> str:
    """`gold c1 at final rank 2; 3 of 4 gold chunks not in the final context` (words, not a dict):
    the gold chunks that made it by rank, the others counted once, not repeated per chunk."""
    if not ranks:
        return "no gold"
    found = [f"{chunk_id} at final rank {rank}" for chunk_id, rank in ranks.items() if rank is not None]
    missing = [chunk_id for chunk_id, rank in ranks.items() if rank is None]
    if not missing:
        return "gold " + ", ".join(found)
    if len(ranks) == 1:
        return f"gold {missing[0]} not in the final context"
    if not found:
        return f"none of the {len(ranks)} gold chunks in the final context"
    return f"gold {', '.join(found)}; {len(missing)} of {len(ranks)} gold chunks not in the final context"


def _final_ranks(trace: Trace, gold: Sequence[str]) -> dict[str, int | None]:
    return {g: (trace.final.index(g) + 1 if g in trace.final else None) for g in gold}


def _unavailable(name: str, reason: str) -> CounterfactualResult:
    return CounterfactualResult(name=name, description=DESCRIPTIONS[name], available=False, reason=reason)


def _options_for(name: str, ctx: DiagnosisContext, facts: Facts, baseline: Trace) -> RunOptions | str:
    """The run options of a pipeline counterfactual, or the reason it is not available."""
    settings = ctx.settings
    if name == "alias_added":
        if not facts.alias_pairs:
            return "no alias pair was proposed for this case"
        extra: dict[str, list[str]] = {}
        for pair in facts.alias_pairs:
            extra.setdefault(pair.term, []).append(pair.synonym)
        return RunOptions(extra_aliases=extra)
    if name == "rewrite_off":
        return RunOptions(rewrite_mode="off")
    if name == "llm_rewrite":
        if not settings.rewrite.llm.enabled or not settings.rewrite.llm.url:
            return "not available: no LLM rewrite configured (settings.rewrite.llm.enabled / url)"
        return RunOptions(rewrite_mode="rules" if baseline.rewrite.mode == "llm" else "llm")
    if name == "larger_k":
        retrieval = settings.retrieval
        return RunOptions(
            bm25_k=retrieval.bm25_k * LARGER_K_FACTOR,
            dense_k=retrieval.dense_k * LARGER_K_FACTOR,
            candidate_pool=retrieval.candidate_pool * LARGER_K_FACTOR,
        )
    if name == "rerank_off":
        return RunOptions(rerank="off")
    raise ValueError(f"unknown pipeline counterfactual {quoted(name)}; known: {', '.join(ORDER)}")


def _current_index(facts: Facts, baseline: Trace) -> CounterfactualResult:
    gold = facts.gold or []
    logged = facts.journeys.get("logged")
    if facts.logged is None or logged is None:
        return _unavailable("current_index", "no logged request to compare with")
    if not logged.final_logged and logged.first_drop is None:
        return _unavailable("current_index", "production logged no final context to compare with")
    ranks = _final_ranks(baseline, gold)
    reaches = any(rank is not None for rank in ranks.values())
    return CounterfactualResult(
        name="current_index",
        description=DESCRIPTIONS["current_index"],
        gold_final_ranks=ranks,
        reaches_final=reaches,
        baseline_reaches_final=logged.reached_final,
        improves=reaches and not logged.reached_final,
        detail=[
            f"logged final misses gold; replay: {describe_ranks(ranks)}"
            if reaches
            else "replay misses gold too"
        ],
    )


def merged_match(ctx: DiagnosisContext, facts: Facts) -> CounterfactualResult:
    """Simulate merging each gold chunk with each neighbour: term coverage and embedder similarity
    of the merged text against the query, compared with each part alone."""
    started = time.perf_counter()
    terms = facts.constraint_terms
    detail: list[str] = []
    improves = False
    embedded = False
    for chunk_id, neighbours in facts.neighbour_texts.items():
        gold_text = chunk_text(facts.gold_chunks[chunk_id])
        for neighbour_id, neighbour_text in neighbours.items():
            merged = gold_text + "\n" + neighbour_text
            parts = [len(covered(terms, gold_text)), len(covered(terms, neighbour_text))]
            merged_count = len(covered(terms, merged))
            line = (
                f"{chunk_id}+{neighbour_id}: merged covers {merged_count}/{len(terms)} terms "
                f"(parts {parts[0]}/{len(terms)}, {parts[1]}/{len(terms)})"
            )
            better = merged_count > max(parts)
            # Passage embedding is slow on CPU (a few per second): only pairs the terms cannot decide
            # are embedded, at most one pair per diagnosis.
            similarities = (
                None
                if better or embedded
                else ctx.similarity(facts.query, [gold_text, neighbour_text, merged])
            )
            if similarities:
                embedded = True
                line += (
                    f"; similarity {similarities[2]:.3f} (parts {similarities[0]:.3f}, {similarities[1]:.3f})"
                )
                better = similarities[2] > max(similarities[:2]) + 0.01
            improves = improves or better
            detail.append(line)
    if not detail:
        return _unavailable("neighbours_merged", "gold chunks have no neighbours in the KB")
    return CounterfactualResult(
        name="neighbours_merged",
        description=DESCRIPTIONS["neighbours_merged"],
        improves=improves,
        detail=detail,
        ms=(time.perf_counter() - started) * 1000,
    )


def run_counterfactuals(
    ctx: DiagnosisContext,
    facts: Facts,
    names: Sequence[str],
    baseline: Trace,
    *,
    should_stop: Callable[[], bool] | None = None,
) -> list[CounterfactualResult]:
    """Run the named counterfactuals (unknown names are a ValueError), in `ORDER`."""
    unknown = [n for n in names if n not in DESCRIPTIONS]
    if unknown:
        raise ValueError(
            f"unknown {plural_noun('counterfactual', len(unknown))} {', '.join(unknown)}; known: {', '.join(ORDER)}"
        )
    gold = facts.gold or []
    baseline_reaches = any(rank is not None for rank in _final_ranks(baseline, gold).values())
    results: list[CounterfactualResult] = []
    for name in [n for n in ORDER if n in names]:
        if should_stop is not None and should_stop():
            break
        if name == "current_index":
            results.append(_current_index(facts, baseline))
            continue
        if name == "neighbours_merged":
            results.append(merged_match(ctx, facts))
            continue
        options = _options_for(name, ctx, facts, baseline)
        if isinstance(options, str):
            results.append(_unavailable(name, options))
            continue
        started = time.perf_counter()
        as_of = baseline.run_options.as_of if baseline.run_options is not None else None
        if as_of is not None:
            # The same moment as the baseline replay (a logged request's time), so only one thing changes.
            options = options.model_copy(update={"as_of": as_of})
        try:
            trace = ctx.run(facts.query, options)
        except StageCannotTake as error:
            # A team stage that cannot take this change says so; it is never swapped for a built-in.
            results.append(_unavailable(name, str(error)))
            continue
        ranks = _final_ranks(trace, gold)
        reaches = any(rank is not None for rank in ranks.values())
        results.append(
            CounterfactualResult(
                name=name,
                description=DESCRIPTIONS[name],
                options=options.model_dump(exclude_defaults=True, exclude={"as_of"}),
                gold_final_ranks=ranks,
                reaches_final=reaches,
                baseline_reaches_final=baseline_reaches,
                improves=reaches and not baseline_reaches,
                detail=[
                    f"{describe_ranks(ranks)}; the unchanged replay "
                    f"{'reaches' if baseline_reaches else 'misses'} it"
                ],
                ms=(time.perf_counter() - started) * 1000,
            )
        )
    return results
