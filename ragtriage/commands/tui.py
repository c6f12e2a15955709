"""`ragtriage tui` and `ragtriage demo`. Textual is imported only inside the commands that open the UI."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from ragtriage.commands.common import stderr_console, stdout_console, workspace_options
from ragtriage.errors import InputError

SUMMARY_METRICS = ("recall@5", "recall@10", "mrr", "ndcg@10", "hit@1", "coverage@30")


def run_tui(home: Path | None, config_file: Path | None) -> None:
    """Open the TUI on the queue of the given home (blocks until the triager quits)."""
    import os

    from ragtriage.tui.app import TriageApp
    from ragtriage.workspace import Workspace

    os.environ.setdefault("TQDM_DISABLE", "1")  # rerankers draw tqdm bars on stderr otherwise
    workspace = Workspace.open(home, config_file)
    try:
        TriageApp(workspace).run()
    finally:
        workspace.close()


def print_summary(home: Path) -> None:
    """The headless demo summary: flagged by suggested label, one replayed case's gold journey, the eval table."""
    from ragtriage.demo import demo_summary

    summary = demo_summary(home)
    console = stdout_console()
    labels = Table(
        title=Text(f"{summary.flagged} flagged requests by suggested root cause"), title_justify="left"
    )
    labels.add_column("suggested label")
    labels.add_column("requests", justify="right")
    for label, count in sorted(summary.by_suggested_label.items(), key=lambda kv: (-kv[1], kv[0])):
        labels.add_row(Text(label), str(count))
    console.print(labels)
    journey = summary.case_journey
    if journey is not None:
        console.print(
            Text(
                f"replayed {summary.case_request_id}: {summary.case_query} "
                f"(suggested {summary.case_suggested_label})"
            )
        )
        table = Table(title=Text("gold journey (replay)"), title_justify="left")
        columns = ["gold", *journey.route_names, "fused", "rerank in", "reranked", "final", "dropped at"]
        for column in columns:
            table.add_column(Text(column))
        for gold in journey.gold:
            cells = [gold.routes.get(name) for name in journey.route_names]
            cells += [gold.fused, gold.rerank_input, gold.reranked, gold.final]
            table.add_row(
                Text(gold.chunk_id),
                *("—" if c is None else str(c) for c in cells),
                gold.dropped_at or "reached",
            )
        console.print(table)
    if summary.run_id is not None:
        run = Table(
            title=Text(f"eval run {summary.run_id} ({summary.run_cases} cases)"), title_justify="left"
        )
        run.add_column("metric")
        run.add_column("value", justify="right")
        for metric in SUMMARY_METRICS:
            if metric in summary.run_means:
                run.add_row(metric, f"{summary.run_means[metric]:.4f}")
        console.print(run)


def _is_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def register(cli: click.Group) -> None:
    """Attach `tui` and `demo` to the root group."""

    @cli.command("tui")
    @workspace_options
    def tui_command(home: Path | None, config_file: Path | None) -> None:
        """Open the triage TUI (queue, case, eval screens); press ? for the keys."""
        if not _is_terminal():
            raise InputError(
                "the TUI needs a terminal (stdin and stdout are not one); "
                "use `ragtriage queue`, `show`, `replay` and `diagnose`, or `ragtriage demo --headless`"
            )
        run_tui(home, config_file)

    @cli.command("demo")
    @click.option(
        "--home",
        "demo_home",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Demo data folder. Default: $RAGTRIAGE_HOME or the user data dir.",
    )
    @click.option("--headless", is_flag=True, help="Print a summary instead of opening the TUI.")
    @click.option(
        "--real", is_flag=True, help="Use the Debian FAQ and generated traffic instead of the fixtures."
    )
    def demo_command(demo_home: Path | None, headless: bool, real: bool) -> None:
        """Build (or reuse) a demo home: KB indexes, request logs, diagnoses, an eval run; then open the TUI."""
        from ragtriage import locations
        from ragtriage.demo import prepare_demo

        parent = click.get_current_context().find_root().obj or {}
        home = locations.resolve_home(demo_home if demo_home is not None else parent.get("home"))
        err = stderr_console()
        report = prepare_demo(home, real=real, on_step=lambda step: err.print(f"demo: {step} …"))
        reused = f" (reused: {', '.join(report.reused)})" if report.reused else ""
        err.print(
            f"demo home {report.home}: {report.chunks} chunks, {report.flagged} flagged, "
            f"{report.eval_cases} eval cases, run {report.eval_run_id}{reused}; "
            f"seconds {report.seconds}"
        )
        if not headless and not _is_terminal():
            err.print("demo: not a terminal, so printing the summary instead of opening the TUI")
            headless = True
        if headless:
            print_summary(home)
            return
        run_tui(home, None)
