"""Rule-based root-cause suggestion: deterministic, no LLM, first upstream failure wins.

Each rule reads `Facts` and returns a `Finding` (label, confidence, evidence a triager can read, and
the counterfactual replays that can confirm it) or None. `RULES` lists them in pipeline order: the
stages before recall ranks anything (index, chunking, rewrite, alias dictionary), then recall and
rerank, then the outcomes after retrieval (the label itself, generation, no answer in the KB). The
first finding is the suggestion and the rest are alternatives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from ragtriage.config.settings import DEFAULT_LABELS
from ragtriage.pipeline.types import LexicalSupport, RouteResult, Trace
from ragtriage.triage.facts import (
    Facts,
    chunk_text,
    coverage,
    covered,
    gold_route_reach,
    is_raw_route,
    normalize_text,
    stage_note,
)
from ragtriage.wording import plural_noun

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
    """(a lexical route ran, its best gold rank, a dense route ran, its best gold rank)."""
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


def rule_label_error_unknown(facts: Facts) -> Finding | None:
    """Gold ids the KB does not know, or knows as deleted (never indexed, so no replay can find
    them): the label itself is wrong (or names another KB or a retired chunk). When production
    still served a deleted gold chunk in the logged request, its index is older than the KB:
    `index_stale`."""
    deleted = [c for c, chunk in facts.gold_chunks.items() if chunk.status == "deleted"]
    if not facts.unknown_gold and not deleted:
        return None
    evidence = []
    if facts.unknown_gold:
        evidence.append(
            f"gold chunk {'id' if len(facts.unknown_gold) == 1 else 'ids'} unknown to the KB: "
            f"{short_ids(facts.unknown_gold)}; re-mark gold from `kb chunks`"
        )
    if not deleted:
        return Finding(label="label_error", confidence=0.9, evidence=evidence)
    evidence += _deleted_gold_lines(facts, deleted)
    served = _served_by_production(facts, deleted)
    if served:
        evidence.insert(
            0,
            f"production still served deleted gold {served} in the logged request: its index is "
            "older than the KB; re-index production, or re-import the KB if the KB is the one behind",
        )
        return Finding(
            label="index_stale", confidence=0.85, evidence=evidence, counterfactuals=["current_index"]
        )
    return Finding(label="label_error", confidence=0.9, evidence=evidence)


def _deleted_gold_lines(facts: Facts, deleted: list[str]) -> list[str]:
    """Why each deleted gold chunk is deleted and what to mark instead, then the re-promotion."""
    known = {problem.chunk_id: problem for problem in facts.deleted_gold}
    lines = []
    for chunk_id in deleted:
        problem = known.get(chunk_id)
        if problem is not None:
            lines.append(f"gold {problem.reason}; {problem.fix}")
        else:
            doc_id = facts.gold_chunks[chunk_id].doc_id
            lines.append(
                f"gold chunk {chunk_id} is deleted in the KB, so no index returns it; re-mark gold "
                f"from `ragtriage kb chunks --doc {doc_id}`, or re-import the chunk if production still "
                "serves it"
            )
    lines.append(
        "the gold was marked before the KB dropped it: re-mark it (`ragtriage label REQUEST_ID LABEL "
        "--gold CHUNK_ID`) and re-promote the case (`ragtriage promote REQUEST_ID`) so the eval set "
        "scores a live chunk"
    )
    return lines


def _served_by_production(facts: Facts, deleted: list[str]) -> str:
    """`chunk (final rank 1)`, … for the deleted gold chunks the logged request carried ("" for none)."""
    journey = facts.journeys.get("logged")
    if journey is None:
        return ""
    served = []
    for chunk_id in deleted:
        stages = journey.for_chunk(chunk_id)
        if stages is None or stages.last_seen is None:
            continue
        stage = "final" if stages.final is not None else stages.last_seen
        served.append(f"{chunk_id} ({stage.replace('_', ' ')} rank {stages.stage_rank(stage)})")
    return ", ".join(served)


def rule_index_stale(facts: Facts) -> Finding | None:
    """Gold missing from an index, indexed hash ≠ KB hash, or logged chunk ids the KB does not know."""
    if facts.gold is not None and not gold_lost(facts):
        return None
    evidence: list[str] = []
    for chunk_id, hashes in facts.indexed.items():
        if facts.gold_chunks[chunk_id].status == "deleted":
            continue  # never indexed on purpose: rule_label_error_unknown says so
        kb_hash = facts.gold_chunks[chunk_id].content_hash
        for index_name, label in (("bm25", "BM25"), ("dense", "dense")):
            held = hashes.get(index_name)
            if held is None:
                evidence.append(f"gold {chunk_id} is missing from the {label} index")
            elif held != kb_hash:
                evidence.append(
                    f"{label} index holds gold {chunk_id} with content hash {held[:10]}, the KB has "
                    f"{kb_hash[:10]}: indexed content is older than the KB"
                )
    if evidence:
        return Finding(
            label="index_stale", confidence=0.95, evidence=evidence, counterfactuals=["current_index"]
        )
    replay = facts.journeys.get("replay")
    stale_docs = facts.fidelity.stale_documents if facts.fidelity is not None else {}
    gold_docs = {chunk.doc_id for chunk in facts.gold_chunks.values()}
    stale_gold_docs = sorted(gold_docs.intersection(stale_docs))
    # Unknown logged ids only explain the loss when today's index, which knows them, finds gold, or
    # when they are an older version of the gold's own document: a stale neighbour chunk in the lists
    # of a query that fails anyway is incidental.
    reaches = replay is not None and replay.reached_final
    if facts.unknown_logged and (facts.gold is None or reaches or stale_gold_docs):
        evidence += _stale_lines(facts, stale_docs)
        confidence = 0.6
        if stale_gold_docs:
            confidence = 0.85
            evidence.append(
                f"the gold's own document {', '.join(stale_gold_docs)} was served in an older version"
            )
        if reaches:
            confidence = max(confidence, 0.8)
            evidence.append("the replay against the current index reaches gold in the final context")
        return Finding(
            label="index_stale", confidence=confidence, evidence=evidence, counterfactuals=["current_index"]
        )
    return None


def _stale_lines(facts: Facts, stale_docs: dict[str, list[str]]) -> list[str]:
    """Which documents the unknown logged ids belong to, and which ids no document can be named for."""
    lines = [
        f"logged chunk {plural_noun('id', len(ids))} {short_ids(ids)} "
        f"{'belongs' if len(ids) == 1 else 'belong'} to an older version of document {doc_id}, whose "
        "current version has other ids: production searched a stale index"
        for doc_id, ids in sorted(stale_docs.items())
    ]
    named = {c for ids in stale_docs.values() for c in ids}
    unknown = [c for c in facts.unknown_logged if c not in named]
    if unknown:
        lines.append(
            f"{len(unknown)} logged chunk {'id is' if len(unknown) == 1 else 'ids are'} unknown to the KB: "
            f"{short_ids(unknown)} (no document can be named: another KB revision or another KB)"
        )
    return lines


def _split_gold_missing(facts: Facts) -> Finding | None:
    """Gold is two adjacent chunks (the answer spans them) and the final context lacks one of them."""
    trace = facts.primary
    if trace is None or len(facts.gold_chunks) < 2:
        return None
    for chunk_id, neighbours in facts.neighbour_texts.items():
        for neighbour_id in neighbours:
            if neighbour_id not in facts.gold_chunks:
                continue
            pair = [chunk_id, neighbour_id]
            missing = [c for c in pair if c not in trace.final]
            if missing:
                return Finding(
                    label="chunk_split_bad",
                    confidence=0.75,
                    evidence=[
                        f"gold is the adjacent chunks {chunk_id} and {neighbour_id}: the answer is split "
                        "across them",
                        f"the final context lacks {short_ids(missing)}, so the answer is incomplete",
                    ],
                    counterfactuals=["neighbours_merged"],
                )
    return None


def rule_chunk_split_bad(facts: Facts) -> Finding | None:
    """The constraints are covered only by a gold chunk and its neighbour together, never by one chunk."""
    split = _split_gold_missing(facts)
    if split is not None:
        return split
    terms = facts.constraint_terms
    if not gold_lost(facts) or len(terms) < 2:
        return None
    if any(len(covered(terms, text)) == len(terms) for text in facts.candidate_texts.values()):
        return None
    for chunk_id, neighbours in facts.neighbour_texts.items():
        gold_terms = covered(terms, chunk_text(facts.gold_chunks[chunk_id]))
        if len(gold_terms) == len(terms):
            return None
        for neighbour_id, text in neighbours.items():
            neighbour_terms = covered(terms, text)
            if len(neighbour_terms) < len(terms) and set(gold_terms) | set(neighbour_terms) == set(terms):
                return Finding(
                    label="chunk_split_bad",
                    confidence=0.8 if facts.must_have else 0.7,
                    evidence=[
                        f"no single chunk covers all of {words(terms)}",
                        f"gold {chunk_id} covers {words(gold_terms)}; "
                        f"its neighbour {neighbour_id} covers {words(neighbour_terms)}",
                        "together the adjacent chunks cover every term: the answer is split across chunks",
                    ],
                    counterfactuals=["neighbours_merged"],
                )
    return None


def _replaced_terms(facts: Facts, raw: str, rewritten: str) -> list[str]:
    """Evidence of a replacing rewrite that drifted: a query term swapped for an alias the gold lacks.

    A rewrite that appends synonyms keeps every raw term; one that *replaces* the user's term with
    its dictionary synonym (an over-broad entry: 撤销 → 作废) searches a different question when the
    gold has the synonym nowhere."""
    swapped = []
    for term, synonyms in facts.primary.rewrite.aliases.items() if facts.primary is not None else ():
        key = normalize_text(term)
        if key not in raw or key in rewritten or key not in facts.terms:
            continue
        added = [s for s in synonyms if normalize_text(s) in rewritten and normalize_text(s) not in raw]
        if added and not any(normalize_text(s) in facts.gold_text for s in added):
            swapped.append(f"{term} → {', '.join(added)}")
    if not swapped:
        return []
    return [
        f"the rewrite replaced the query's own {plural_noun('term', len(swapped))} ({'; '.join(swapped)}) "
        f"with {'an alias' if len(swapped) == 1 else 'aliases'} the gold "
        "does not contain, so the rewritten query asks another question (an over-broad alias entry)"
    ]


def rule_rewrite_error(facts: Facts) -> Finding | None:
    """Raw routes reach gold and rewritten ones do not, or the rewrite dropped a constraint term."""
    if not gold_lost(facts) or facts.primary is None:
        return None
    gold = facts.gold or []
    evidence: list[str] = []
    for trace in (facts.logged, facts.replay):
        if trace is None or trace.rewrite.mode == "off":
            continue
        # Skipped routes (same text as raw) did not run; sub-queries are narrower by design.
        raw_ran, raw_rank = gold_route_reach(trace, gold, lambda r: is_raw_route(r.name) and route_ran(r))
        rewritten_ran, rewritten_rank = gold_route_reach(
            trace, gold, lambda r: "rewritten" in r.name and route_ran(r)
        )
        if raw_ran and rewritten_ran:
            notes: list[str] = []
            if trace is facts.replay and facts.logged is not None and facts.fidelity is not None:
                # Raw routes the replay does not reproduce are judged from the logged lists.
                diverged = [
                    stage
                    for name in ("bm25", "dense")
                    if (stage := facts.fidelity.stage(name)) is not None
                    and not stage.exact
                    and (stage.route or "").endswith("_raw")
                ]
                if diverged:
                    _, raw_rank = gold_route_reach(facts.logged, gold, lambda r: is_raw_route(r.name))
                    notes = [stage_note(stage) for stage in diverged]
            if raw_rank is not None and rewritten_rank is None:
                evidence.append(
                    f"raw-query routes reach gold (best rank {raw_rank}) and rewritten routes do not "
                    f"(rewritten query: {trace.rewrite.rewritten_query})"
                )
                evidence += notes
            break
    rewrite = facts.primary.rewrite
    rewritten = normalize_text(" ".join([rewrite.rewritten_query, *rewrite.sub_queries]))
    raw = normalize_text(rewrite.raw_query or facts.query)
    if rewrite.mode != "off" and rewritten.strip() and rewritten != normalize_text(rewrite.normalized_query):
        lost = [t for t in facts.constraint_terms if t in raw and t not in rewritten and t in facts.gold_text]
        if lost:
            evidence.append(
                f"the rewrite dropped constraint {'term' if len(lost) == 1 else 'terms'} {words(lost)} that "
                f"the gold contains (raw: {rewrite.raw_query} → rewritten: {rewrite.rewritten_query})"
            )
        evidence += _replaced_terms(facts, raw, rewritten)
    if not evidence:
        return None
    return Finding(
        label="rewrite_error",
        confidence=min(0.9, 0.55 + 0.2 * len(evidence)),
        evidence=evidence,
        counterfactuals=["rewrite_off", "llm_rewrite"],
    )


def rule_alias_missing(facts: Facts) -> Finding | None:
    """A query term is absent from gold while a synonym of it is there (a proposed alias pair)."""
    if not gold_lost(facts) or not facts.alias_pairs or facts.primary is None:
        return None
    _, lexical_rank = gold_route_reach(facts.primary, facts.gold or [], lambda r: r.kind == "bm25")
    journey = facts.primary_journey
    if lexical_rank is not None and journey is not None and journey.first_drop in ("reranked", "final"):
        return None
    evidence = [
        f"query term {p.term} is absent from gold; the gold's title/heading has {p.synonym} "
        f"({'; '.join(p.sources)})"
        for p in facts.alias_pairs
    ]
    evidence.append(
        "lexical routes miss gold"
        if lexical_rank is None
        else f"lexical routes rank gold only at {lexical_rank}"
    )
    evidence.append("proposed alias: " + ", ".join(f"{p.term} → {p.synonym}" for p in facts.alias_pairs))
    return Finding(
        label="alias_missing",
        confidence=round(min(0.9, 0.5 + 0.4 * facts.alias_pairs[0].score), 3),
        evidence=evidence,
        counterfactuals=["alias_added", "current_index"],
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
    if dense_ran and terms and coverage(terms, facts.gold_text) >= RELEVANT_COVERAGE:
        top = [hit.chunk_id for r in facts.primary.routes if r.kind == "dense" for hit in r.hits[:3]]
        texts = {c: facts.candidate_texts[c] for c in dict.fromkeys(top) if c in facts.candidate_texts}
        generic = [c for c, text in texts.items() if coverage(terms, text) < WEAK_COVERAGE]
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


def rule_label_error_content(facts: Facts) -> Finding | None:
    """Gold lacks the query's key terms while a non-gold chunk of the final context has them."""
    terms = facts.terms
    if not facts.gold_chunks or not terms or facts.alias_pairs or facts.primary is None:
        return None
    gold_terms = covered(terms, facts.gold_text)
    if len(gold_terms) / len(terms) > WEAK_COVERAGE:
        return None
    for chunk_id in facts.primary.final:
        text = facts.candidate_texts.get(chunk_id)
        if chunk_id in facts.gold_chunks or text is None:
            continue
        other_terms = covered(terms, text)
        if len(other_terms) / len(terms) >= RELEVANT_COVERAGE:
            return Finding(
                label="label_error",
                confidence=0.65,
                evidence=[
                    f"the marked gold covers {len(gold_terms)}/{len(terms)} key terms "
                    f"({words(gold_terms)} of {words(terms)})",
                    f"{chunk_id} in the final context covers {len(other_terms)}/{len(terms)}: "
                    "it may be the real gold",
                ],
            )
    return None


def rule_generation_error(facts: Facts) -> Finding | None:
    """Gold reached the final context: retrieval did its job."""
    journey = facts.primary_journey
    if journey is None or not journey.reached_final:
        return None
    ranks = [f"{g.chunk_id} at rank {g.final}" for g in journey.gold if g.final is not None]
    citations = facts.logged.citations if facts.logged is not None else None
    if citations:
        cited_gold = [c for c in citations if c in (facts.gold or [])]
        if cited_gold:
            return Finding(
                label="label_error",
                confidence=0.7,
                evidence=[
                    f"gold is in the final context ({', '.join(ranks)}) and the answer cites it "
                    f"({short_ids(cited_gold)}): retrieval and the answer used the right chunk",
                    "the flag is about the content itself (or the gold is marked on the wrong chunk)",
                ],
            )
        return Finding(
            label="generation_error",
            confidence=0.9,
            evidence=[
                f"gold is in the final context ({', '.join(ranks)}) but the answer cites "
                f"{short_ids(list(citations))} instead: the answer followed another passage"
            ],
        )
    return Finding(
        label="generation_error",
        confidence=0.85,
        evidence=[f"gold is in the final context ({', '.join(ranks)}): the answer, not retrieval, failed"],
    )


def _top_logged(trace: Trace, top_n: int) -> list[str]:
    """The top `top_n` of the latest logged list before the final context (reranked, fused, routes)."""
    if trace.reranked:
        return [hit.chunk_id for hit in trace.reranked[:top_n]]
    if trace.fused:
        return [hit.chunk_id for hit in trace.fused[:top_n]]
    return list(dict.fromkeys(hit.chunk_id for route in trace.routes for hit in route.hits[:top_n]))


def rule_no_answer_in_kb(facts: Facts) -> Finding | None:
    """No gold, and nothing retrieved carries the query (low term coverage, low cross-encoder scores)."""
    trace = facts.primary
    if facts.gold_chunks or facts.unknown_gold or trace is None or not facts.terms:
        return None
    final_logged = "final" not in trace.not_logged
    # Without a logged final context, judge what production's last logged stage kept on top.
    shown = list(trace.final) if final_logged else _top_logged(trace, facts.top_n)
    place = "final chunk" if final_logged else "top retrieved chunk (no final context was logged)"
    final_texts = [facts.candidate_texts[c] for c in shown if c in facts.candidate_texts]
    best = max((coverage(facts.terms, t) for t in final_texts), default=0.0)
    probabilities = [p.cross_encoder_score for p in trace.rerank_pairs if p.cross_encoder_score is not None]
    near_miss = best >= 0.5 or bool(probabilities and max(probabilities) >= 0.3)
    # With gold marked empty, only a final chunk carrying every key term contradicts the triager.
    if near_miss and (facts.gold != [] or best >= 1.0):
        return None
    evidence = [f"no {place} carries more than {best:.0%} of the key terms ({words(facts.terms)})"]
    if near_miss:
        evidence = [
            f"the triager marked no gold; the best {place} carries {best:.0%} of the key terms "
            f"({words(facts.terms)}; a near miss: check that it does not answer)"
        ]
    if probabilities:
        evidence.append(f"best cross-encoder probability {max(probabilities):.2f}")
    if trace.refused:
        evidence.append(f"the pipeline refused ({trace.refusal_reason or 'low score'})")
    elif trace.lexical_support is not None:
        evidence.extend(_not_read_as_names(trace.lexical_support))
    confidence = (0.6 if near_miss else 0.8) if facts.gold == [] else 0.55
    return Finding(label="no_answer_in_kb", confidence=confidence, evidence=evidence)


def _not_read_as_names(support: LexicalSupport) -> list[str]:
    """Why words the KB never holds did not veto a run that was not refused: markup and ordinary
    English words of a pasted message are left out of lexical support (`pipeline.lexical_support`)."""
    kinds = []
    if support.ordinary_words:
        many = len(support.ordinary_words) > 1
        kinds.append(
            f"{words(support.ordinary_words)} as {'ordinary English words' if many else 'an ordinary English word'}"
            " (common English in a run of Latin words)"
        )
    if support.markup:
        kinds.append(f"{words(support.markup)} as markup")
    if not kinds:
        return []
    return [f"the pipeline did not refuse: it read {' and '.join(kinds)}, not as names the KB never mentions"]


#: Rules in precedence order: the first upstream failure wins.
RULES: tuple[Callable[[Facts], Finding | None], ...] = (
    rule_label_error_unknown,
    rule_index_stale,
    rule_chunk_split_bad,
    rule_rewrite_error,
    rule_alias_missing,
    rule_label_error_content,
    rule_bm25_miss,
    rule_dense_drift,
    rule_rerank_error,
    rule_generation_error,
    rule_no_answer_in_kb,
    rule_fallback,
)


def findings(facts: Facts) -> list[Finding]:
    """Every rule's finding, in precedence order, one per label (the first for a label wins)."""
    found: list[Finding] = []
    for rule in RULES:
        if rule is rule_fallback and found:
            break
        finding = rule(facts)
        if finding is not None and all(f.label != finding.label for f in found):
            found.append(finding)
    return found
