"""`ragtriage profiles`: the replay profiles, where each is defined, and which pipeline_versions it serves."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from ragtriage.commands.common import WorkspaceAt, echo_json, stdout_console, workspace_options
from ragtriage.config.profiles import list_profiles


@click.command("profiles")
@click.option("--json", "as_json", is_flag=True, help="Print the profiles as JSON.")
@workspace_options
def profiles_command(as_json: bool, where: WorkspaceAt) -> None:
    """List the replay profiles: your own, the settings file (`default`) and the shipped presets."""
    with where.open() as workspace:
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
        _field(console, "from", row.source + (f" (extends {row.extends})" if row.extends else ""))
        _field(
            console, "serves", ", ".join(row.serves) if row.serves else "no pipeline_version (use --profile)"
        )
        _field(console, "shape", row.shape)
        if row.description:
            _field(console, "", row.description, style="dim")
    if len(settings.profiles) == 0:
        folder = settings.config_file.parent if settings.config_file else Path(".")
        console.print(
            Text(
                "No profiles of your own yet: add [profiles.NAME] tables to the settings file or "
                f"NAME.toml files to {folder / settings.replay.profile_dir}, and map pipeline_versions "
                "to them in [replay.versions] (README: Replay profiles).",
                style="dim",
            )
        )


LABEL_WIDTH = 10


def _field(console: Console, label: str, value: str, style: str = "") -> None:
    """`  label   value`, the value wrapped under itself (cell widths, so CJK counts double)."""
    width = max(20, console.width - LABEL_WIDTH)
    lines = Text(value, style=style).wrap(console, width, overflow="fold")
    for number, line in enumerate(lines):
        head = Text(f"  {label}".ljust(LABEL_WIDTH) if number == 0 else " " * LABEL_WIDTH, style="dim")
        line.rstrip()
        console.print(head + line, soft_wrap=True)
