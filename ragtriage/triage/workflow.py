"""The labelling workflow over the triage repository: label, confirm, dismiss, note, assign.

Status moves `new → in_progress → confirmed | dismissed` (a flag that is plain noise may be
dismissed straight from `new`; a closed case is reopened to `in_progress` by labelling it with
`reopen=True`). Every step is one or more repository changes chained on the revision the caller
saw, so a concurrent edit by someone else raises `ConflictError` naming who changed what.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import TypeVar

from sqlalchemy.engine import Engine

from ragtriage.errors import InputError
from ragtriage.kb.service import get_chunks
from ragtriage.store import triage_repo
from ragtriage.store.triage_repo import ConflictError, TriageRecord
from ragtriage.triage.gold_check import deleted_gold, describe
from ragtriage.wording import quoted

#: Allowed status changes: current → reachable.
TRANSITIONS: dict[str, frozenset[str]] = {
    "new": frozenset({"in_progress", "dismissed"}),
    "in_progress": frozenset({"confirmed", "dismissed"}),
    "confirmed": frozenset({"in_progress"}),
    "dismissed": frozenset({"in_progress"}),
}
T = TypeVar("T")
#: How both faces ask to label a closed case again.
REOPEN = '--reopen (`ragtriage label REQUEST_ID LABEL --reopen`; REST: `"reopen": true` in the body)'


def check_transition(record: TriageRecord, target: str) -> None:
    """Raise `InputError` when `record` may not move to `target`."""
    if target == record.status or target in TRANSITIONS.get(record.status, frozenset()):
        return
    hints = {
        ("new", "confirmed"): "label it first: `ragtriage label REQUEST_ID LABEL --primary --gold CHUNK_ID`",
        ("confirmed", "dismissed"): f"reopen it first by labelling it again with {REOPEN}",
        ("dismissed", "confirmed"): f"reopen it first by labelling it again with {REOPEN}",
    }
    hint = hints.get(
        (record.status, target),
        f"allowed from {record.status}: {', '.join(sorted(TRANSITIONS[record.status]))}",
    )
    raise InputError(
        f"case {quoted(record.request_id)} is {record.status}; it cannot become {target}: {hint}"
    )


def _current(engine: Engine, request_id: str, user: str | None) -> TriageRecord:
    """The triage record, opening one (status new, reason manual) for a logged request never flagged."""
    record = triage_repo.find_record(engine, request_id)
    if record is not None:
        return record
    # Assigning nobody opens the record through the repository (it checks the request exists).
    return triage_repo.assign(engine, request_id, None, user=user)


def _their_change(engine: Engine, request_id: str, since: int | None) -> str:
    """Every change made after revision `since`, from the audit log: `; their change: status →
    in_progress` for one, `; changed 3 times since your revision 1: labels → … (revision 2, by bob)
    · …` for more; the latest change when `since` is None; '' without an audit entry."""
    entries = triage_repo.audit_log(engine, request_id)
    newer = [e for e in entries if since is not None and e.revision > since] or entries[-1:]
    if not newer:
        return ""
    if len(newer) == 1:
        last = newer[0]
        return f"; their change: {last.action} → {_shown(last.change.get('after'))}"
    # ' · ' between changes: one change's own value may hold '; ' (labels: …; primary: …).
    changes = " · ".join(
        f"{e.action} → {_shown(e.change.get('after'))} (revision {e.revision}, by {e.user})" for e in newer
    )
    return f"; changed {len(newer)} times since your revision {since}: {changes}"


def _shown(value: object) -> str:
    """An audit value as a person reads it: `a, b` for a list, `key: value; …` for an object."""
    if value is None or value == []:
        return "none"
    if isinstance(value, list):
        return ", ".join(_shown(item) for item in value)
    if isinstance(value, dict):
        return "; ".join(f"{key}: {_shown(item)}" for key, item in value.items())
    return str(value)


def _explain_conflicts(engine: Engine, request_id: str, step: Callable[[], T], since: int) -> T:
    """Run `step`, which chains on revision `since`; a `ConflictError` is re-raised with every
    change made after it spelled out."""
    try:
        return step()
    except ConflictError as error:
        raise ConflictError(f"{error}{_their_change(engine, request_id, since)}") from None


def _revision(engine: Engine, record: TriageRecord, expected_revision: int | None) -> int:
    """The revision to chain on: the one the caller saw (checked now) or the current one."""
    if expected_revision is not None and expected_revision != record.revision:
        raise ConflictError(
            f"triage record {quoted(record.request_id)} was changed by {record.updated_by or 'someone'} at "
            f"{record.updated_at:%Y-%m-%d %H:%M:%S} UTC (revision {record.revision}; you had revision "
            f"{expected_revision}); reload it and apply your change again"
            + _their_change(engine, record.request_id, expected_revision)
        )
    return record.revision


def validate_label(label: str, allowed: Sequence[str]) -> str:
    """The label, stripped, when it is in the configured set; else `InputError` with the set."""
    cleaned = label.strip()
    if cleaned not in allowed:
        close = difflib.get_close_matches(cleaned, list(allowed), n=1)
        hint = f"did you mean {quoted(close[0])}? " if close else ""
        raise InputError(
            f"unknown label {quoted(label)}; {hint}use one of {', '.join(allowed)} (settings: [triage] labels)"
        )
    return cleaned


def validate_gold(engine: Engine, chunk_ids: Sequence[str]) -> list[str]:
    """The gold chunk ids when the KB holds every one live; else `InputError` naming the unknown
    ones, or the deleted ones with the chunk to pick instead."""
    cleaned = list(dict.fromkeys(c.strip() for c in chunk_ids if c.strip()))
    known = get_chunks(engine, cleaned)
    unknown = [c for c in cleaned if c not in known]
    if unknown:
        noun = "id" if len(unknown) == 1 else "ids"
        raise InputError(
            f"gold chunk {noun} not in the KB: {', '.join(unknown)}; list them with `ragtriage kb chunks`"
        )
    deleted = deleted_gold(engine, cleaned)
    if deleted:
        reason, fix = describe(deleted)
        raise InputError(f"gold {reason}; fix: {fix}")
    return cleaned


def label_case(
    engine: Engine,
    request_id: str,
    label: str,
    *,
    allowed: Sequence[str],
    primary: bool = False,
    gold: Sequence[str] | None = None,
    note: str | None = None,
    reopen: bool = False,
    user: str | None = None,
    expected_revision: int | None = None,
) -> TriageRecord:
    """Add `label` (primary with `primary`, or when the case has none yet), set gold, add a note,
    and move the case to `in_progress`.

    Raises:
        InputError: unknown label or gold id, or a closed case without `reopen`.
        ConflictError: someone changed the case since `expected_revision`.
        NotFoundError: no such logged request.
    """
    label = validate_label(label, allowed)
    gold_ids = validate_gold(engine, gold) if gold else None
    record = _current(engine, request_id, user)
    if record.status in ("confirmed", "dismissed") and not reopen:
        raise InputError(
            f"case {quoted(request_id)} is {record.status}; "
            f"label it again with {REOPEN} (it goes back to in_progress)"
        )
    revision = _revision(engine, record, expected_revision)
    labels = [*record.labels, label] if label not in record.labels else list(record.labels)
    new_primary = label if primary or record.primary_label is None else record.primary_label

    def steps() -> TriageRecord:
        current = record
        rev = revision
        if labels != record.labels or new_primary != record.primary_label:
            current = triage_repo.set_labels(
                engine, request_id, labels, primary=new_primary, expected_revision=rev, user=user
            )
            rev = current.revision
        if gold_ids is not None:
            current = triage_repo.set_gold(engine, request_id, gold_ids, expected_revision=rev, user=user)
            rev = current.revision
        if note:
            current = triage_repo.add_note(engine, request_id, note, expected_revision=rev, user=user)
            rev = current.revision
        if current.status != "in_progress":
            current = triage_repo.set_status(
                engine, request_id, "in_progress", expected_revision=rev, user=user
            )
        return current

    return _explain_conflicts(engine, request_id, steps, revision)


def confirm_case(
    engine: Engine,
    request_id: str,
    *,
    no_gold_labels: Sequence[str] = ("no_answer_in_kb",),
    user: str | None = None,
    expected_revision: int | None = None,
) -> TriageRecord:
    """Confirm an `in_progress` case: it needs a primary label and gold (unless the label needs none).

    Raises:
        InputError: wrong status, no primary label or no gold. ConflictError: a concurrent edit.
    """
    record = triage_repo.get_record(engine, request_id)
    check_transition(record, "confirmed")
    if record.primary_label is None:
        raise InputError(
            f"case {quoted(request_id)} has no primary label; run `ragtriage label {request_id} LABEL --primary`"
        )
    if not record.gold_chunk_ids and record.primary_label not in no_gold_labels:
        raise InputError(
            f"case {quoted(request_id)} has no gold chunk ids (label {record.primary_label}); run "
            f"`ragtriage label {request_id} {record.primary_label} --gold CHUNK_ID`"
        )
    revision = _revision(engine, record, expected_revision)
    return _explain_conflicts(
        engine,
        request_id,
        lambda: triage_repo.set_status(
            engine, request_id, "confirmed", expected_revision=revision, user=user
        ),
        revision,
    )


def dismiss_case(
    engine: Engine,
    request_id: str,
    *,
    reason: str | None = None,
    user: str | None = None,
    expected_revision: int | None = None,
) -> TriageRecord:
    """Dismiss a `new` or `in_progress` case (not a badcase after all), noting the reason."""
    record = _current(engine, request_id, user)
    check_transition(record, "dismissed")
    revision = _revision(engine, record, expected_revision)

    def steps() -> TriageRecord:
        rev = revision
        if reason:
            rev = triage_repo.add_note(
                engine, request_id, f"dismissed: {reason}", expected_revision=rev, user=user
            ).revision
        return triage_repo.set_status(engine, request_id, "dismissed", expected_revision=rev, user=user)

    return _explain_conflicts(engine, request_id, steps, revision)


def note_case(
    engine: Engine,
    request_id: str,
    text: str,
    *,
    user: str | None = None,
    expected_revision: int | None = None,
) -> TriageRecord:
    """Add a note (the status does not change)."""
    record = _current(engine, request_id, user)
    revision = _revision(engine, record, expected_revision)
    return _explain_conflicts(
        engine,
        request_id,
        lambda: triage_repo.add_note(engine, request_id, text, expected_revision=revision, user=user),
        revision,
    )


def assign_case(
    engine: Engine,
    request_id: str,
    assignee: str,
    *,
    user: str | None = None,
    expected_revision: int | None = None,
) -> TriageRecord:
    """Assign the case to `assignee` (`-` or an empty name unassigns)."""
    record = _current(engine, request_id, user)
    revision = _revision(engine, record, expected_revision)
    who = assignee.strip() or None
    who = None if who == "-" else who
    return _explain_conflicts(
        engine,
        request_id,
        lambda: triage_repo.assign(engine, request_id, who, expected_revision=revision, user=user),
        revision,
    )
