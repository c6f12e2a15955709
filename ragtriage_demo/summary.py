"""What `ragtriage demo --headless` prints about a prepared demo home: flagged counts by suggested
root cause, one showcase case whose suggestion its own counterfactual replay confirms, and the
eval run's means. `ragtriage_demo.demo` prepares the home.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ragtriage.workspace import Workspace


class DemoSummary(BaseModel):
    """What `demo --headless` prints: flagged counts by suggested label, one replayed case, the eval table."""

    flagged: int
    by_suggested_label: dict[str, int]
    case_request_id: str | None = None
    case_query: str | None = None
    case_suggested_label: str | None = None
    case_journey: Any = None
    """`GoldJourney` of the replayed case."""
    case_confirmed_by: str | None = None
    """The counterfactual replay that confirmed the showcase's suggestion (None: none was confirmed)."""
    case_fix: str | None = None
    """What to do about it, e.g. the `aliases add` command of a confirmed alias pair."""
    run_id: int | None = None
    run_cases: int = 0
    run_means: dict[str, float] = Field(default_factory=dict)


#: Flagged cases with gold the summary diagnoses at most while looking for a confirmed showcase.
SHOWCASE_TRIES = 24


def demo_summary(home: Path, preferred_label: str = "alias_missing") -> DemoSummary:
    """Summarize a prepared demo home and pick a showcase: a flagged case with gold whose suggested
    root cause (preferably `preferred_label`) its own counterfactual replay confirms."""
    from ragtriage.logs.queue import queue_counts
    from ragtriage.store import eval_repo as eval_store

    workspace = Workspace.open(home.expanduser().resolve())
    try:
        counts = queue_counts(workspace.engine)
        summary = DemoSummary(flagged=counts.total, by_suggested_label=dict(counts.by_suggested))
        _pick_showcase(workspace, _showcase_candidates(workspace, preferred_label), summary)
        runs = eval_store.list_runs(workspace.engine)
        if runs:
            summary.run_id, summary.run_cases = int(runs[0].id or 0), runs[0].case_count
            summary.run_means = dict((runs[0].aggregates or {}).get("means", {}))
    finally:
        workspace.close()
    return summary


#: Labels outside retrieval: a showcase of the triage loop is a retrieval failure.
_NOT_RETRIEVAL = ("generation_error", "no_answer_in_kb", "label_error", "unknown")


def _showcase_candidates(
    workspace: Workspace, preferred_label: str
) -> list[tuple[Any, list[str], str | None]]:
    """Flagged requests with gold, as (item, gold, the fixture's intended label or None), most
    promising first: designed `preferred_label` cases, stored suggestions of it, other causes."""
    from ragtriage.logs.queue import list_queue
    from ragtriage.logs.requests import get_requests
    from ragtriage.store.triage_repo import find_record

    items = list_queue(workspace.engine, limit=500).items
    records = get_requests(workspace.engine, [item.request_id for item in items])
    ranked: list[tuple[int, Any, list[str], str | None]] = []
    for item in items:
        record = records.get(item.request_id)
        fixture = ((record.model_extra or {}).get("fixture") or {}) if record is not None else {}
        triage = find_record(workspace.engine, item.request_id)
        marked = triage.gold_chunk_ids if triage is not None else []
        stored = [g if isinstance(g, str) else str(g["chunk_id"]) for g in marked]
        gold = stored or [str(g) for g in fixture.get("gold_chunk_ids") or []]
        intended = fixture.get("intended_label")
        if not gold or intended in _NOT_RETRIEVAL or item.suggested_label in _NOT_RETRIEVAL:
            continue
        rank = 0 if intended == preferred_label else 1 if item.suggested_label == preferred_label else 2
        ranked.append((rank, item, gold, intended))
    ranked.sort(key=lambda entry: entry[0])
    return [(item, gold, intended) for _, item, gold, intended in ranked[:SHOWCASE_TRIES]]


def _pick_showcase(
    workspace: Workspace, candidates: Sequence[tuple[Any, list[str], str | None]], summary: DemoSummary
) -> None:
    """Diagnose the candidates in order; the first confirmed one (else the first diagnosed) is the
    showcase. An alias_missing suggestion counts as confirmed only by its own alias replay, and a
    fixture case only when the suggestion is its designed label (the answer key)."""
    from ragtriage.logs.requests import get_request
    from ragtriage.replay.logged import logged_trace
    from ragtriage.triage.context import WorkspaceContext
    from ragtriage.triage.diagnose import diagnose

    context = WorkspaceContext(workspace)
    try:
        for item, gold, intended in candidates:
            diagnosis = diagnose(
                context,
                item.raw_query,
                logged=logged_trace(get_request(workspace.engine, item.request_id)),
                gold=gold,
                request_id=item.request_id,
            )
            suggestion = diagnosis.suggestion
            confirmed = (
                bool(suggestion.confirmed_by)
                and (suggestion.label != "alias_missing" or suggestion.confirmed_by == "alias_added")
                and intended in (None, suggestion.label)
            )
            if summary.case_request_id is not None and not confirmed:
                continue
            summary.case_request_id, summary.case_query = item.request_id, item.raw_query
            summary.case_suggested_label = suggestion.label
            summary.case_journey = diagnosis.journeys.get("replay")
            summary.case_confirmed_by = suggestion.confirmed_by if confirmed else None
            summary.case_fix = _fix_of(diagnosis)
            if confirmed:
                return
    finally:
        context.close()


def _fix_of(diagnosis: Any) -> str | None:
    """The command that applies a confirmed alias pair (other causes are fixed outside ragtriage)."""
    suggestion = diagnosis.suggestion
    if suggestion.confirmed_by == "alias_added" and suggestion.alias_pairs:
        pair = suggestion.alias_pairs[0]
        return f"ragtriage aliases add {pair.term} {pair.synonym}, then `ragtriage eval run` to measure it"
    return None
