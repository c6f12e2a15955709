"""`ragtriage queue sample`: a stratified random sample of unflagged requests into the queue."""

from __future__ import annotations

import click
from rich.table import Table
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
from ragtriage.triage.sampling import SAMPLED_REASON, UNKNOWN_STRATUM, SampleReport, sample_requests


@click.command("sample")
@click.option(
    "--n", "n", type=click.IntRange(min=1), default=100, show_default=True, help="Requests to draw."
)
@since_option("7d", "Only requests since a time")
@by_option("Strata: the request's day (UTC) or its logged pipeline_version.")
@click.option("--seed", type=int, default=None, help="Random seed (default: a new one, printed).")
@click.option("--json", "as_json", is_flag=True, help="Print the draw as JSON.")
@workspace_options
def sample_command(
    n: int,
    since: str,
    by: str,
    seed: int | None,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Draw a stratified random sample of unflagged requests into the queue as `sampled`.

    Each stratum (day or pipeline_version) gets a share proportional to its unflagged requests
    (largest remainder); within it the draw is uniform, without replacement, from the seed. Drawn
    requests get a triage record with reason `sampled` (`ragtriage queue --reason sampled`), so a
    second draw never repeats one. Cases promoted from them carry the bucket `origin:sampled`.
    """
    since_time = parse_since(since)
    with where.open() as workspace:
        report = sample_requests(workspace.engine, n, since=since_time, by=by, seed=seed)  # type: ignore[arg-type]
        hint = (
            empty_window_hint(workspace.engine, since_time, "unflagged request")
            if report.population == 0
            else ""
        )
    if as_json:
        echo_json(report)
        return
    _print_report(report, hint)


def _print_report(report: SampleReport, empty_hint: str) -> None:
    console = stdout_console()
    if report.population == 0:
        console.print(Text(empty_hint))
        return
    table = Table(show_edge=False, pad_edge=False)
    table.add_column(report.by, no_wrap=True)
    table.add_column("unflagged", justify="right")
    table.add_column("drawn", justify="right")
    for stratum in report.strata:
        # Requests that logged no pipeline_version (or no time) form one stratum.
        name = stratum.stratum
        if name == UNKNOWN_STRATUM:
            name = "unversioned" if report.by == "version" else "undated"
        table.add_row(Text(name), f"{stratum.population:,}", f"{stratum.drawn:,}")
    console.print(table)
    console.print(
        Text(
            f"drew {report.drawn:,} of {report.population:,} unflagged requests (asked {report.requested:,}) "
            f"with seed {report.seed}; list them with `ragtriage queue --reason {SAMPLED_REASON}`"
        )
    )
