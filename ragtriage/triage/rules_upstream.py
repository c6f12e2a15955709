"""Root-cause rules for the stages before recall ranks anything: the index, the chunking, the
rewrite and the alias dictionary (the first upstream failure wins, so these run first)."""

from __future__ import annotations

from ragtriage.triage.facts import Facts, chunk_text, covered, gold_route_reach, is_raw_route, normalize_text
from ragtriage.triage.fidelity_facts import stage_note
from ragtriage.triage.rules_common import Finding, gold_lost, route_ran, short_ids, words
from ragtriage.wording import plural_noun


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
