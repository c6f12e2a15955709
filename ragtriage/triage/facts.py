"""Facts the root-cause rules read: key terms, coverage of terms by chunks, route reach, alias pairs,
and how far the replay of a logged request reproduces it.

Computed once per diagnosis from the traces, the gold chunks and the `DiagnosisContext`, so the
rules in `rules.py` stay short, pure and testable on hand-built traces. `replay_fidelity` compares
each logged stage with the replayed one (`replay.fidelity`) and resolves the logged ids the KB no
longer has live: an older version of a document that now has other ids (the mark of `index_stale`),
or an id no document can be named for; `fidelity_evidence` is the evidence line every diagnosis of
a logged request carries.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from ragtriage.kb.types import ChunkRecord
from ragtriage.pipeline.types import RouteResult, Trace
from ragtriage.replay.fidelity import STAGE_SHORT, StageFidelity, compare_traces
from ragtriage.triage.context import DiagnosisContext
from ragtriage.triage.gold_check import DeletedGold
from ragtriage.triage.journey import GoldJourney, gold_journey

#: Function and question words that never carry a query's meaning (not a synonym source).
STOPWORDS = frozenset(
    "的 了 和 与 及 是 在 有 吗 呢 吧 啊 呀 么 我 你 他 她 它 我们 你们 要 想 能 会 可以 可 该 应该 需要 "
    "怎么 怎样 怎么样 如何 什么 哪 哪个 哪些 哪里 为什么 为何 多少 几 是否 请问 一下 一个 这个 那个 这 那 "
    "还 也 都 就 把 被 给 对 从 到 让 用 "
    "a an the of to in on for is are how what why do does can i".split()
)
_WORD = re.compile(r"\w", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u9fff]")


def normalize_text(text: str) -> str:
    """NFKC + lower-case, the form every term containment check uses."""
    return unicodedata.normalize("NFKC", text).lower()


def key_terms(tokens: Iterable[str]) -> list[str]:
    """Tokens that carry meaning: no stopwords, punctuation or single CJK characters; compounds whose
    parts are also tokens are dropped (jieba's search mode emits `发票抬头` and `发票`, `抬头`)."""
    terms: list[str] = []
    for token in tokens:
        term = normalize_text(token).strip()
        if not term or term in STOPWORDS or not _WORD.search(term):
            continue
        if len(term) == 1 and _CJK.match(term):
            continue
        if term not in terms:
            terms.append(term)
    return [t for t in terms if not any(other != t and other in t for other in terms)]


def chunk_text(chunk: ChunkRecord) -> str:
    """Title, heading path and content of a chunk, normalised, as one searchable string."""
    return normalize_text(" ".join([chunk.title, *chunk.heading_path, chunk.content]))


def covered(terms: Sequence[str], text: str) -> list[str]:
    """The terms that occur in `text` (substring match on the normalised text)."""
    return [term for term in terms if term in text]


def coverage(terms: Sequence[str], text: str) -> float:
    """Share of `terms` found in `text` (1.0 for no terms)."""
    return len(covered(terms, text)) / len(terms) if terms else 1.0


def is_raw_route(name: str) -> bool:
    """Routes that search the raw (normalised) query; logged routes named just `bm25`/`dense` count as raw."""
    return name.endswith("_raw") or name in ("bm25", "dense")


class AliasPair(BaseModel):
    """A proposed alias: the query's term and the gold's term, with why they look like synonyms."""

    term: str
    synonym: str
    score: float
    sources: list[str]


#: The logged stages each label blames: diagnosis judges them from the logged lists.
LABEL_STAGES: dict[str, tuple[str, ...]] = {
    "rewrite_error": ("bm25", "dense"),
    "alias_missing": ("bm25",),
    "bm25_miss": ("bm25",),
    "dense_drift": ("dense",),
    "rerank_error": ("reranked", "final_context"),
    "chunk_split_bad": ("final_context",),
    "generation_error": ("final_context",),
    "label_error": ("final_context",),
    "no_answer_in_kb": ("final_context",),
}


@dataclass
class ReplayFidelity:
    """The logged request against its replay."""

    stages: list[StageFidelity] = field(default_factory=list)
    stale_documents: dict[str, list[str]] = field(default_factory=dict)
    """Document → logged ids of an older version of it (the KB has other ids for it now)."""
    unknown: list[str] = field(default_factory=list)
    """Logged ids the KB has no row for and no document can be named for."""

    def stage(self, name: str) -> StageFidelity | None:
        """The comparison of one logged stage, or None when it was not logged."""
        return next((s for s in self.stages if s.stage == name), None)

    def diverged(self, name: str) -> bool:
        """True when the stage was logged and the replay does not reproduce it exactly."""
        found = self.stage(name)
        return found is not None and not found.exact

    @property
    def line(self) -> str:
        return " · ".join(s.cell for s in self.stages) or "no stage logged"

    @property
    def exact(self) -> bool:
        return all(s.exact for s in self.stages)


def _origins(ctx: DiagnosisContext, chunk_ids: Sequence[str]) -> tuple[set[str], dict[str, str]]:
    """(live ids, id → document) through the context's bulk lookup when it has one (the workspace),
    else through `ctx.chunk` (a deleted row keeps its document; no row: unknown)."""
    bulk = getattr(ctx, "chunk_origins", None)
    if bulk is not None:
        found_live, found_docs = bulk(chunk_ids)
        return set(found_live), dict(found_docs)
    live: set[str] = set()
    doc_of: dict[str, str] = {}
    for chunk_id in dict.fromkeys(chunk_ids):
        chunk = ctx.chunk(chunk_id)
        if chunk is None:
            continue
        if chunk.status == "deleted":
            doc_of[chunk_id] = chunk.doc_id
        else:
            live.add(chunk_id)
    return live, doc_of


def replay_fidelity(ctx: DiagnosisContext, logged: Trace, replay: Trace) -> ReplayFidelity:
    """Compare every logged stage with the replay and name the documents of the stale logged ids."""
    logged_ids = trace_chunk_ids(logged)
    live, doc_of = _origins(ctx, [*logged_ids, *trace_chunk_ids(replay)])
    result = ReplayFidelity(stages=compare_traces(logged, replay, live))
    for chunk_id in logged_ids:
        if chunk_id in live:
            continue
        if chunk_id in doc_of:
            result.stale_documents.setdefault(doc_of[chunk_id], []).append(chunk_id)
        else:
            result.unknown.append(chunk_id)
    return result


def stage_note(stage: StageFidelity) -> str:
    """`replayed dense differs from logged (overlap 6/10): judged from the logged list`."""
    name = STAGE_SHORT.get(stage.stage, stage.stage)
    return f"replayed {name} differs from logged (overlap {stage.overlap}/{stage.k}): judged from the logged list"


def fidelity_evidence(fidelity: ReplayFidelity | None, label: str | None, has_logged: bool) -> list[str]:
    """The evidence lines naming the fidelity a diagnosis relied on (one summary, plus one per
    stage the label blames that the replay does not reproduce)."""
    if not has_logged:
        return ["no logged request: judged from the replay alone"]
    if fidelity is None:
        return ["judged from the logged request (no replay to compare)"]
    if fidelity.exact:
        return [f"replay fidelity {fidelity.line}: every logged stage reproduced"]
    lines = [
        f"replay fidelity {fidelity.line}: logged stages are judged from the logged lists, "
        "the replay only for what production did not log"
    ]
    for name in LABEL_STAGES.get(label or "", ()):
        stage = fidelity.stage(name)
        if stage is not None and not stage.exact:
            lines.append(stage_note(stage))
    return lines


@dataclass
class Facts:
    """Everything the rules need about one case; built by `collect_facts`."""

    query: str
    gold: list[str] | None
    logged: Trace | None
    replay: Trace | None
    top_n: int
    """Size of the primary trace's final context (`final_size`)."""
    must_have: list[str] = field(default_factory=list)
    journeys: dict[str, GoldJourney] = field(default_factory=dict)
    gold_chunks: dict[str, ChunkRecord] = field(default_factory=dict)
    unknown_gold: list[str] = field(default_factory=list)
    deleted_gold: list[DeletedGold] = field(default_factory=list)
    """Gold chunks the KB holds as deleted, with why and the closest live chunk (empty when the
    context cannot tell: the rules then word it without the reason)."""
    unknown_logged: list[str] = field(default_factory=list)
    indexed: dict[str, dict[str, str | None]] = field(default_factory=dict)
    terms: list[str] = field(default_factory=list)
    gold_text: str = ""
    candidate_texts: dict[str, str] = field(default_factory=dict)
    neighbour_texts: dict[str, dict[str, str]] = field(default_factory=dict)
    """Gold chunk id → {neighbour chunk id → text}."""
    alias_pairs: list[AliasPair] = field(default_factory=list)
    known_aliases: dict[str, list[str]] = field(default_factory=dict)
    fidelity: ReplayFidelity | None = None
    """The logged stages against the replay (None without both); rules judge a stage the replay
    does not reproduce from the logged list."""

    @property
    def primary(self) -> Trace | None:
        """The trace the case is about: the logged request when there is one, else the replay."""
        return self.logged if self.logged is not None else self.replay

    @property
    def primary_journey(self) -> GoldJourney | None:
        """Gold journey through the primary trace."""
        return self.journeys.get("logged") or self.journeys.get("replay")

    @property
    def constraint_terms(self) -> list[str]:
        """Must-have constraints when given, else the query's key terms."""
        return [normalize_text(t) for t in self.must_have] or self.terms


def gold_route_reach(
    trace: Trace, gold: Sequence[str], predicate: Callable[[RouteResult], bool]
) -> tuple[bool, int | None]:
    """(any route matching `predicate` ran, best gold rank over those routes)."""
    matching = [route for route in trace.routes if predicate(route)]
    ranks = [hit.rank for route in matching for hit in route.hits if hit.chunk_id in gold]
    return bool(matching), (min(ranks) if ranks else None)


def trace_chunk_ids(trace: Trace) -> list[str]:
    """Every chunk id a trace mentions, in first-seen order."""
    ids: list[str] = [hit.chunk_id for route in trace.routes for hit in route.hits]
    ids += [hit.chunk_id for hit in trace.fused] + list(trace.rerank_input)
    ids += [hit.chunk_id for hit in trace.reranked] + list(trace.final)
    return list(dict.fromkeys(ids))


#: Words that join two names of one thing: `全电票（数电发票）`, `报账即报销`, `补休/调休`.
_SYNONYM_JOINERS = r"\s*(?:[（(]|即|也叫|又称|简称|俗称|就是|/)\s*"


def near_each_other(text: str, term: str, synonym: str) -> bool:
    """True when the text names the two terms as one thing: joined by a bracket or a word like 即, 又称."""
    first, second = re.escape(term), re.escape(synonym)
    pattern = f"{first}{_SYNONYM_JOINERS}{second}|{second}{_SYNONYM_JOINERS}{first}"
    return re.search(pattern, text) is not None


def is_whole_term(ctx: DiagnosisContext, term: str, known: Iterable[str] = ()) -> bool:
    """True when `term` is a word, not a tokenizer mis-split.

    A word is in the tokenizer's dictionary or the alias dictionary (`known`), or is ASCII. jieba's
    HMM also joins characters the dictionary does not know; such a guess counts as a word (a
    coined term like 代批 or 全电票) unless it starts or ends with a function word, as 能设
    (能 + 设, from 最长能设多少天) does.
    """
    if not _CJK.search(term) or term in known or ctx.in_dictionary(term):
        return True
    return term[0] not in STOPWORDS and term[-1] not in STOPWORDS


def _alias_terms(known_aliases: dict[str, list[str]]) -> set[str]:
    return {normalize_text(t) for term, syns in known_aliases.items() for t in (term, *syns)}


def propose_alias_pairs(
    ctx: DiagnosisContext, facts: Facts, applied: dict[str, list[str]]
) -> list[AliasPair]:
    """Pair query terms missing from gold with gold title/heading terms the query lacks.

    Both sides must be whole terms (`is_whole_term`); the query term must not occur in the KB
    except where a chunk names the two as one thing (a glossary line such as `报账即报销`: else the
    KB already uses the term, and an alias is not what is missing); the synonym must occur in the
    gold chunk. Sources, each adding to the pair's score: the alias dictionary lists
    them the other way round or together (reverse entry), a retrieved non-gold chunk contains both
    (co-occurrence), they share a character that is not a function word, the embedder finds the
    gold term nearest, or exactly one term is missing and one heading term unmatched. A
    title/heading position alone is never enough.
    """
    known = _alias_terms(facts.known_aliases)
    missing = [t for t in facts.terms if t not in facts.gold_text and is_whole_term(ctx, t, known)]
    if not missing or not facts.gold_chunks:
        return []
    query_text = normalize_text(facts.query)
    heading_terms: list[str] = []
    for chunk in facts.gold_chunks.values():
        for term in key_terms(ctx.tokenize(" ".join([chunk.title, *chunk.heading_path]))):
            if term in query_text or term in heading_terms or term not in facts.gold_text:
                continue
            if is_whole_term(ctx, term, known):
                heading_terms.append(term)
    if not heading_terms:
        return []
    others = [text for cid, text in facts.candidate_texts.items() if cid not in facts.gold_chunks]
    pairs: list[AliasPair] = []
    for term in missing:
        scored: list[tuple[str, float, list[str]]] = []
        in_kb = [chunk_text(chunk) for chunk in ctx.kb_chunks_with(term)]
        for synonym in heading_terms:
            if synonym in applied.get(term, []):
                continue
            if any(not near_each_other(text, term, synonym) for text in in_kb):
                continue
            sources: list[str] = []
            score = 0.2
            reverse = facts.known_aliases.get(synonym, [])
            if term in reverse or any(
                term in syns and synonym in syns for syns in facts.known_aliases.values()
            ):
                score += 0.5
                sources.append("alias dictionary (reverse entry)")
            cooccur = sum(1 for text in others if near_each_other(text, term, synonym))
            if cooccur:
                score += min(0.3, 0.15 * cooccur)
                sources.append(
                    f"named as one thing in {cooccur} retrieved chunk{'' if cooccur == 1 else 's'}"
                )
            shared = (set(term) & set(synonym)) - STOPWORDS
            if shared and (_CJK.search(term) or len(shared) > 2):
                score += 0.15
                sources.append("shared characters")
            if len(missing) == 1 and len(heading_terms) == 1:
                score += 0.15
                sources.append("the only missing term and the only unmatched heading term")
            if sources:
                scored.append((synonym, score, sources))
        if len(scored) > 1:
            # The embedder only ranks candidates that already have a source: embedding is the costly
            # step of a diagnosis, and nearness alone is no evidence of synonymy.
            similarities = ctx.similarity(term, [synonym for synonym, _, _ in scored]) or []
            if similarities:
                nearest = max(range(len(similarities)), key=similarities.__getitem__)
                synonym, score, sources = scored[nearest]
                scored[nearest] = (synonym, score + 0.1, [*sources, "nearest heading term by embedding"])
        if scored:
            synonym, score, sources = max(scored, key=lambda item: item[1])
            if score >= 0.35:
                pairs.append(
                    AliasPair(term=term, synonym=synonym, score=round(min(score, 1.0), 3), sources=sources)
                )
    return sorted(pairs, key=lambda p: -p.score)


def final_size(logged: Trace | None, configured: int) -> int:
    """How many chunks the final context of the case's trace keeps: the length of the logged final
    context when the request logged one (production's own top N, e.g. a reranker `top_k` of 3),
    else the configured `[rerank] top_n` of the replay."""
    return len(logged.final) if logged is not None and logged.final else configured


def collect_facts(
    ctx: DiagnosisContext,
    query: str,
    *,
    logged: Trace | None,
    replay: Trace | None,
    gold: Sequence[str] | None,
    must_have: Sequence[str] = (),
) -> Facts:
    """Look up everything the rules need: gold chunks, index hashes, terms, texts, alias pairs."""
    facts = Facts(
        query=query,
        gold=list(dict.fromkeys(gold)) if gold is not None else None,
        logged=logged,
        replay=replay,
        top_n=final_size(logged, ctx.settings.rerank.top_n),
        must_have=list(must_have),
        known_aliases={k: list(v) for k, v in ctx.aliases.items()},
    )
    facts.terms = key_terms(ctx.query_terms(query))
    ids: list[str] = list(facts.gold or [])
    for trace in (logged, replay):
        if trace is not None:
            ids += trace_chunk_ids(trace)
    prefetch = getattr(ctx, "prefetch", None)
    if prefetch is not None:
        prefetch(ids)
    for chunk_id in facts.gold or []:
        chunk = ctx.chunk(chunk_id)
        if chunk is None:
            facts.unknown_gold.append(chunk_id)
            continue
        facts.gold_chunks[chunk_id] = chunk
        facts.indexed[chunk_id] = ctx.indexed_hash(chunk_id)
        facts.neighbour_texts[chunk_id] = {n.chunk_id: chunk_text(n) for n in ctx.neighbours(chunk_id)}
    facts.gold_text = " ".join(chunk_text(c) for c in facts.gold_chunks.values())
    deleted = [chunk_id for chunk_id, chunk in facts.gold_chunks.items() if chunk.status == "deleted"]
    explain_deleted = getattr(ctx, "deleted_gold", None)
    if deleted and explain_deleted is not None:
        facts.deleted_gold = list(explain_deleted(deleted))
    if logged is not None and replay is not None:
        facts.fidelity = replay_fidelity(ctx, logged, replay)
    if logged is not None:
        unknown = {c.chunk_id for c in logged.candidates if not c.known}
        stale = (
            {c for ids in facts.fidelity.stale_documents.values() for c in ids} if facts.fidelity else set()
        )
        facts.unknown_logged = [
            c for c in trace_chunk_ids(logged) if c in unknown or c in stale or ctx.chunk(c) is None
        ]
    for trace in (replay, logged):
        if trace is None:
            continue
        top = list(trace.final) + [hit.chunk_id for hit in trace.fused[:10]]
        for chunk_id in dict.fromkeys(top):
            chunk = ctx.chunk(chunk_id)
            if chunk is not None and chunk_id not in facts.candidate_texts:
                facts.candidate_texts[chunk_id] = chunk_text(chunk)
    if facts.gold:
        for source, trace in (("logged", logged), ("replay", replay)):
            if trace is not None:
                facts.journeys[source] = gold_journey(trace, facts.gold, source)  # type: ignore[arg-type]
        applied = dict(facts.primary.rewrite.aliases) if facts.primary is not None else {}
        facts.alias_pairs = propose_alias_pairs(ctx, facts, applied)
    return facts
