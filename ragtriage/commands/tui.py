"""`ragtriage tui` and `ragtriage demo`. Textual is imported only inside the commands that open the UI."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from rich.text import Text

from ragtriage import locations
from ragtriage.commands.common import WorkspaceAt, stderr_console, stdout_console, workspace_options
from ragtriage.errors import InputError
from ragtriage.eval.specs import COVERAGE, headline_labels
from ragtriage.logs.queue import NOT_DIAGNOSED
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.journey_view import journey_table
from ragtriage.render.text import plural
from ragtriage_demo.demo import prepare_demo
from ragtriage_demo.summary import demo_summary

SUMMARY_METRICS = ("recall@5", "recall@10", "mrr", "ndcg@10", "hit@1", COVERAGE)


def run_tui(where: WorkspaceAt) -> None:
    """Open the TUI on the queue of the given home (blocks until the triager quits)."""
    from ragtriage.tui.app import TriageApp  # Textual: only when the UI opens, not on every --help

    os.environ.setdefault("TQDM_DISABLE", "1")  # rerankers draw tqdm bars on stderr otherwise
    with where.open() as workspace:
        TriageApp(workspace).run()


def print_summary(home: Path) -> None:
    """The headless demo summary: flagged by suggested label, one replayed case's gold journey, the eval table."""
    summary = demo_summary(home)
    console = stdout_console()
    labels = FitTable(
        [Col("suggested root cause", "label"), Col("requests", "number", justify="right")],
        title=f"{plural(summary.flagged, 'flagged request')} by suggested root cause",
    )
    for label, count in sorted(summary.by_suggested_label.items(), key=lambda kv: (-kv[1], kv[0])):
        labels.add_row("not diagnosed yet" if label == NOT_DIAGNOSED else label, str(count))
    console.print(labels)
    waiting = summary.by_suggested_label.get(NOT_DIAGNOSED, 0)
    if waiting:
        console.print(
            f"{plural(waiting, 'request')} not diagnosed yet: open one in the TUI (enter, then r) "
            "or run `ragtriage diagnose REQUEST_ID`; `ragtriage queue --suggested LABEL` lists a cause"
        )
    journey = summary.case_journey
    if journey is not None:
        verdict = (
            f"confirmed by the {summary.case_confirmed_by} replay"
            if summary.case_confirmed_by
            else "no replay confirmed it: an unconfirmed lead"
        )
        console.print(
            Text(
                f"\nshowcase {summary.case_request_id}: {summary.case_query} "
                f"(suggested {summary.case_suggested_label}, {verdict})"
            )
        )
        console.print(journey_table(journey, "gold journey (replay)"))
        if summary.case_fix:
            console.print(Text(f"fix: {summary.case_fix}"))
        console.print(
            Text(f"next: ragtriage diagnose {summary.case_request_id}  (or the TUI: demo, then enter on it)")
        )
    if summary.run_id is not None:
        run = FitTable(
            [Col("metric", "label"), Col("value", "number", justify="right")],
            title=f"eval run {summary.run_id} ({plural(summary.run_cases, 'case')})",
        )
        for metric in headline_labels(SUMMARY_METRICS, summary.run_means):
            if metric in summary.run_means:
                run.add_row(metric, f"{summary.run_means[metric]:.4f}")
        console.print(run)


def _is_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


@click.command("tui")
@workspace_options
def tui_command(where: WorkspaceAt) -> None:
    """Open the triage TUI (queue, case, eval screens); press ? for the keys."""
    if not _is_terminal():
        raise InputError(
            "the TUI needs a terminal (stdin and stdout are not one); "
            "use `ragtriage queue`, `show`, `replay` and `diagnose`, or `ragtriage demo --headless`"
        )
    run_tui(where)


@click.command("demo")
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
    parent = click.get_current_context().find_root().obj or {}
    home = locations.resolve_home(demo_home if demo_home is not None else parent.get("home"))
    err = stderr_console()
    report = prepare_demo(home, real=real, on_step=lambda step: err.print(f"demo: {step} …"))
    reused = f" (reused: {', '.join(report.reused)})" if report.reused else ""
    err.print(
        f"demo home {report.home}: {plural(report.chunks, 'chunk')}, {report.flagged} flagged, "
        f"{plural(report.eval_cases, 'eval case')}, run {report.eval_run_id}{reused}; took "
        + ", ".join(f"{step} {seconds:.1f} s" for step, seconds in report.seconds.items())
    )
    if not headless and not _is_terminal():
        err.print("demo: not a terminal, so printing the summary instead of opening the TUI")
        headless = True
    if headless:
        print_summary(home)
        return
    run_tui(WorkspaceAt(home, None))
