"""`ragtriage profiles`: the replay profiles, where each is defined, and which pipeline_versions it serves."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from ragtriage.commands.common import echo_json, open_workspace, stdout_console, workspace_options


@click.command("profiles")
@click.option("--json", "as_json", is_flag=True, help="Print the profiles as JSON.")
@workspace_options
def profiles_command(as_json: bool, home: Path | None, config_file: Path | None) -> None:
    """List the replay profiles: your own, the settings file (`default`) and the shipped presets."""
    from ragtriage.pipeline.profiles import list_profiles

    with open_workspace(home, config_file) as workspace:
        settings = workspace.settings
        rows = list_profiles(settings)
    if as_json:
        echo_json(rows)
        return
    console = stdout_console()
    for row in rows:
        title = Text(row.name, style="bold")
        title.append(f"  config {row.config_hash}", style="dim")
        if row.is_default:
            title.append("  default for unmapped versions", style="yellow")
        console.print(title)
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True, style="dim")
        grid.add_column(overflow="fold")
        grid.add_row("  from", row.source + (f" (extends {row.extends})" if row.extends else ""))
        grid.add_row(
            "  serves", ", ".join(row.serves) if row.serves else "no pipeline_version (use --profile)"
        )
        grid.add_row("  shape", row.shape)
        if row.description:
            grid.add_row("", Text(row.description, style="dim"))
        console.print(grid)
    if len(settings.profiles) == 0:
        where = settings.config_file.parent if settings.config_file else Path(".")
        console.print(
            Text(
                "No profiles of your own yet: add [profiles.NAME] tables to the settings file or "
                f"NAME.toml files to {where / settings.replay.profile_dir}, and map pipeline_versions "
                "to them in [replay.versions] (README: Replay profiles).",
                style="dim",
            )
        )


def register(cli: click.Group) -> None:
    """Attach this module's commands to the root group."""
    cli.add_command(profiles_command)
