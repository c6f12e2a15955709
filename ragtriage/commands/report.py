"""`ragtriage report RUN [--compare RUN_B] -o report.html`: one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path

import click

from ragtriage.commands.common import open_workspace, workspace_options


def register(cli: click.Group) -> None:
    """Attach `report` to the root group."""

    @cli.command("report")
    @click.argument("run_ref", metavar="RUN")
    @click.option("--compare", "compare", metavar="RUN_B", default=None, help="Show RUN_B against RUN.")
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
        run_ref: str, compare: str | None, out: Path, home: Path | None, config_file: Path | None
    ) -> None:
        """Write the HTML report of RUN: metrics with config and dataset version, per-bucket figures,
        charts (inline SVG), the worst cases with their gold journey; with --compare, deltas,
        win/tie/loss and the significance test. No network references: mail it or attach it to CI."""
        from ragtriage.service.report import write_report

        with open_workspace(home, config_file) as workspace:
            path = write_report(workspace.engine, run_ref, out, compare=compare)
        click.echo(f"wrote {path}", err=True)
