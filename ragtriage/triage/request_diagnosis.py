"""Diagnose a logged request (or a bare query): load its logged trace and stored gold, then `diagnose`.

The CLI's `diagnose`, `aliases suggest` and the REST API's diagnosis view all go through
`diagnose_request`, so the same request gets the same diagnosis on every face.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ragtriage.config.profiles import resolve_profile
from ragtriage.errors import InputError, NotFoundError
from ragtriage.logs.requests import find_request
from ragtriage.pipeline.types import Trace
from ragtriage.replay.logged import logged_trace
from ragtriage.store.gold import gold_ids
from ragtriage.store.triage_repo import find_record
from ragtriage.triage.context import DiagnosisContext
from ragtriage.triage.diagnose import Diagnosis, diagnose
from ragtriage.wording import quoted

if TYPE_CHECKING:
    from ragtriage.workspace import Workspace

__all__ = ["LoggedCase", "diagnose_request", "logged_case"]


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

    `gold` overrides the triage record's gold (None: use the stored gold, itself maybe unknown).

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
    return result, confirmed_label
