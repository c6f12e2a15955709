"""Root-cause rules for outcomes after retrieval: the label itself is wrong, the answer ignored gold
in its context, or the KB has no answer."""

from __future__ import annotations

from ragtriage.pipeline.types import LexicalSupport, Trace
from ragtriage.triage.facts import Facts, covered
from ragtriage.triage.rules_common import RELEVANT_COVERAGE, WEAK_COVERAGE, Finding, short_ids, words


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
    best = max((len(covered(facts.terms, t)) / len(facts.terms) for t in final_texts), default=0.0)
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
    English words of a pasted message are left out of lexical support (`pipeline.query_english`)."""
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
