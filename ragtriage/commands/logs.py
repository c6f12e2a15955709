"""`ragtriage logs ingest`, `ragtriage queue`, `ragtriage show`."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from ragtriage.commands.common import (
    echo_json,
    open_workspace,
    since_option,
    stderr_console,
    stdout_console,
    workspace_options,
)
from ragtriage.commands.ingest_report import QUARANTINE_SHOWN, print_ingest_report
from ragtriage.logs.formats.dispatch import FORMAT_CHOICES
from ragtriage.logs.ingest import ingest_files
from ragtriage.logs.queue import (
    FIDELITY_FILTERS,
    NOT_DIAGNOSED,
    QUEUE_SORTS,
    QueueCounts,
    QueuePage,
    list_queue,
    parse_since,
    queue_counts,
)
from ragtriage.logs.requests import RequestView, conflicting_lines, quarantined_lines, request_view
from ragtriage.logs.schema import STAGE_NAMES, LoggedFeedback, stage_ids
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.text import field_text, page_range, plural
from ragtriage.store.log_tables import TRIAGE_STATUSES


@click.group("logs")
def logs_group() -> None:
    """Online request logs: ingest JSONL files into the triage store."""


@logs_group.command("ingest")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--strict", is_flag=True, help="Stop at the first bad line (default: quarantine it and go on).")
@click.option(
    "--format",
    "log_format",
    type=click.Choice(FORMAT_CHOICES),
    default="auto",
    show_default=True,
    help="Format of every file; auto tells each file's format by its content.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
@workspace_options
def ingest_command(
    files: tuple[Path, ...],
    strict: bool,
    log_format: str,
    as_json: bool,
    home: Path | None,
    config_file: Path | None,
) -> None:
    """Ingest request logs (schema v1 or flat JSONL, .gz too, Parquet, CSV) or traces (OTLP/JSON with
    OpenInference attributes, Phoenix or Langfuse exports); flagged requests enter the queue
    as `new`.

    The files of one ingest are read together: a trace's spans may be spread over several, and a
    Langfuse export is given as its observations, traces and scores files. A trace counts as one
    line. Parquet and CSV exports of schema v1 or the flat form are read row by row. Idempotent:
    ingesting the same files again changes nothing. Always
    read = ingested + duplicates + conflicts + quarantined + blank.

    Exit status 2 (the counts are still printed) when a non-empty file held no readable request:
    every line quarantined or blank. A file of no known format stops the ingest before anything
    is stored (also exit 2).
    """
    err = stderr_console()
    with open_workspace(home, config_file) as workspace:
        logs_settings = workspace.settings.logs

        def progress(read: int, _total: int | None) -> None:
            if err.is_terminal:
                err.print(f"\r{read:,} lines read", end="")

        report = ingest_files(
            workspace.engine,
            list(files),
            flagging=logs_settings.flagging,
            strict=strict,
            batch_size=logs_settings.batch_size,
            on_progress=progress,
            log_format=log_format,
            otel=logs_settings.otel,
        )
        if err.is_terminal:
            err.print()
        quarantine = quarantined_lines(workspace.engine, report.files, limit=QUARANTINE_SHOWN)
        conflicts = conflicting_lines(workspace.engine, report.files) if report.conflicts else None
    if as_json:
        echo_json(report)
    else:
        print_ingest_report(report, *quarantine, conflicts)
    if report.files_without_requests:
        for path in report.files_without_requests:
            err.print(
                f"input error: {path}: no request could be read from it (read as "
                f"{report.formats.get(path, 'v1')}); fix: check that it is a request log "
                f"(`ragtriage logs quarantine {path}` says why each line was refused)",
                soft_wrap=True,
            )
        click.get_current_context().exit(2)


@logs_group.command("quarantine")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--limit", type=click.IntRange(min=1), default=200, show_default=True, help="Lines to list.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@workspace_options
def quarantine_command(
    files: tuple[Path, ...], limit: int, as_json: bool, home: Path | None, config_file: Path | None
) -> None:
    """List quarantined log lines (of FILES, or of every file) as `file:line: reason`, in file order."""
    with open_workspace(home, config_file) as workspace:
        total, lines = quarantined_lines(workspace.engine, [str(f) for f in files], limit=limit)
    if as_json:
        echo_json({"total": total, "lines": lines})
        return
    console = stdout_console()
    for line in lines:
        console.print(f"{line.source_file}:{line.line_no}: [{line.kind}] {line.reason}", soft_wrap=True)
    if not total:
        searched = ", ".join(str(f) for f in files) if files else "any ingested file"
        console.print(f"no quarantined lines for {searched}; every line read was ingested or blank")
        return
    console.print(f"{len(lines):,} of {plural(total, 'quarantined line')}")


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
    as_json: bool,
    home: Path | None,
    config_file: Path | None,
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
        "sort": None if sort == "newest" else sort,
    }
    with open_workspace(home, config_file) as workspace:
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
        )
        counts = queue_counts(workspace.engine) if not page.items and suggested else None
    if as_json:
        echo_json(page)
        return
    _print_queue(page, {name: value for name, value in filters.items() if value is not None}, counts)


def _print_queue(page: QueuePage, filters: dict[str, str], counts: QueueCounts | None) -> None:
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
        else:
            console.print("no flagged requests in this home; ingest logs with `ragtriage logs ingest FILE`")
        return
    with_fidelity = any(item.fidelity for item in page.items)
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
        table.add_row(*cells)
    console.print(table)
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


@click.command("show")
@click.argument("request_id")
@click.option("--json", "as_json", is_flag=True, help="Print the request and its triage record as JSON.")
@workspace_options
def show_command(request_id: str, as_json: bool, home: Path | None, config_file: Path | None) -> None:
    """Show one logged request and its triage record."""
    with open_workspace(home, config_file) as workspace:
        view = request_view(workspace.engine, request_id)
    if as_json:
        echo_json(view)
        return
    _print_view(view)


class _Fields:
    """`name: value` lines at the console's width; a long value wraps under its name."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.lines: list[Text] = []

    def __call__(self, name: str, value: object) -> None:
        self.lines.append(field_text(self.console, name, str(value)))


def _print_view(view: RequestView) -> None:
    record = view.request.record
    console = stdout_console()
    _field = _Fields(console)
    _field("request_id", record.request_id)
    _field("time", record.ts.isoformat() if record.ts else "-")
    for name in ("kb", "session", "user", "pipeline_version", "config_hash", "latency_ms"):
        value = getattr(record, name)
        if value is not None:
            _field(name, value)
    _field("query", record.raw_query)
    if record.rewrite is not None:
        rewrite = record.rewrite
        _field("rewrite", rewrite.rewritten_query or rewrite.normalized_query or "-")
        if rewrite.sub_queries:
            _field("sub-queries", " | ".join(rewrite.sub_queries))
    stages = record.stages
    for stage in STAGE_NAMES:
        items = getattr(stages, stage) if stages is not None else None
        if items is not None:
            _field(stage, " ".join(stage_ids(items)) or "(empty)")
    if record.citations is not None:
        _field("citations", " ".join(stage_ids(record.citations)) or "(none)")
    if record.answer is not None:
        _field("answer", record.answer)
    if record.feedback is not None:
        feedback = record.feedback
        _field("feedback", feedback_line(feedback))
    extras = record.model_extra or {}
    if extras:
        _field("other fields", ", ".join(sorted(extras)))
    stored = view.request
    _field(
        "source",
        f"{stored.source_file}:{stored.source_line}" + (" (GB18030, recovered)" if stored.recovered else ""),
    )
    if stored.conflicts:
        _field("conflicts", f"{plural(stored.conflicts, 'later line')} had a different body under this id")
    triage = view.triage
    if triage is None:
        _field("triage", "not flagged")
    else:
        _field("triage", f"{triage.status} (revision {triage.revision})")
        _field("reasons", ", ".join(triage.reasons) or "-")
        _field("labels", ", ".join(triage.labels) or "-")
        _field("gold", " ".join(triage.gold_chunk_ids) or "-")
        if triage.assignee:
            _field("assignee", triage.assignee)
        for note in triage.notes:
            _field("note", f"{note.at:%Y-%m-%d %H:%M} {note.user}: {note.text}")
    for line in _field.lines:
        console.print(line)


def register(cli: click.Group) -> None:
    """Attach `logs`, `queue` and `show` to the root group."""
    cli.add_command(logs_group)
    from ragtriage.commands.sample import sample_command

    queue_command.add_command(sample_command)
    cli.add_command(queue_command)
    cli.add_command(show_command)


def feedback_line(feedback: LoggedFeedback) -> str:
    """The user's feedback in words (`rating down · escalated to a human · reason: …`), no Python values."""
    parts = ["no rating" if feedback.rating is None else f"rating {feedback.rating}"]
    if feedback.escalated:
        parts.append("escalated to a human")
    if feedback.reason:
        parts.append(f"reason: {feedback.reason}")
    if isinstance(feedback.follow_up, str) and feedback.follow_up:
        parts.append(f"follow-up question: {feedback.follow_up}")
    elif feedback.follow_up:
        parts.append("followed up")
    return " · ".join(parts)
