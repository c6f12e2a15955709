"""`ragtriage …`: one entry point. Expected errors → one stderr line and exit code 2; bugs keep their traceback."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

import click

from ragtriage import __version__
from ragtriage.errors import RagtriageError

#: Every command as "module:attribute"; a command's module is imported only when it runs (the
#: root `--help` lists them all), so the cold start of one command skips every other's imports.
COMMANDS = {
    "aliases": "ragtriage.commands.triage:aliases_group",
    "assign": "ragtriage.commands.workflow:assign_command",
    "confirm": "ragtriage.commands.workflow:confirm_command",
    "demo": "ragtriage.commands.tui:demo_command",
    "diagnose": "ragtriage.commands.triage:diagnose_command",
    "dismiss": "ragtriage.commands.workflow:dismiss_command",
    "doctor": "ragtriage.commands.evalset:doctor_command",
    "eval": "ragtriage.commands.eval:eval_group",
    "fidelity": "ragtriage.commands.fidelity:fidelity_command",
    "kb": "ragtriage.commands.kb:kb_group",
    "label": "ragtriage.commands.workflow:label_command",
    "logs": "ragtriage.commands.logs:logs_group",
    "monitor": "ragtriage.commands.monitor:monitor_command",
    "note": "ragtriage.commands.workflow:note_command",
    "profiles": "ragtriage.commands.profiles:profiles_command",
    "promote": "ragtriage.commands.evalset:promote_command",
    "queue": "ragtriage.commands.queue:queue_command",
    "replay": "ragtriage.commands.replay:replay_command",
    "report": "ragtriage.commands.report:report_command",
    "serve": "ragtriage.commands.serve:serve_command",
    "show": "ragtriage.commands.show:show_command",
    "tui": "ragtriage.commands.tui:tui_command",
}


#: Stands in for `-` while help text is wrapped, so no line breaks inside `--max-wrong-refusals`.
_NO_BREAK_HYPHEN = "\u2011"


class HelpFormatter(click.HelpFormatter):
    """click's help layout, except that a line never breaks at a hyphen: an option name or a
    hyphenated word stays whole on one line."""

    def _restore_hyphens(self, start: int) -> None:
        self.buffer[start:] = [part.replace(_NO_BREAK_HYPHEN, "-") for part in self.buffer[start:]]

    def write_text(self, text: str) -> None:
        start = len(self.buffer)
        super().write_text(text.replace("-", _NO_BREAK_HYPHEN))
        self._restore_hyphens(start)

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        start = len(self.buffer)
        protected = [(term, text.replace("-", _NO_BREAK_HYPHEN)) for term, text in rows]
        super().write_dl(protected, col_max, col_spacing)
        self._restore_hyphens(start)


class HelpContext(click.Context):
    """The context of every ragtriage command: help through `HelpFormatter`."""

    formatter_class = HelpFormatter


def _use_help_context(command: click.Command) -> None:
    """Give `command` and its subcommands `HelpContext` (they are defined in separate modules)."""
    command.context_class = HelpContext
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _use_help_context(sub)


class LazyGroup(click.Group):
    """click's lazy group: the commands of `COMMANDS`, each imported when asked for."""

    context_class = HelpContext

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name].split(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        _use_help_context(command)
        return command

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as interrupt:
            # Past click's handler, which writes an empty line to stderr before its Abort.
            raise _Interrupted(str(interrupt)) from None


class _Interrupted(Exception):
    """A Ctrl-C during a command, with what the command says it left (empty: nothing to say)."""


@click.group(
    cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110}
)
@click.version_option(__version__, prog_name="ragtriage")
@click.option("--home", type=click.Path(file_okay=False, path_type=Path), default=None, help="Data folder.")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Settings TOML.",
)
@click.pass_context
def cli(ctx: click.Context, home: Path | None, config_file: Path | None) -> None:
    """Triage RAG retrieval badcases: replay, diagnose, label, promote, re-evaluate."""
    ctx.obj = {"home": home, "config_file": config_file}


def main() -> None:
    """Console-script entry point."""
    try:
        status = cli(standalone_mode=False)
    except click.exceptions.Abort as abort:
        # A Ctrl-C (click turns it into Abort) may say what was left done and undone.
        reason = abort.__cause__
        said = str(reason) if isinstance(reason, KeyboardInterrupt) else ""
        _say_interrupted(said or "aborted")
    except click.ClickException as error:
        error.show()
        raise SystemExit(2) from None
    except click.exceptions.Exit as exit_:
        raise SystemExit(exit_.exit_code) from None
    except RagtriageError as error:
        click.echo(f"{error.title}: {error}", err=True)
        raise SystemExit(2) from None
    except (_Interrupted, KeyboardInterrupt) as interrupt:
        _say_interrupted(str(interrupt) or "interrupted")
    if isinstance(status, int) and status:
        raise SystemExit(status)


def _say_interrupted(message: str) -> NoReturn:
    """`message` as the one stderr line of a Ctrl-C, and exit 130. On a terminal it starts at the
    line's start, over the `^C` the terminal echoed (or on the line a transient progress bar left)."""
    prefix = "\r" if sys.stderr.isatty() else ""
    click.echo(prefix + message, err=True)
    raise SystemExit(130)
