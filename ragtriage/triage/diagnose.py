"""Diagnose one case: gold journeys (logged and replay), a suggested root cause with evidence, and
the counterfactual replays that confirm it; when gold is unknown, what is needed and likely gold.

`diagnose_request` loads a logged request's trace and stored gold first: the CLI's `diagnose`,
`aliases suggest` and the REST API's diagnosis view all go through it, so the same request gets the
same diagnosis on every face. A diagnosis made with the stored gold is stored as the request's
suggested root cause (`save_suggestions`, which the TUI's replay and `diagnose --all` call too).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from ragtriage.config.profiles import resolve_profile
from ragtriage.errors import InputError, NotFoundError
from ragtriage.logs.requests import find_request
from ragtriage.pipeline.types import RunOptions, Trace
from ragtriage.replay.logged import logged_trace
from ragtriage.store.gold import gold_ids
from ragtriage.store.triage_repo import find_record, save_suggested_labels
from ragtriage.triage.context import DiagnosisContext
from ragtriage.triage.counterfactual import CounterfactualResult, run_counterfactuals
from ragtriage.triage.facts import AliasPair, Facts, collect_facts, covered, fidelity_evidence
from ragtriage.triage.journey import GoldJourney
from ragtriage.triage.rules import Finding, findings
from ragtriage.wording import quoted

if TYPE_CHECKING:
    from ragtriage.workspace import Workspace

#: Suggested label stored for a diagnosed request whose diagnosis named no cause (None: not diagnosed).
NO_CAUSE = "unknown"

#: Confidence added when a counterfactual confirms the label, removed when every one that ran failed.
CONFIRM_BONUS = 0.1
REFUTE_PENALTY = 0.15


class Suggestion(BaseModel):
    """The suggested root cause: label (None when nothing can be said), confidence, evidence."""

    label: str | None = None
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    evidence: list[str] = Field(default_factory=list)
    confirmed_by: str | None = None
    """Name of the counterfactual replay that fixed the case, if any."""
    unconfirmed: bool = False
    """True when the label's own counterfactual replays ran and none brought gold back (and no other
    label was confirmed): a lead to check, not a finding."""
    alias_pairs: list[AliasPair] = Field(default_factory=list)
    alternatives: list[Finding] = Field(default_factory=list)
    """Other labels whose rules also fired, in precedence order."""
    refuted: list[Finding] = Field(default_factory=list)
    """Labels whose rules fired but whose own counterfactual replays all failed to bring gold back."""


class LikelyChunk(BaseModel):
    """A chunk that may be gold: where it stood and which query terms it carries."""

    chunk_id: str
    title: str | None = None
    doc_id: str | None = None
    heading_path: list[str] = Field(default_factory=list)
    stage: str
    rank: int
    overlap_terms: list[str] = Field(default_factory=list)


class Needs(BaseModel):
    """What the triager must provide before a retrieval cause can be named."""

    message: str
    likeliest: list[LikelyChunk] = Field(default_factory=list)
    next_steps: list[str] = Field(default_factory=list)
    """Commands (or TUI keys) that provide what is missing."""


class Diagnosis(BaseModel):
    """Everything `diagnose` found out about one request (or query)."""

    request_id: str | None = None
    query: str
    gold: list[str] | None = None
    """None: gold unknown; []: the case has no answer in the KB."""
    key_terms: list[str] = Field(default_factory=list)
    journeys: dict[str, GoldJourney] = Field(default_factory=dict)
    """`logged` and `replay`."""
    suggestion: Suggestion = Field(default_factory=Suggestion)
    counterfactuals: list[CounterfactualResult] = Field(default_factory=list)
    needs: Needs | None = None
    fidelity: str | None = None
    """The replay's fidelity line against the logged request (`bm25 3/3 · dense 2/3 · …`)."""
    timings_ms: dict[str, float] = Field(default_factory=dict)


def likeliest_chunks(facts: Facts, limit: int = 5) -> list[LikelyChunk]:
    """Top final, then fused, chunks that carry at least one key term, most terms first."""
    seen: dict[str, LikelyChunk] = {}
    for trace in (facts.replay, facts.logged):
        if trace is None:
            continue
        ranked = [("final", i + 1, c) for i, c in enumerate(trace.final)]
        ranked += [("fused", hit.rank, hit.chunk_id) for hit in trace.fused[:10]]
        for stage, rank, chunk_id in ranked:
            text = facts.candidate_texts.get(chunk_id)
            if chunk_id in seen or text is None:
                continue
            overlap = covered(facts.terms, text)
            if overlap:
                candidate = trace.candidate(chunk_id)
                seen[chunk_id] = LikelyChunk(
                    chunk_id=chunk_id,
                    title=candidate.title if candidate is not None else None,
                    doc_id=candidate.doc_id if candidate is not None else None,
                    heading_path=list(candidate.heading_path) if candidate is not None else [],
                    stage=stage,
                    rank=rank,
                    overlap_terms=overlap,
                )
    ordered = sorted(seen.values(), key=lambda c: (-len(c.overlap_terms), c.stage != "final", c.rank))
    return ordered[:limit]


def _verdict(finding: Finding, results: list[CounterfactualResult]) -> str:
    """`confirmed`, `refuted` (its replays ran and none brought gold back) or `untested`."""
    relevant = [r for r in results if r.name in finding.counterfactuals and r.available]
    if any(r.improves for r in relevant):
        return "confirmed"
    if relevant and all(r.reaches_final is False and r.baseline_reaches_final is False for r in relevant):
        return "refuted"
    return "untested"


def _apply_counterfactuals(
    suggestion: Suggestion, found: list[Finding], results: list[CounterfactualResult], facts: Facts
) -> None:
    """Put a confirmed label first; a label whose own replays failed is never the headline."""
    verdicts = [_verdict(finding, results) for finding in found]
    if "confirmed" in verdicts:
        head = verdicts.index("confirmed")
    elif "untested" in verdicts:
        head = verdicts.index("untested")
    else:
        head = 0
    top = found[head]
    suggestion.label, suggestion.confidence = top.label, top.confidence
    suggestion.evidence = list(top.evidence)
    suggestion.alias_pairs = facts.alias_pairs if top.label in ("alias_missing", "bm25_miss") else []
    suggestion.alternatives = [f for i, f in enumerate(found) if i != head and verdicts[i] != "refuted"]
    suggestion.refuted = [f for i, f in enumerate(found) if i != head and verdicts[i] == "refuted"]
    relevant = [r for r in results if r.name in top.counterfactuals and r.available]
    if verdicts[head] == "confirmed":
        confirming = next(r for r in relevant if r.improves)
        suggestion.confirmed_by = confirming.name
        suggestion.confidence = round(min(1.0, suggestion.confidence + CONFIRM_BONUS), 3)
        suggestion.evidence.append(f"confirmed: {confirming.description} → gold reaches the final context")
    elif verdicts[head] == "refuted":
        suggestion.unconfirmed = True
        suggestion.confidence = round(max(0.0, suggestion.confidence - REFUTE_PENALTY), 3)
        suggestion.evidence.append(f"not confirmed: {', '.join(r.name for r in relevant)} still miss gold")


def _gold_steps(request_id: str | None) -> list[str]:
    """How a triager provides the gold that diagnosis needs."""
    if request_id is None:
        return [
            "ragtriage diagnose --query QUERY --gold CHUNK_ID (find chunk ids with `ragtriage kb chunks`)",
            "ragtriage diagnose --query QUERY --no-gold when the KB has no answer",
        ]
    return [
        f"ragtriage label {request_id} LABEL --gold CHUNK_ID, then `ragtriage diagnose {request_id}` "
        "(in the TUI: g on a candidate, G to search the KB)",
        f"ragtriage diagnose {request_id} --gold CHUNK_ID to try a chunk without saving it",
        f"ragtriage diagnose {request_id} --no-gold when the KB has no answer",
    ]


def diagnose(
    ctx: DiagnosisContext,
    query: str,
    *,
    logged: Trace | None = None,
    gold: Sequence[str] | None = None,
    must_have: Sequence[str] = (),
    request_id: str | None = None,
    replay: Trace | None = None,
    counterfactuals: bool = True,
    should_stop: Callable[[], bool] | None = None,
    as_of: datetime | None = None,
) -> Diagnosis:
    """Diagnose one case. `gold=None` means unknown; `replay` is run here when not given, at `as_of`
    (a logged request's time: time-dependent rerank features then match production's)."""
    started = time.perf_counter()
    timings: dict[str, float] = {}
    if replay is None:
        replay = ctx.run(query, RunOptions(as_of=as_of))
        timings["replay"] = (time.perf_counter() - started) * 1000
    mark = time.perf_counter()
    facts = collect_facts(ctx, query, logged=logged, replay=replay, gold=gold, must_have=must_have)
    found = findings(facts)
    timings["rules"] = (time.perf_counter() - mark) * 1000
    diagnosis = Diagnosis(
        request_id=request_id,
        query=query,
        gold=facts.gold,
        key_terms=facts.terms,
        journeys=facts.journeys,
    )
    if found:
        top = found[0]
        diagnosis.suggestion = Suggestion(
            label=top.label,
            confidence=top.confidence,
            evidence=list(top.evidence),
            alias_pairs=facts.alias_pairs if top.label in ("alias_missing", "bm25_miss") else [],
            alternatives=found[1:],
        )
    if facts.gold is None:
        diagnosis.needs = Needs(
            message=(
                "gold is unknown, so no retrieval cause can be named yet: mark gold (--gold CHUNK_ID, g in the TUI)"
            ),
            likeliest=likeliest_chunks(facts),
            next_steps=_gold_steps(request_id),
        )
    elif counterfactuals and found and facts.gold_chunks:
        mark = time.perf_counter()
        names = list(dict.fromkeys(name for finding in found for name in finding.counterfactuals))
        diagnosis.counterfactuals = run_counterfactuals(ctx, facts, names, replay, should_stop=should_stop)
        _apply_counterfactuals(diagnosis.suggestion, found, diagnosis.counterfactuals, facts)
        final = facts.fidelity.stage("final_context") if facts.fidelity is not None else None
        if final is not None and not final.exact and diagnosis.counterfactuals:
            diagnosis.suggestion.evidence.append(
                f"counterfactuals are measured against the replay, whose final context differs from the "
                f"logged one ({final.cell})"
            )
        timings["counterfactuals"] = (time.perf_counter() - mark) * 1000
    if facts.replay is not None or facts.logged is not None:
        # Every diagnosis names the fidelity it relied on (after the counterfactuals chose the label).
        evidence = diagnosis.suggestion.evidence
        lines = fidelity_evidence(facts.fidelity, diagnosis.suggestion.label, facts.logged is not None)
        evidence += [line for line in lines if line not in evidence]
        diagnosis.fidelity = facts.fidelity.line if facts.fidelity is not None else None
    timings["total"] = (time.perf_counter() - started) * 1000
    diagnosis.timings_ms = {k: round(v, 2) for k, v in timings.items()}
    return diagnosis


def save_suggestions(engine: Engine, diagnoses: Iterable[Diagnosis]) -> int:
    """Store each diagnosis' suggested label as its request's `suggested_label` (the queue's
    `suggested` column), `NO_CAUSE` when it named none; diagnoses of a bare query are skipped.
    Every face calls this after diagnosing with the stored gold. Returns the records updated."""
    return save_suggested_labels(
        engine,
        {d.request_id: d.suggestion.label or NO_CAUSE for d in diagnoses if d.request_id is not None},
    )


class LoggedCase(BaseModel):
    """A logged request as diagnosis sees it."""

    query: str
    trace: Trace
    gold: list[str] | None
    """The triage record's gold; None when unknown, [] when confirmed as having no answer in the KB."""
    confirmed_label: str | None
    """The primary label of a confirmed record, else None."""
    ts: datetime | None = None
    """When the request was logged (its replay computes rerank freshness at that moment)."""
    pipeline_version: str | None = None
    """The logged pipeline_version (its replay runs with the profile mapped to it)."""


def logged_case(workspace: Workspace, request_id: str) -> LoggedCase:
    """The raw query, logged trace, stored gold and confirmed label of one logged request.

    Raises:
        NotFoundError: the request is not in the store.
    """
    stored = find_request(workspace.engine, request_id)
    if stored is None:
        raise NotFoundError(
            f"request_id {quoted(request_id)} is not in the store; ingest its log with `logs ingest`"
        )
    record = stored.record
    triage = find_record(workspace.engine, request_id)
    gold = gold_ids(triage.gold_chunk_ids) if triage is not None and triage.gold_chunk_ids else None
    label = triage.primary_label if triage is not None and triage.status == "confirmed" else None
    if gold is None and label in workspace.settings.triage.no_gold_labels:
        gold = []  # confirmed without gold: the KB has no answer (known, not unknown)
    return LoggedCase(
        query=record.raw_query,
        trace=logged_trace(record),
        gold=gold,
        confirmed_label=label,
        ts=record.ts,
        pipeline_version=record.pipeline_version,
    )


def diagnose_request(
    workspace: Workspace,
    context: DiagnosisContext,
    request_id: str | None = None,
    *,
    query: str | None = None,
    gold: Sequence[str] | None = None,
    must_have: Sequence[str] = (),
    counterfactuals: bool = True,
) -> tuple[Diagnosis, str | None]:
    """(diagnosis, confirmed label) of a logged request, or of `query` alone.

    `gold` overrides the triage record's gold (None: use the stored gold, itself maybe unknown). A
    logged request diagnosed with its stored gold gets its suggestion stored (`save_suggestions`);
    one tried with other gold or `must_have` terms does not: the queue shows what the case screen's
    replay would give.

    Raises:
        NotFoundError: an unknown request_id. InputError: neither a request_id nor a query.
    """
    logged: Trace | None = None
    confirmed_label: str | None = None
    as_of: datetime | None = None
    chosen_gold = list(gold) if gold is not None else None
    if request_id is not None:
        case = logged_case(workspace, request_id)
        query, logged, confirmed_label = case.query, case.trace, case.confirmed_label
        chosen_gold = chosen_gold if chosen_gold is not None else case.gold
        as_of = case.ts
        use_profile = getattr(context, "use_profile", None)
        if use_profile is not None:
            # Replayed as production ran it: the profile of its pipeline_version, at its time.
            use_profile(resolve_profile(workspace.settings, case.pipeline_version))
    if query is None:
        raise InputError("diagnose: give a REQUEST_ID, --query TEXT or --all")
    result = diagnose(
        context,
        query,
        logged=logged,
        gold=chosen_gold,
        must_have=must_have,
        request_id=request_id,
        counterfactuals=counterfactuals,
        as_of=as_of,
    )
    if request_id is not None and gold is None and not must_have:
        save_suggestions(workspace.engine, [result])
    return result, confirmed_label
