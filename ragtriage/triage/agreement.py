"""`diagnose --all`: diagnose every case with gold (or confirmed without), and measure how often the
suggested root cause agrees with the confirmed label, with held-out cases counted apart.

A case is held out when its log line carries `fixture.holdout: true` (or a top-level `holdout`): the
fixture traffic marks the queries kept out of rule tuning that way. Replays of all cases run in one
`Pipeline.run_many` call (query embeddings batched); each diagnosis then reuses its replay.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from ragtriage.config.profiles import resolve_profile
from ragtriage.logs.requests import get_requests
from ragtriage.logs.schema import RequestLog
from ragtriage.pipeline.types import RunOptions, Trace
from ragtriage.replay.logged import logged_trace
from ragtriage.store.triage_repo import diagnosable_cases, list_records
from ragtriage.triage.context import DiagnosisContext
from ragtriage.triage.diagnose import Diagnosis, diagnose, save_suggestions
from ragtriage.triage.workflow import confirm_case, label_case


class CaseOutcome(BaseModel):
    """One diagnosed case next to its confirmed label."""

    request_id: str
    suggested: str | None
    confirmed: str | None
    holdout: bool = False
    ms: float = 0.0


class AgreementReport(BaseModel):
    """`diagnose --all --json`: every diagnosis, and agreement with the confirmed labels."""

    diagnoses: list[Diagnosis] = Field(default_factory=list)
    labelled_cases: int = 0
    """Confirmed cases outside the holdout."""
    agreement: float | None = None
    """Share of `labelled_cases` whose suggested label equals the confirmed primary label."""
    holdout_cases: int = 0
    agreement_holdout: float | None = None
    disagreements: list[CaseOutcome] = Field(default_factory=list)
    per_label: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Confirmed label → {"cases": n, "agreed": n} (tuning and holdout together)."""
    seconds: float = 0.0
    ms_per_case: float = 0.0


def fixture_field(record: RequestLog) -> dict[str, Any]:
    """The `fixture` metadata a generated log line carries (empty for real traffic)."""
    extra = record.model_extra or {}
    value = extra.get("fixture")
    return dict(value) if isinstance(value, dict) else {}


def is_holdout(record: RequestLog) -> bool:
    """True when the log line marks the case as held out of rule tuning."""
    extra = record.model_extra or {}
    return bool(fixture_field(record).get("holdout", extra.get("holdout", False)))


class _Case(BaseModel):
    request_id: str
    record: RequestLog
    gold: list[str] | None
    confirmed: str | None


def load_cases(engine: Engine, no_gold_labels: Sequence[str]) -> list[_Case]:
    """Triage records with gold, or confirmed with a label that needs none, oldest request first."""
    picked = diagnosable_cases(engine, no_gold_labels)
    records = get_requests(engine, [request_id for request_id, _, _ in picked])
    return [
        _Case(request_id=request_id, record=records[request_id], gold=gold, confirmed=confirmed)
        for request_id, gold, confirmed in picked
        if request_id in records
    ]


def agreement_report(outcomes: Sequence[CaseOutcome]) -> dict[str, Any]:
    """Agreement figures over the confirmed outcomes (pure)."""
    confirmed = [o for o in outcomes if o.confirmed is not None]
    tuning = [o for o in confirmed if not o.holdout]
    holdout = [o for o in confirmed if o.holdout]

    def share(items: list[CaseOutcome]) -> float | None:
        return round(sum(o.suggested == o.confirmed for o in items) / len(items), 4) if items else None

    per_label: dict[str, dict[str, int]] = {}
    for outcome in confirmed:
        entry = per_label.setdefault(str(outcome.confirmed), {"cases": 0, "agreed": 0})
        entry["cases"] += 1
        entry["agreed"] += int(outcome.suggested == outcome.confirmed)
    return {
        "labelled_cases": len(tuning),
        "agreement": share(tuning),
        "holdout_cases": len(holdout),
        "agreement_holdout": share(holdout),
        "disagreements": [o for o in confirmed if o.suggested != o.confirmed],
        "per_label": dict(sorted(per_label.items())),
    }


def _replay_cases(
    ctx: DiagnosisContext, cases: Sequence[_Case], should_stop: Callable[[], bool] | None
) -> tuple[list[Trace | None], list[Any] | None]:
    """One replay per case, each at its request's time and, over a workspace, with the profile
    mapped to its pipeline_version (one batched `run_many` per profile). Returns the replays and
    the profiles (None without a workspace); a replay a stop request cut short is None."""
    options = [RunOptions(as_of=case.record.ts) for case in cases]
    workspace = getattr(ctx, "workspace", None)
    if workspace is None or not hasattr(ctx, "use_profile"):
        runs: list[Trace | None] = [
            ctx.run(case.record.raw_query, option) for case, option in zip(cases, options, strict=True)
        ]
        return runs, None
    profiles = [resolve_profile(workspace.settings, case.record.pipeline_version) for case in cases]
    groups: dict[tuple[str, str], list[int]] = {}
    for index, profile in enumerate(profiles):
        groups.setdefault((profile.name, profile.config_hash), []).append(index)
    replays: dict[int, Trace] = {}
    for indexes in groups.values():
        pipeline = workspace.pipeline_for(profiles[indexes[0]])
        traces = pipeline.run_many(
            [cases[i].record.raw_query for i in indexes],
            options=[options[i] for i in indexes],
            should_stop=should_stop,
        )
        replays.update(zip(indexes, traces, strict=False))
    return [replays.get(i) for i in range(len(cases))], profiles


def diagnose_all(
    ctx: DiagnosisContext,
    engine: Engine,
    *,
    counterfactuals: bool = True,
    no_gold_labels: Sequence[str] = ("no_answer_in_kb",),
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> AgreementReport:
    """Diagnose every case (logged trace + one replay each), store each suggestion as the queue's
    `suggested` (`save_suggestions`), and report agreement."""
    started = time.perf_counter()
    cases = load_cases(engine, no_gold_labels)
    replays, profiles = _replay_cases(ctx, cases, should_stop)
    diagnoses: list[Diagnosis] = []
    outcomes: list[CaseOutcome] = []
    for done, (case, replay) in enumerate(zip(cases, replays, strict=True), start=1):
        if replay is None or (should_stop is not None and should_stop()):
            break
        mark = time.perf_counter()
        if profiles is not None:
            ctx.use_profile(profiles[done - 1])  # type: ignore[attr-defined]
        result = diagnose(
            ctx,
            case.record.raw_query,
            logged=logged_trace(case.record),
            gold=case.gold,
            request_id=case.request_id,
            replay=replay,
            counterfactuals=counterfactuals,
            should_stop=should_stop,
            as_of=case.record.ts,
        )
        if profiles is not None:
            ctx.use_profile(None)  # type: ignore[attr-defined]
        diagnoses.append(result)
        outcomes.append(
            CaseOutcome(
                request_id=case.request_id,
                suggested=result.suggestion.label,
                confirmed=case.confirmed,
                holdout=is_holdout(case.record),
                ms=round((time.perf_counter() - mark) * 1000, 1),
            )
        )
        if on_progress is not None:
            on_progress(done, len(cases))
    save_suggestions(engine, diagnoses)
    seconds = time.perf_counter() - started
    return AgreementReport(
        diagnoses=diagnoses,
        **agreement_report(outcomes),
        seconds=round(seconds, 2),
        ms_per_case=round(seconds * 1000 / len(diagnoses), 1) if diagnoses else 0.0,
    )


def confirm_fixture_truth(
    engine: Engine, allowed: Sequence[str], *, user: str = "fixture-truth"
) -> list[str]:
    """Label, set gold and confirm every flagged request whose log line carries an intended label.

    For the fixture traffic only: it plays the triager who knows the truth. Returns the request ids
    confirmed.
    """
    _, records = list_records(engine, status="new", limit=1_000_000)
    logged = get_requests(engine, [r.request_id for r in records])
    confirmed: list[str] = []
    for record in records:
        truth = fixture_field(logged[record.request_id]) if record.request_id in logged else {}
        label = truth.get("intended_label")
        if not label:
            continue
        gold = list(truth.get("gold_chunk_ids") or [])
        label_case(
            engine, record.request_id, label, allowed=allowed, primary=True, gold=gold or None, user=user
        )
        confirm_case(engine, record.request_id, user=user)
        confirmed.append(record.request_id)
    return confirmed
