"""`ragtriage monitor`: retrieval health per day or pipeline_version, as a table, charts or JSON."""

from __future__ import annotations

import sys
from datetime import datetime

import click
from rich.text import Text

from ragtriage.commands.common import (
    WorkspaceAt,
    by_option,
    echo_json,
    since_option,
    stdout_console,
    workspace_options,
)
from ragtriage.logs.queue import parse_since
from ragtriage.logs.requests import empty_window_hint
from ragtriage.render.monitor_view import monitor_renderable
from ragtriage.triage.monitor import DEFINITIONS, MonitorReport, compute_monitor
from ragtriage.workspace import Workspace


def _help() -> str:
    figures = "\n\n".join(f"{name}: {text}." for name, text in DEFINITIONS.items())
    return (
        "Retrieval health from the stored logs, triage records and eval runs, per day (UTC) or per "
        "logged pipeline_version. A figure without data prints n/a with the reason, never 0.\n\n"
        "\b\nFigures:\n\n" + figures
    )


def workspace_monitor(
    workspace: Workspace, by: str, since: datetime, coverage_n: int | None = None
) -> MonitorReport:
    """`compute_monitor` with the settings' bad ratings, candidate pool (unless `coverage_n`) and KB."""
    settings = workspace.settings
    return compute_monitor(
        workspace.engine,
        by=by,  # type: ignore[arg-type]
        since=since,
        bad_ratings=settings.logs.flagging.bad_ratings,
        coverage_n=coverage_n or settings.retrieval.candidate_pool,
        kb=settings.kb.name,
    )


@click.command("monitor", help=_help())
@since_option("7d")
@by_option("Group per day (UTC) or per logged pipeline_version.")
@click.option(
    "--coverage-n",
    type=click.IntRange(min=1),
    default=None,
    help="N of candidate coverage@N [retrieval.candidate_pool].",
)
@click.option("--no-charts", is_flag=True, help="Only the table.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@workspace_options
def monitor_command(
    since: str,
    by: str,
    coverage_n: int | None,
    no_charts: bool,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    since_time = parse_since(since)
    with where.open() as workspace:
        report = workspace_monitor(workspace, by, since_time, coverage_n)
        hint = empty_window_hint(workspace.engine, since_time) if report.overall.requests == 0 else ""
    if as_json:
        echo_json(report)
        return
    console = stdout_console()
    if report.backfilled:
        click.echo(f"computed the monitor columns of {report.backfilled:,} earlier-stored requests", err=True)
    if report.overall.requests == 0:
        console.print(Text(hint))
    width = min(console.width, 100)
    console.print(monitor_renderable(report, width, color=sys.stdout.isatty(), charts=not no_charts))
