"""`ragtriage report RUN [--compare RUN_B] -o report.html` and `ragtriage report --monitor`:
one self-contained HTML file each."""

from __future__ import annotations

from pathlib import Path

import click

from ragtriage.commands.common import WorkspaceAt, by_option, since_option, workspace_options
from ragtriage.commands.monitor import workspace_monitor
from ragtriage.logs.queue import parse_since


@click.command("report")
@click.argument("run_ref", metavar="RUN", required=False)
@click.option("--compare", "compare", metavar="RUN_B", default=None, help="Show RUN_B against RUN.")
@click.option("--monitor", is_flag=True, help="The retrieval health of `ragtriage monitor` instead of a run.")
@since_option("30d", "With --monitor, requests since a time")
@by_option("Group per day (UTC) or per logged pipeline_version.")
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="HTML file to write.",
)
@workspace_options
def report_command(
    run_ref: str | None,
    compare: str | None,
    monitor: bool,
    since: str,
    by: str,
    out: Path,
    where: WorkspaceAt,
) -> None:
    """Write the HTML report of RUN: metrics with config and dataset version, per-bucket figures,
    charts (inline SVG), the worst cases with their gold journey; with --compare, deltas,
    win/tie/loss and the significance test. With --monitor, the retrieval health per day or
    pipeline_version instead. No network references: mail it or attach it to CI."""
    if monitor and (run_ref or compare):
        raise click.UsageError("--monitor reports the stored logs, not a run: drop RUN and --compare")
    if not monitor and not run_ref:
        raise click.UsageError("give a RUN (see `ragtriage eval runs`), or --monitor")
    # Jinja2 and matplotlib: only when a report is written, not on every command's --help.
    from ragtriage.service.report import write_health, write_report

    with where.open() as workspace:
        if monitor:
            path = write_health(workspace_monitor(workspace, by, parse_since(since)), out)
        else:
            path = write_report(workspace.engine, str(run_ref), out, compare=compare)
    click.echo(f"wrote {path}", err=True)
