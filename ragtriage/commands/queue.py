"""`ragtriage queue`: one page of flagged requests, filtered and sorted, with the next page's command."""

from __future__ import annotations

import shlex

import click
from rich.console import Group
from rich.text import Text

from ragtriage.commands.common import (
    WorkspaceAt,
    echo_json,
    print_trimmed,
    since_option,
    stdout_console,
    workspace_options,
)
from ragtriage.commands.sample import sample_command
from ragtriage.logs.queue import (
    FIDELITY_FILTERS,
    NOT_DIAGNOSED,
    QUEUE_SORTS,
    QueueCounts,
    QueuePage,
    list_queue,
    parse_since,
    queue_counts,
    queue_versions,
)
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.text import page_range
from ragtriage.store.log_tables import TRIAGE_STATUSES


@click.group("queue", invoke_without_command=True)
@click.option("--status", type=click.Choice(TRIAGE_STATUSES), default=None, help="Only this triage status.")
@click.option("--label", default=None, help="Only records carrying this label.")
@click.option(
    "--reason", default=None, help="Only records flagged for this reason (e.g. bad_rating, follow_up)."
)
@click.option(
    "--suggested",
    default=None,
    help="Only records whose diagnosis suggested this root cause (e.g. alias_missing); "
    "`none` for the ones not diagnosed yet.",
)
@since_option()
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True, help="Requests per page.")
@click.option(
    "--offset", type=click.IntRange(min=0), default=0, show_default=True, help="Requests to skip (paging)."
)
@click.option(
    "--sort",
    type=click.Choice(list(QUEUE_SORTS)),
    default="newest",
    show_default=True,
    help="Order; `fidelity` lists the least faithful replays first (`ragtriage fidelity` measures them).",
)
@click.option(
    "--fidelity",
    type=click.Choice(FIDELITY_FILTERS),
    default=None,
    help="Only replays measured exact, diverged, diverged for no documented reason, or unmeasured.",
)
@click.option(
    "--version",
    "version",
    default=None,
    help="Only requests production logged with this pipeline_version (e.g. a canary's).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the page as JSON.")
@workspace_options
def queue_command(
    status: str | None,
    label: str | None,
    reason: str | None,
    suggested: str | None,
    since: str | None,
    limit: int,
    offset: int,
    sort: str,
    fidelity: str | None,
    version: str | None,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """List flagged requests, newest first, with the suggested root cause and the total matching the filters.

    `queue sample` draws a stratified random sample of unflagged requests into the queue.
    """
    if click.get_current_context().invoked_subcommand is not None:
        return
    since_time = parse_since(since) if since is not None else None
    filters = {
        "status": status,
        "label": label,
        "reason": reason,
        "suggested": suggested,
        "since": since,
        "fidelity": fidelity,
        "version": version,
        "sort": None if sort == "newest" else sort,
    }
    with where.open() as workspace:
        page = list_queue(
            workspace.engine,
            status=status,
            label=label,
            reason=reason,
            suggested=None if suggested in (None, "none") else suggested,
            undiagnosed=suggested == "none",
            since=since_time,
            limit=limit,
            offset=offset,
            sort=sort,
            fidelity=fidelity,
            version=version,
        )
        counts = queue_counts(workspace.engine) if not page.items and suggested else None
        versions = queue_versions(workspace.engine) if not page.items and version is not None else None
    if as_json:
        echo_json(page)
        return
    chosen = {name: value for name, value in filters.items() if value is not None}
    _print_queue(page, chosen, counts, versions)


#: The line under a queue with the fidelity column (`QueueItem.fidelity_cell`).
FIDELITY_LEGEND = (
    "fidelity: the lowest rank-biased overlap (RBO, 1.00 = the same ranking) of a logged stage with "
    "its replay, and how many logged stages differ; exact = every stage reproduced "
    "(`ragtriage fidelity` measures and explains them)"
)


def _print_queue(
    page: QueuePage,
    filters: dict[str, str],
    counts: QueueCounts | None,
    versions: dict[str, int] | None = None,
) -> None:
    console = stdout_console()
    if not page.items:
        searched = ", ".join(f"--{name} {value}" for name, value in filters.items()) or "no filters"
        if page.total and page.offset >= page.total:
            console.print(
                f"no requests past {page.total:,} with {searched} (--offset {page.offset}); "
                "use a smaller --offset"
            )
        elif filters:
            console.print(
                f"no flagged requests match {searched}; drop a filter (`ragtriage queue` lists all)"
            )
            if filters.get("reason") == "sampled":
                console.print("sampled requests come from `ragtriage queue sample --n 100 --since 7d`")
            if counts is not None and "suggested" in filters:
                present = ", ".join(
                    f"{'none' if name == NOT_DIAGNOSED else name} ({count:,})"
                    for name, count in sorted(counts.by_suggested.items(), key=lambda kv: -kv[1])
                )
                console.print(f"--suggested values in this home: {present or 'none yet'}")
            if versions is not None:
                logged = ", ".join(f"{name} ({count:,})" for name, count in versions.items())
                console.print(Text(f"pipeline_version values of flagged requests: {logged or 'none logged'}"))
        else:
            console.print("no flagged requests in this home; ingest logs with `ragtriage logs ingest FILE`")
        return
    with_fidelity = any(item.fidelity for item in page.items)
    # Appears once production logged a pipeline_version for a request on the page.
    with_version = any(item.pipeline_version for item in page.items)
    # Asked for by --fidelity or --sort fidelity: the column stays however narrow the terminal.
    fidelity_asked = "fidelity" in filters or filters.get("sort") == "fidelity"
    table = FitTable(
        [
            Col("time (UTC)", "label"),
            Col("request_id", "id"),
            Col("query", "clip", min_width=16),
            Col("reasons", "clip", min_width=10, drop_order=2),
            Col("status", "label"),
            Col("label", "label", drop_order=1),
            Col("suggested", "label"),
            # Appears once `ragtriage fidelity` has measured a request on the page.
            *([Col("fidelity", "label", drop_order=None if fidelity_asked else 3)] if with_fidelity else []),
            *(
                [Col("version", "label", drop_order=None if "version" in filters else 4)]
                if with_version
                else []
            ),
        ],
        show_edge=False,
    )
    for item in page.items:
        # Text() keeps logged content literal: brackets in a query are never Rich markup.
        cells = [
            Text(item.ts.strftime("%m-%d %H:%M") if item.ts else "—"),
            Text(item.request_id),
            Text(" ".join(item.raw_query.split())),
            Text(", ".join(item.reasons)),
            Text(item.status),
            Text(item.primary_label or "—"),
            Text(item.suggested_label or "—"),
        ]
        if with_fidelity:
            cells.append(Text(item.fidelity_cell))
        if with_version:
            cells.append(Text(item.pipeline_version or "—"))
        table.add_row(*cells)
    legend = [Text(FIDELITY_LEGEND, style="dim")] if with_fidelity else []
    print_trimmed(console, Group(table, *legend))
    shown_to = page.offset + len(page.items)
    line = page_range(page.offset, len(page.items), page.total, "flagged request")
    if shown_to < page.total:
        line += f"; next page: ragtriage queue {_next_page_args(filters, page.limit, shown_to)}"
    console.print(Text(line), soft_wrap=True)  # a command to copy: the terminal wraps it, not Rich


def _next_page_args(filters: dict[str, str], limit: int, offset: int) -> str:
    """The options that print the next page with the same filters."""
    parts = [f"--{name} {shlex.quote(value)}" for name, value in filters.items()]
    if limit != 50:
        parts.append(f"--limit {limit}")
    parts.append(f"--offset {offset}")
    return " ".join(parts)


queue_command.add_command(sample_command)
