"""`ragtriage label | confirm | dismiss | note | assign`: the triage workflow commands.

Every change goes through `ragtriage.triage.workflow` (status transitions, audit trail, revision
check against concurrent edits) and prints the resulting triage record.
"""

from __future__ import annotations

from pathlib import Path

import click

from ragtriage.commands.common import (
    echo_json,
    open_workspace,
    stderr_console,
    stdout_console,
    workspace_options,
)
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


def _label_from_file(
    path: Path,
    reopen: bool,
    allow_unknown_gold: bool,
    user: str | None,
    as_json: bool,
    home: Path | None,
    config_file: Path | None,
) -> None:
    """`label --from FILE`: apply the rows, print the counts (or JSON) and each rejected row."""
    from ragtriage.triage.bulk_labels import apply_label_file

    with open_workspace(home, config_file) as workspace:
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
    @user_option
    @revision_option
    @json_option
    @workspace_options
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
        home: Path | None,
        config_file: Path | None,
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
            _label_from_file(from_file, reopen, allow_unknown_gold, user, as_json, home, config_file)
            return
        if request_id is None or label is None:
            raise click.UsageError("give REQUEST_ID and LABEL, or --from FILE")
        if allow_unknown_gold:
            raise click.UsageError("--allow-unknown-gold goes with --from")
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
