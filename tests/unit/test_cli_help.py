"""`--help` texts a new user reads first: they name what the command accepts and define each figure."""

from __future__ import annotations

import re

import click
from click.testing import CliRunner

from ragtriage.cli import cli


def _help(*command: str) -> str:
    result = CliRunner().invoke(cli, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_kb_add_help_names_every_format_it_reads() -> None:
    text = _help("kb", "add")
    for name in ("Markdown", "HTML", ".docx", ".pptx", "PDF"):
        assert name in text


def _command_paths(
    group: click.Group, ctx: click.Context, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    paths = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        paths.append((*prefix, name))
        if isinstance(command, click.Group):
            paths += _command_paths(command, ctx, (*prefix, name))
    return paths


def test_every_help_reads_at_80_columns() -> None:
    """Every option says what it does; no line past 80 columns, and no word or option name broken
    at its hyphen (`--max-` / `wrong-refusals`)."""
    paths = [(), *_command_paths(cli, click.Context(cli))]
    assert ("eval", "calibrate-refusal") in paths and ("kb", "import") in paths
    ctx = click.Context(cli)
    for path in paths:
        command: click.Command = cli
        for name in path:
            assert isinstance(command, click.Group)
            command = command.get_command(ctx, name)  # type: ignore[assignment]
        bare = [p.opts[0] for p in command.params if isinstance(p, click.Option) and not p.help]
        assert not bare, (path, "options without help", bare)
        result = CliRunner().invoke(cli, [*path, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        for line in result.output.splitlines():
            assert len(line) <= 80, (path, line)
        broken = re.search(r"\w-\n\s*\w+", result.output)
        assert broken is None, (path, broken.group(0) if broken else "")
