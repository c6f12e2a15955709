"""`label --from FILE`: apply labels, gold, notes and statuses from a file, row by row.

Each row goes through the same checks as `ragtriage label` / `confirm` / `dismiss` (configured
labels, gold ids known to the KB, status transitions, `--reopen` for a closed case, the revision
the row names) and the same repository changes (audit trail, optimistic concurrency). Every check
runs before the row's first change, so a rejected row changes nothing. A row whose case already
holds what it says is `unchanged` (running a file twice applies nothing twice). Always

    read = applied + unchanged + rejected + blank

Gold ids unknown to the KB, or naming a deleted chunk, reject the row, as with `label`; with
`allow_unknown_gold` the row is applied and each such id is reported as a warning (for labels
made before the KB was imported or changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from ragtriage.errors import InputError
from ragtriage.kb.service import get_chunks
from ragtriage.store import triage_repo
from ragtriage.store.gold import clean_gold
from ragtriage.store.triage_repo import ConflictError, TriageRecord
from ragtriage.triage.gold_check import deleted_gold, describe
from ragtriage.triage.label_file import ROW_FIELDS, LabelFile, LabelRow, RowError
from ragtriage.triage.workflow import TRANSITIONS, validate_label
from ragtriage.wording import plural_noun, quoted

#: Statuses a row may ask for (`new` is where ingest puts a case, not a triage decision).
ROW_STATUSES = ("in_progress", "confirmed", "dismissed")


class BulkLabelReport(BaseModel):
    """What one `label --from` did. `read` always equals applied + unchanged + rejected + blank."""

    file: str
    read: int = 0
    applied: int = 0
    unchanged: int = 0
    rejected: int = 0
    blank: int = 0
    errors: list[str] = Field(default_factory=list)
    """One `file:row: field: reason; fix: …` line per rejected row."""
    warnings: list[str] = Field(default_factory=list)
    """Applied rows worth a look (gold ids unknown to the KB), and ignored columns."""

    def reconciles(self) -> bool:
        """True when every row read is accounted for exactly once."""
        return self.read == self.applied + self.unchanged + self.rejected + self.blank


class _Plan(BaseModel):
    """The changes one row makes to one case (None: leave as it is)."""

    labels: list[str] | None = None
    primary: str | None = None
    gold: list[str | dict[str, Any]] | None = None
    note: str | None = None
    status: str | None = None


def apply_label_file(
    engine: Engine,
    path: Path,
    *,
    allowed: Sequence[str],
    no_gold_labels: Sequence[str] = ("no_answer_in_kb",),
    reopen: bool = False,
    allow_unknown_gold: bool = False,
    user: str | None = None,
) -> BulkLabelReport:
    """Apply every row of `path` (JSON Lines, a JSON array or CSV; see `label_file`).

    Raises:
        InputError: the file cannot be read as a label file at all (nothing is applied).
    """
    label_file = LabelFile(path)
    report = BulkLabelReport(file=str(path))
    for row in label_file.rows():
        report.read += 1
        if row is None:
            report.blank += 1
            continue
        if isinstance(row, RowError):
            _reject(report, row)
            continue
        try:
            outcome = _apply_row(
                engine, row, allowed, no_gold_labels, reopen, allow_unknown_gold, user, report
            )
        except _Rejected as rejected:
            _reject(report, rejected.error)
            continue
        if outcome:
            report.applied += 1
        else:
            report.unchanged += 1
    if label_file.ignored_columns:
        report.warnings.append(
            f"{path}: {plural_noun('column', len(label_file.ignored_columns))} ignored: "
            f"{', '.join(label_file.ignored_columns)} "
            f"(a row has {', '.join(ROW_FIELDS)})"
        )
    return report


class _Rejected(Exception):
    def __init__(self, row: LabelRow, field: str, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.error = RowError(row.row_no, field, reason, fix)


def _reject(report: BulkLabelReport, error: RowError) -> None:
    report.rejected += 1
    report.errors.append(error.describe(report.file))


def _apply_row(
    engine: Engine,
    row: LabelRow,
    allowed: Sequence[str],
    no_gold_labels: Sequence[str],
    reopen: bool,
    allow_unknown_gold: bool,
    user: str | None,
    report: BulkLabelReport,
) -> bool:
    """Check and apply one row; True when it changed the case, False when it already held it."""
    record = _record(engine, row)
    plan = _plan(engine, row, record, allowed, allow_unknown_gold, report)
    if not _changes(plan, record):
        return False
    status = record.status if record is not None else "new"
    if status in ("confirmed", "dismissed") and not reopen:
        raise _Rejected(row, "status", f"the case is {status}", "add --reopen to change a closed case")
    if row.revision is not None and record is not None and row.revision != record.revision:
        raise _Rejected(
            row,
            "revision",
            f"the case was changed by {record.updated_by or 'someone'} since (revision {record.revision}, "
            f"the row has {row.revision})",
            "reload the case and write the current revision",
        )
    _check_outcome(row, plan, record, no_gold_labels)
    try:
        _run(engine, row, plan, record, user)
    except ConflictError as error:
        raise _Rejected(row, "revision", str(error), "apply the row again") from None
    return True


def _record(engine: Engine, row: LabelRow) -> TriageRecord | None:
    """The case's triage record (None: a logged request never flagged, opened on the first change)."""
    record = triage_repo.find_record(engine, row.request_id)
    if record is None:
        if not triage_repo.request_logged(engine, row.request_id):
            raise _Rejected(
                row, "request_id", f"no logged request {quoted(row.request_id)}", "ingest its log first"
            )
    return record


def _plan(
    engine: Engine,
    row: LabelRow,
    record: TriageRecord | None,
    allowed: Sequence[str],
    allow_unknown_gold: bool,
    report: BulkLabelReport,
) -> _Plan:
    if row.label is None and row.gold is None and row.note is None and row.status is None:
        raise _Rejected(row, "-", "nothing to apply", "give a label, gold, note or status")
    plan = _Plan(status=row.status)
    labels = list(record.labels) if record is not None else []
    primary = record.primary_label if record is not None else None
    if row.label is not None:
        try:
            label = validate_label(row.label, allowed)
        except InputError as error:
            raise _Rejected(row, "label", str(error), "correct it, or add it to [triage] labels") from None
        plan.labels = labels if label in labels else [*labels, label]
        plan.primary = label if row.primary or primary is None else primary
    elif row.primary:
        raise _Rejected(row, "primary", "primary is set but the row has no label", "give the label")
    if row.status is not None and row.status not in ROW_STATUSES:
        raise _Rejected(
            row, "status", f"unknown status {quoted(row.status)}", f"use one of {', '.join(ROW_STATUSES)}"
        )
    if row.gold is not None:
        plan.gold = _checked_gold(engine, row, allow_unknown_gold, report)
    if row.note is not None and (record is None or all(n.text != row.note for n in record.notes)):
        plan.note = row.note
    return plan


def _checked_gold(
    engine: Engine, row: LabelRow, allow_unknown_gold: bool, report: BulkLabelReport
) -> list[str | dict[str, Any]]:
    try:
        gold = clean_gold(row.gold or [])
    except InputError as error:
        raise _Rejected(row, "gold", str(error), 'write ["c1", "c2"]') from None
    ids = [item if isinstance(item, str) else str(item["chunk_id"]) for item in gold]
    known = get_chunks(engine, ids)
    unknown = [chunk_id for chunk_id in ids if chunk_id not in known]
    noun = "id" if len(unknown) == 1 else "ids"
    if unknown and not allow_unknown_gold:
        raise _Rejected(
            row,
            "gold",
            f"chunk {noun} not in the KB: {', '.join(unknown)}",
            "check them with `ragtriage kb chunks`, import production's chunks (`kb import`), "
            "or pass --allow-unknown-gold",
        )
    if unknown:
        report.warnings.append(
            f"{report.file}:{row.row_no}: gold: not in the KB (applied): {', '.join(unknown)}"
        )
    deleted = deleted_gold(engine, [chunk_id for chunk_id in ids if chunk_id in known])
    if deleted:
        reason, fix = describe(deleted)
        if not allow_unknown_gold:
            raise _Rejected(row, "gold", reason, f"{fix}; or pass --allow-unknown-gold")
        report.warnings.append(f"{report.file}:{row.row_no}: gold: {reason} (applied)")
    return gold


def _changes(plan: _Plan, record: TriageRecord | None) -> bool:
    if record is None:
        return True
    wanted_status = plan.status or ("in_progress" if plan.note or _differs(plan, record) else record.status)
    return _differs(plan, record) or plan.note is not None or wanted_status != record.status


def _differs(plan: _Plan, record: TriageRecord) -> bool:
    return (
        plan.labels is not None and (plan.labels != record.labels or plan.primary != record.primary_label)
    ) or (plan.gold is not None and plan.gold != record.gold_chunk_ids)


def _check_outcome(
    row: LabelRow, plan: _Plan, record: TriageRecord | None, no_gold_labels: Sequence[str]
) -> None:
    """A confirmed case needs a primary label and gold (unless its label needs none), as `confirm`."""
    if plan.status != "confirmed":
        return
    primary = plan.primary if plan.labels is not None else (record.primary_label if record else None)
    gold = plan.gold if plan.gold is not None else (record.gold_chunk_ids if record else [])
    if primary is None:
        raise _Rejected(row, "label", "a confirmed case needs a primary label", "give the label")
    if not gold and primary not in no_gold_labels:
        raise _Rejected(
            row, "gold", f"a case confirmed as {primary} needs gold chunk ids", "give the gold chunk ids"
        )


def _run(engine: Engine, row: LabelRow, plan: _Plan, record: TriageRecord | None, user: str | None) -> None:
    """The row's repository changes, each chained on the revision the previous one produced."""
    request_id = row.request_id
    revision = record.revision if record is not None else None
    status = record.status if record is not None else "new"
    changed = False
    if plan.labels is not None and (
        record is None or plan.labels != record.labels or plan.primary != record.primary_label
    ):
        current = triage_repo.set_labels(
            engine, request_id, plan.labels, primary=plan.primary, expected_revision=revision, user=user
        )
        revision, status, changed = current.revision, current.status, True
    if plan.gold is not None and (record is None or plan.gold != record.gold_chunk_ids):
        current = triage_repo.set_gold(engine, request_id, plan.gold, expected_revision=revision, user=user)
        revision, status, changed = current.revision, current.status, True
    if plan.note is not None:
        current = triage_repo.add_note(engine, request_id, plan.note, expected_revision=revision, user=user)
        revision, status, changed = current.revision, current.status, True
    target = plan.status or ("in_progress" if changed else status)
    for step in _status_steps(status, target):
        current = triage_repo.set_status(engine, request_id, step, expected_revision=revision, user=user)
        revision = current.revision


def _status_steps(status: str, target: str) -> list[str]:
    """The moves from `status` to `target` through the workflow (closed cases reopen first)."""
    if status == target:
        return []
    if target in TRANSITIONS.get(status, frozenset()):
        return [target]
    return ["in_progress", target] if target != "in_progress" else ["in_progress"]
