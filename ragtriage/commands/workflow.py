"""`ragtriage label | confirm | dismiss | note | assign`: the triage workflow commands.

Every change goes through `ragtriage.triage.workflow` (status transitions, audit trail, revision
check against concurrent edits) and prints the resulting triage record.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.text import Text

from ragtriage.commands.common import (
    F,
    WorkspaceAt,
    echo_json,
    stderr_console,
    stdout_console,
    workspace_options,
)
from ragtriage.store.gold import gold_text
from ragtriage.store.triage_repo import TriageRecord
from ragtriage.triage import workflow
from ragtriage.triage.bulk_labels import apply_label_file
from ragtriage.workspace import Workspace


def _print_record(record: TriageRecord) -> None:
    """One line per case: status, labels with the primary first, gold, assignee and revision."""
    text = Text(f"{record.request_id}: {record.status}")
    if record.labels:
        others = [label for label in record.labels if label != record.primary_label]
        text.append(f"; primary {record.primary_label}")
        if others:
            text.append(f" (also {', '.join(others)})")
    if record.gold_chunk_ids:
        text.append(f"; gold {gold_text(record.gold_chunk_ids, ', ')}")
    if record.assignee:
        text.append(f"; assigned to {record.assignee}")
    text.append(f"; revision {record.revision}")
    stdout_console().print(text)


def _show(record: TriageRecord, as_json: bool) -> None:
    if as_json:
        echo_json(record)
    else:
        _print_record(record)


def _label_from_file(
    path: Path,
    reopen: bool,
    allow_unknown_gold: bool,
    user: str | None,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """`label --from FILE`: apply the rows, print the counts (or JSON) and each rejected row."""
    with where.open() as workspace:
        report = apply_label_file(
            workspace.engine,
            path,
            allowed=workspace.settings.triage.labels,
            no_gold_labels=workspace.settings.triage.no_gold_labels,
            reopen=reopen,
            allow_unknown_gold=allow_unknown_gold,
            user=user,
        )
    err = stderr_console()
    for line in [*report.errors, *report.warnings]:
        err.print(line, soft_wrap=True, markup=False, highlight=False)
    if as_json:
        echo_json(report)
    else:
        console = stdout_console()
        for name in ("read", "applied", "unchanged", "rejected", "blank"):
            console.print(f"{name:>9}: {getattr(report, name):,}")
        if report.read == report.blank:
            console.print(
                f"{path} has no rows; write one row per case (request_id, label, gold, note, status)"
            )
    if report.rejected:
        click.get_current_context().exit(2)


_USER_OPTION = click.option("--user", help="Who makes the change (default: $RAGTRIAGE_USER or the OS login).")
_REVISION_OPTION = click.option(
    "--revision",
    type=int,
    default=None,
    help="The revision you looked at; the change is refused if someone changed the case since.",
)
_JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print the triage record as JSON.")


def _change_options(func: F) -> F:
    """Add `--user`, `--revision`, `--json`, `--home` and `--config`: what every workflow change takes."""
    return _USER_OPTION(_REVISION_OPTION(_JSON_OPTION(workspace_options(func))))


def _workflow_change(change: Callable[..., TriageRecord]) -> Callable[..., None]:
    """Make `change(workspace, *arguments, user=, expected_revision=)` a command body.

    The command gets the shared options, runs the change in one workspace and prints the record.
    """

    @_change_options
    @functools.wraps(change)
    def command(
        *,
        user: str | None,
        revision: int | None,
        as_json: bool,
        where: WorkspaceAt,
        **arguments: Any,
    ) -> None:
        with where.open() as workspace:
            record = change(workspace, user=user, expected_revision=revision, **arguments)
        _show(record, as_json)

    return command


@click.command("label")
@click.argument("request_id", required=False)
@click.argument("label", required=False)
@click.option("--primary", is_flag=True, help="Make LABEL the primary label (the first label always is).")
@click.option(
    "--gold", "gold", multiple=True, metavar="CHUNK_ID", help="Gold chunk id (repeat); replaces the gold."
)
@click.option("--note", help="Add a note with the label.")
@click.option(
    "--reopen", is_flag=True, help="Label a confirmed or dismissed case again (back to in_progress)."
)
@click.option(
    "--from",
    "from_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Apply the rows of a JSONL or CSV file instead (request_id, label, gold, note, status, "
    "primary, revision); exit status 2 when any row was rejected.",
)
@click.option(
    "--allow-unknown-gold",
    is_flag=True,
    help=(
        "With --from: apply gold chunk ids the KB does not know or holds as deleted, "
        "with a warning (default: reject the row)."
    ),
)
@_change_options
def label_command(
    request_id: str | None,
    label: str | None,
    primary: bool,
    gold: tuple[str, ...],
    note: str | None,
    reopen: bool,
    from_file: Path | None,
    allow_unknown_gold: bool,
    user: str | None,
    revision: int | None,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Add a root-cause LABEL to REQUEST_ID (checked against [triage] labels); moves it to in_progress.

    With --from FILE, apply one row per case from a JSONL or CSV file, with the same checks,
    audit trail and conflict rules (a row's status may be in_progress, confirmed or dismissed).
    A bad row gets one line (file:row: field: reason; fix) and the good rows are still
    applied; read = applied + unchanged + rejected + blank. Exit status 2 when a row was rejected.
    """
    if from_file is not None:
        if request_id or label or gold or note or primary or revision is not None:
            raise click.UsageError(
                "--from takes no REQUEST_ID, LABEL, --gold, --note, --primary or --revision"
            )
        _label_from_file(from_file, reopen, allow_unknown_gold, user, as_json, where)
        return
    if request_id is None or label is None:
        raise click.UsageError("give REQUEST_ID and LABEL, or --from FILE")
    if allow_unknown_gold:
        raise click.UsageError("--allow-unknown-gold goes with --from")
    with where.open() as workspace:
        record = workflow.label_case(
            workspace.engine,
            request_id,
            label,
            allowed=workspace.settings.triage.labels,
            primary=primary,
            gold=list(gold) or None,
            note=note,
            reopen=reopen,
            user=user,
            expected_revision=revision,
        )
    _show(record, as_json)


@click.command("confirm")
@click.argument("request_id")
@_workflow_change
def confirm_command(workspace: Workspace, request_id: str, **change: Any) -> TriageRecord:
    """Confirm REQUEST_ID: needs a primary label and gold (not for labels in [triage] no_gold_labels)."""
    return workflow.confirm_case(
        workspace.engine,
        request_id,
        no_gold_labels=workspace.settings.triage.no_gold_labels,
        **change,
    )


@click.command("dismiss")
@click.argument("request_id")
@click.option("--reason", help="Why this is not a badcase (kept as a note).")
@_workflow_change
def dismiss_command(workspace: Workspace, request_id: str, reason: str | None, **change: Any) -> TriageRecord:
    """Dismiss REQUEST_ID (a flag that is not a retrieval badcase)."""
    return workflow.dismiss_case(workspace.engine, request_id, reason=reason, **change)


@click.command("note")
@click.argument("request_id")
@click.argument("text")
@_workflow_change
def note_command(workspace: Workspace, request_id: str, text: str, **change: Any) -> TriageRecord:
    """Add a note to REQUEST_ID."""
    return workflow.note_case(workspace.engine, request_id, text, **change)


@click.command("assign")
@click.argument("request_id")
@click.argument("assignee")
@_workflow_change
def assign_command(workspace: Workspace, request_id: str, assignee: str, **change: Any) -> TriageRecord:
    """Assign REQUEST_ID to ASSIGNEE (`-` unassigns)."""
    return workflow.assign_case(workspace.engine, request_id, assignee, **change)
