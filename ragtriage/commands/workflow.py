"""`ragtriage label | confirm | dismiss | note | assign`: the triage workflow commands.

Every change goes through `ragtriage.triage.workflow` (status transitions, audit trail, revision
check against concurrent edits) and prints the resulting triage record.
"""

from __future__ import annotations

from pathlib import Path

import click

from ragtriage.commands.common import echo_json, open_workspace, stdout_console, workspace_options
from ragtriage.store.triage_repo import TriageRecord


def _print_record(record: TriageRecord) -> None:
    """One line per case: status, labels with the primary first, gold, assignee and revision."""
    from rich.text import Text

    text = Text(f"{record.request_id}: {record.status}")
    if record.labels:
        others = [label for label in record.labels if label != record.primary_label]
        text.append(f"; primary {record.primary_label}")
        if others:
            text.append(f" (also {', '.join(others)})")
    if record.gold_chunk_ids:
        gold = [g if isinstance(g, str) else str(g.get("chunk_id")) for g in record.gold_chunk_ids]
        text.append(f"; gold {', '.join(gold)}")
    if record.assignee:
        text.append(f"; assigned to {record.assignee}")
    text.append(f"; revision {record.revision}")
    stdout_console().print(text)


def _show(record: TriageRecord, as_json: bool) -> None:
    if as_json:
        echo_json(record)
    else:
        _print_record(record)


def register(cli: click.Group) -> None:
    """`label`, `confirm`, `dismiss`, `note`, `assign`: the triage workflow (ragtriage.triage.workflow)."""
    from ragtriage.triage import workflow

    user_option = click.option(
        "--user", help="Who makes the change (default: $RAGTRIAGE_USER or the OS login)."
    )
    revision_option = click.option(
        "--revision",
        type=int,
        default=None,
        help="The revision you looked at; the change is refused if someone changed the case since.",
    )
    json_option = click.option("--json", "as_json", is_flag=True, help="Print the triage record as JSON.")

    @cli.command("label")
    @click.argument("request_id")
    @click.argument("label")
    @click.option("--primary", is_flag=True, help="Make LABEL the primary label (the first label always is).")
    @click.option(
        "--gold", "gold", multiple=True, metavar="CHUNK_ID", help="Gold chunk id (repeat); replaces the gold."
    )
    @click.option("--note", help="Add a note with the label.")
    @click.option(
        "--reopen", is_flag=True, help="Label a confirmed or dismissed case again (back to in_progress)."
    )
    @user_option
    @revision_option
    @json_option
    @workspace_options
    def label_command(
        request_id: str,
        label: str,
        primary: bool,
        gold: tuple[str, ...],
        note: str | None,
        reopen: bool,
        user: str | None,
        revision: int | None,
        as_json: bool,
        home: Path | None,
        config_file: Path | None,
    ) -> None:
        """Add a root-cause LABEL to REQUEST_ID (checked against [triage] labels); moves it to in_progress."""
        with open_workspace(home, config_file) as workspace:
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

    @cli.command("confirm")
    @click.argument("request_id")
    @user_option
    @revision_option
    @json_option
    @workspace_options
    def confirm_command(
        request_id: str,
        user: str | None,
        revision: int | None,
        as_json: bool,
        home: Path | None,
        config_file: Path | None,
    ) -> None:
        """Confirm REQUEST_ID: needs a primary label and gold (not for labels in [triage] no_gold_labels)."""
        with open_workspace(home, config_file) as workspace:
            record = workflow.confirm_case(
                workspace.engine,
                request_id,
                no_gold_labels=workspace.settings.triage.no_gold_labels,
                user=user,
                expected_revision=revision,
            )
        _show(record, as_json)

    @cli.command("dismiss")
    @click.argument("request_id")
    @click.option("--reason", help="Why this is not a badcase (kept as a note).")
    @user_option
    @revision_option
    @json_option
    @workspace_options
    def dismiss_command(
        request_id: str,
        reason: str | None,
        user: str | None,
        revision: int | None,
        as_json: bool,
        home: Path | None,
        config_file: Path | None,
    ) -> None:
        """Dismiss REQUEST_ID (a flag that is not a retrieval badcase)."""
        with open_workspace(home, config_file) as workspace:
            record = workflow.dismiss_case(
                workspace.engine, request_id, reason=reason, user=user, expected_revision=revision
            )
        _show(record, as_json)

    @cli.command("note")
    @click.argument("request_id")
    @click.argument("text")
    @user_option
    @revision_option
    @json_option
    @workspace_options
    def note_command(
        request_id: str,
        text: str,
        user: str | None,
        revision: int | None,
        as_json: bool,
        home: Path | None,
        config_file: Path | None,
    ) -> None:
        """Add a note to REQUEST_ID."""
        with open_workspace(home, config_file) as workspace:
            record = workflow.note_case(
                workspace.engine, request_id, text, user=user, expected_revision=revision
            )
        _show(record, as_json)

    @cli.command("assign")
    @click.argument("request_id")
    @click.argument("assignee")
    @user_option
    @revision_option
    @json_option
    @workspace_options
    def assign_command(
        request_id: str,
        assignee: str,
        user: str | None,
        revision: int | None,
        as_json: bool,
        home: Path | None,
        config_file: Path | None,
    ) -> None:
        """Assign REQUEST_ID to ASSIGNEE (`-` unassigns)."""
        with open_workspace(home, config_file) as workspace:
            record = workflow.assign_case(
                workspace.engine, request_id, assignee, user=user, expected_revision=revision
            )
        _show(record, as_json)
