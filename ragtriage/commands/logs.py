"""`ragtriage logs ingest` and `logs quarantine`: request logs into the triage store, and the lines it refused."""

from __future__ import annotations

from pathlib import Path

import click

from ragtriage.commands.common import (
    WorkspaceAt,
    echo_json,
    stderr_console,
    stdout_console,
    workspace_options,
)
from ragtriage.commands.ingest_report import QUARANTINE_SHOWN, print_ingest_report
from ragtriage.logs.formats.detect import FORMAT_CHOICES
from ragtriage.logs.ingest import ingest_files
from ragtriage.logs.requests import conflicting_lines, quarantined_lines
from ragtriage.render.text import plural


@click.group("logs")
def logs_group() -> None:
    """Online request logs: ingest JSONL files into the triage store."""


@logs_group.command("ingest")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--strict", is_flag=True, help="Stop at the first bad line (default: quarantine it and go on).")
@click.option(
    "--format",
    "log_format",
    type=click.Choice(FORMAT_CHOICES),
    default="auto",
    show_default=True,
    help="Format of every file; auto tells each file's format by its content.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@workspace_options
def ingest_command(
    files: tuple[Path, ...],
    strict: bool,
    log_format: str,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Ingest request logs (schema v1 or flat JSONL, .gz too, Parquet, CSV) or traces (OTLP/JSON with
    OpenInference attributes, Phoenix or Langfuse exports); flagged requests enter the queue
    as `new`.

    The files of one ingest are read together: a trace's spans may be spread over several, and a
    Langfuse export is given as its observations, traces and scores files. A trace counts as one
    line. Parquet and CSV exports of schema v1 or the flat form are read row by row. A line for a
    stored request that adds facts (feedback, annotations, scores, stages it lacked; feedback
    that names only its trace or span) is merged in and flagging runs again; one that differs in a
    field both have is a conflict. Idempotent: ingesting the same files again changes nothing.
    Always read = ingested + merged + duplicates + conflicts + quarantined + blank.

    Exit status 2 (the counts are still printed) when a non-empty file held no readable request:
    every line quarantined or blank. A file of no known format stops the ingest before anything
    is stored (also exit 2).
    """
    err = stderr_console()
    with where.open() as workspace:
        logs_settings = workspace.settings.logs

        def progress(read: int, _total: int | None) -> None:
            if err.is_terminal:
                err.print(f"\r{read:,} lines read", end="")

        report = ingest_files(
            workspace.engine,
            list(files),
            flagging=logs_settings.flagging,
            strict=strict,
            batch_size=logs_settings.batch_size,
            on_progress=progress,
            log_format=log_format,
            otel=logs_settings.otel,
        )
        if err.is_terminal:
            err.print()
        quarantine = quarantined_lines(workspace.engine, report.files, limit=QUARANTINE_SHOWN)
        conflicts = conflicting_lines(workspace.engine, report.files) if report.conflicts else None
    if as_json:
        echo_json(report)
    else:
        print_ingest_report(report, *quarantine, conflicts)
    if report.files_without_requests:
        for path in report.broken_documents:
            others = len(report.files) > 1
            err.print(
                f"input error: {path}: nothing was read from it: a JSON document that does not parse "
                "(where it breaks is above); fix: download or export it again, then run the same "
                "ingest again" + (" (what was read from the other files stays stored)" if others else ""),
                soft_wrap=True,
            )
        for path in report.files_without_requests:
            if path in report.broken_documents:
                continue
            err.print(
                f"input error: {path}: no request could be read from it (read as "
                f"{report.formats.get(path, 'v1')}); fix: check that it is a request log "
                f"(`ragtriage logs quarantine {path}` says why each line was refused)",
                soft_wrap=True,
            )
        click.get_current_context().exit(2)


@logs_group.command("quarantine")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--limit", type=click.IntRange(min=1), default=200, show_default=True, help="Lines to list.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@workspace_options
def quarantine_command(files: tuple[Path, ...], limit: int, as_json: bool, where: WorkspaceAt) -> None:
    """List quarantined log lines (of FILES, or of every file) as `file:line: reason`, in file order."""
    with where.open() as workspace:
        total, lines = quarantined_lines(workspace.engine, [str(f) for f in files], limit=limit)
    if as_json:
        echo_json({"total": total, "lines": lines})
        return
    console = stdout_console()
    for line in lines:
        console.print(f"{line.source_file}:{line.line_no}: [{line.kind}] {line.reason}", soft_wrap=True)
    if not total:
        searched = ", ".join(str(f) for f in files) if files else "any ingested file"
        console.print(f"no quarantined lines for {searched}; every line read was ingested or blank")
        return
    console.print(f"{len(lines):,} of {plural(total, 'quarantined line')}")
