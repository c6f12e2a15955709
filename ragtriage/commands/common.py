"""Options and helpers every command shares."""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ragtriage.render.fit import data_console
from ragtriage.render.text import hanging_text
from ragtriage.store.eval_repo import DEFAULT_DATASET
from ragtriage.wording import plural
from ragtriage.workspace import Workspace

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class WorkspaceAt:
    """The `--home` and `--config` of a command: where its workspace is."""

    home: Path | None
    config_file: Path | None

    @contextmanager
    def open(self) -> Iterator[Workspace]:
        """Open the workspace for one command and always close it (releases the Qdrant folder lock)."""
        workspace = Workspace.open(self.home, self.config_file)
        try:
            yield workspace
        finally:
            workspace.close()


def workspace_options(func: F) -> F:
    """Add `--home` and `--config` to a command (they may also be given before the command name);
    the command gets them as `where: WorkspaceAt`."""

    @click.option(
        "--home",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Data folder (store, indexes, caches). Default: $RAGTRIAGE_HOME or the user data dir.",
    )
    @click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Settings TOML file. Default: $RAGTRIAGE_CONFIG_FILE or <home>/config.toml.",
    )
    @functools.wraps(func)
    def wrapper(*args: Any, home: Path | None, config_file: Path | None, **kwargs: Any) -> Any:
        parent = click.get_current_context().find_root().obj or {}
        kwargs["where"] = WorkspaceAt(
            home if home is not None else parent.get("home"),
            config_file if config_file is not None else parent.get("config_file"),
        )
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def since_option(default: str | None = None, what: str = "Requests since a time") -> Callable[[F], F]:
    """`--since`: a duration back from now or a date/time (read by `logs.queue.parse_since`)."""
    return click.option(
        "--since",
        default=default,
        show_default=default is not None,
        help=f"{what}: 30m, 12h, 7d, 2w or an ISO date/time.",
    )


def dataset_option(help_text: str = "Eval set name.") -> Callable[[F], F]:
    """`--dataset NAME`, the default eval set when not given."""
    return click.option("--dataset", default=DEFAULT_DATASET, show_default=True, help=help_text)


def by_option(help_text: str) -> Callable[[F], F]:
    """`--by day|version`: group or stratify per day (UTC, the default) or per logged pipeline_version."""
    return click.option(
        "--by", type=click.Choice(["day", "version"]), default="day", show_default=True, help=help_text
    )


def stdout_console() -> Console:
    """Console for data output: the terminal's width, else `COLUMNS` or 120 columns in a pipe.
    Markup and emoji are off: logged text must print literally."""
    return data_console()


def print_trimmed(console: Console, renderable: Any) -> None:
    """Print `renderable`; off a terminal without the spaces Rich pads lines with (a table's cells,
    a grid's columns), so a pipe or a file gets no trailing whitespace."""
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def stderr_console() -> Console:
    """Console for diagnostics and progress (same width rule, on stderr)."""
    return data_console(stderr=True)


def echo_lines(text: str, *, indent: int = 4) -> None:
    """Print a summary's lines at the output's width (`output_width`: the terminal's, `COLUMNS`, or
    120 in a pipe), wrapped between words (an id or a path stays whole, CJK counts two cells),
    continuation lines indented by `indent` spaces."""
    console = data_console()
    for line in text.split("\n"):
        console.print(hanging_text(console, line, indent=indent))


def echo_json(value: Any) -> None:
    """Print a model, a list of models or plain data as JSON on stdout (UTF-8, not escaped)."""
    if isinstance(value, BaseModel):
        click.echo(value.model_dump_json(indent=2))
        return
    click.echo(json.dumps(_plain(value), ensure_ascii=False, indent=2, default=str))


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[str], Callable[[int, int], None] | None]]:
    """`bar(label)` → an `on_progress` callback on stderr; None unless enabled and stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield lambda _label: None
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=True,
    )
    tasks: dict[str, Any] = {}

    def bar(label: str) -> Callable[[int, int], None]:
        def update(done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = progress.add_task(label, total=total or None)
            # A total of 0 means "not known yet" (a SQL cursor): rich then shows a pulsing bar.
            progress.update(tasks[label], completed=done, total=total or None)

        return update

    with progress:
        yield bar


def index_summary(index: dict[str, Any]) -> str:
    """`index: 3 chunks added, 1 updated, …` from an `IndexSyncReport` as a dict (what `--json` prints)."""
    changes = [
        f"{plural(index.get('added', 0), 'chunk')} added",
        f"{index.get('updated', 0):,} updated",
        f"{index.get('deleted', 0):,} deleted",
        f"{index.get('unchanged', 0):,} unchanged",
    ]
    vectors = [f"{plural(index.get('embedded', 0), 'passage')} embedded"]
    if index.get("imported_vectors"):
        vectors.append(f"{plural(index['imported_vectors'], 'imported vector')} used as given")
    total = f"{plural(index.get('chunk_count', 0), 'chunk')} in the indexes"
    return f"index: {', '.join(changes)}; {', '.join(vectors)}; {total}"
