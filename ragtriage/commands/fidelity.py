"""`ragtriage fidelity`: how exactly replay reproduces what production logged (a thin face over
`ragtriage.replay.fidelity_run`)."""

from __future__ import annotations

import click
from rich.console import Console
from rich.text import Text

from ragtriage.commands.common import (
    WorkspaceAt,
    echo_json,
    progress_bar,
    since_option,
    workspace_options,
)
from ragtriage.logs.queue import parse_since
from ragtriage.render.fit import Col, FitTable, data_console
from ragtriage.render.text import hanging_text, plural
from ragtriage.replay.fidelity import STAGE_SHORT, FidelityReport, StageSummary, counterpart_text
from ragtriage.replay.fidelity_run import measure_fidelity


def _percent(value: float) -> str:
    return f"{value:.1%}"


def _summary_table(title: str, rows: list[StageSummary], first: str) -> FitTable:
    table = FitTable(
        [
            Col(first, "id"),
            Col("stage", "label"),
            Col("n", "number", justify="right"),
            Col("exact", "number", justify="right"),
            Col("overlap@k", "number", justify="right"),
            Col("RBO", "number", justify="right"),
            Col("unknown", "number", justify="right", drop_order=2),
            Col("misses", "text", drop_order=1),
        ],
        title=title,
        show_edge=False,
    )
    for row in rows:
        key = row.pipeline_version if first == "pipeline_version" else row.route
        misses = str(row.explained_misses + row.unexplained_misses)
        if row.unexplained_misses:
            misses += f" ({row.unexplained_misses} unexplained)"
        table.add_row(
            Text(key or "all"),
            Text(STAGE_SHORT.get(row.stage, row.stage)),
            str(row.stages),
            _percent(row.exact_share),
            _percent(row.mean_overlap),
            f"{row.mean_rbo:.3f}",
            _percent(row.unknown_share),
            misses,
        )
    return table


def print_report(console: Console, report: FidelityReport) -> None:
    """The fidelity report: tables per version and per route, reasons, the least faithful requests."""
    if not report.replayed:
        for note in report.notes:
            _say(console, note)
        return
    console.print(
        _summary_table("fidelity per pipeline_version and stage", report.by_version, "pipeline_version")
    )
    if report.by_route:
        console.print(_summary_table("logged routes per replayed route", report.by_route, "route"))
    profiles = ", ".join(f"{name} ({count:,})" for name, count in report.profiles.items())
    _say(console, f"profiles: {profiles}")
    _say(
        console,
        f"{report.faithful_requests:,} of {plural(report.replayed, 'request')} reproduced exactly; "
        f"{report.unexplained_requests:,} with a stage that differs for no documented reason",
    )
    for note in report.notes:
        _say(console, f"note: {note}", indent=6)
    if report.reasons:
        console.print("documented reasons (stages they explain):")
        for reason, count in report.reasons.items():
            _say(console, f"  {count:>4}  {reason}", indent=8)
    if report.stale_documents:
        console.print("stale documents (production served another version of them; requests):")
        for doc_id, count in report.stale_documents.items():
            evidence = report.stale_evidence.get(doc_id)
            _say(console, f"  {count:>4}  {doc_id}" + (f": {evidence}" if evidence else ""), indent=8)
    if report.least_faithful:
        console.print("least faithful requests:")
    for result in report.least_faithful:
        flag = f" — {len(result.unexplained)} unexplained" if result.unexplained else ""
        _say(
            console,
            f"{result.request_id} ({result.pipeline_version or 'no version'}, profile {result.profile}){flag}",
        )
        _say(console, f"  {result.line}")
        for stage in result.stages:
            if stage.exact:
                continue
            why = stage.reason.text if stage.reason is not None else "no documented reason"
            # Wrapped between ids (never inside one), continuation lines under the stage's text.
            _say(console, f"  {STAGE_SHORT[stage.stage]}: {stage.differs()} — {why}", indent=6)
        for route, count in result.routes_without_counterpart.items():
            _say(
                console,
                f"  note: {counterpart_text([route])} ({plural(count, 'chunk')}, counted apart)",
                indent=6,
            )
        if result.rewrite_differs:
            _say(console, f"  rewrite: {result.rewrite_differs}", indent=6)
        for note in result.notes:
            _say(console, f"  note: {note}", indent=6)
    _say(
        console,
        f"replayed {report.replayed:,} of {report.selected:,} selected in {report.replay_seconds:.1f} s "
        f"({report.seconds:.1f} s in all); stored {report.stored:,}",
    )


def _say(console: Console, line: str, *, indent: int = 4) -> None:
    """One report line at the console's width: wrapped between words (an id stays whole), CJK
    counted two cells, continuation lines indented by `indent` spaces."""
    console.print(hanging_text(console, Text(line), indent=indent))


@click.command("fidelity")
@since_option()
@click.option(
    "--version", "version", default=None, help="Only this pipeline_version (a glob like prod-2026.* works)."
)
@click.option(
    "--sample", type=click.IntRange(min=1), default=None, help="Replay a random sample of N requests."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample.")
@click.option(
    "--least",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Least faithful requests listed.",
)
@click.option("--no-store", is_flag=True, help="Do not store the per-request results.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@workspace_options
def fidelity_command(
    since: str | None,
    version: str | None,
    sample: int | None,
    seed: int,
    least: int,
    no_store: bool,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Replay logged requests with their profiles and measure, per stage, route and pipeline_version,
    how exactly the replay reproduces what production logged."""
    since_time = parse_since(since) if since is not None else None
    with where.open() as workspace, progress_bar(not as_json) as bar:
        report = measure_fidelity(
            workspace,
            since=since_time,
            version=version,
            sample=sample,
            seed=seed,
            store=not no_store,
            least=least,
            on_progress=bar("replaying"),
        )
    if as_json:
        echo_json(report)
        return
    print_report(data_console(), report)
