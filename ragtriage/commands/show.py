"""`ragtriage show`: one logged request, its stages and feedback, and its triage record."""

from __future__ import annotations

import click
from rich.console import Console
from rich.text import Text

from ragtriage.commands.common import (
    WorkspaceAt,
    echo_json,
    stdout_console,
    workspace_options,
)
from ragtriage.logs.requests import RequestView, request_view
from ragtriage.logs.schema import STAGE_NAMES, LoggedFeedback, extra_routes, stage_ids
from ragtriage.render.text import field_text, plural
from ragtriage.store.gold import gold_text


@click.command("show")
@click.argument("request_id")
@click.option("--json", "as_json", is_flag=True, help="Print the request and its triage record as JSON.")
@workspace_options
def show_command(request_id: str, as_json: bool, where: WorkspaceAt) -> None:
    """Show one logged request and its triage record."""
    with where.open() as workspace:
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
        if stage == "dense":  # then a trace's further retrievers (`dense_2`)
            for route in extra_routes(record):
                _field(route.name, " ".join(hit.chunk_id for hit in route.hits) or "(empty)")
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
    for merge in stored.merges:
        _field("merged from", merge)
    if stored.conflicts:
        _field("conflicts", f"{plural(stored.conflicts, 'later line')} had a different body under this id")
    triage = view.triage
    if triage is None:
        _field("triage", "not flagged")
    else:
        _field("triage", f"{triage.status} (revision {triage.revision})")
        _field("reasons", ", ".join(triage.reasons) or "-")
        _field("labels", ", ".join(triage.labels) or "-")
        _field("gold", gold_text(triage.gold_chunk_ids, " ") or "-")
        if triage.assignee:
            _field("assignee", triage.assignee)
        for note in triage.notes:
            _field("note", f"{note.at:%Y-%m-%d %H:%M} {note.user}: {note.text}")
    for line in _field.lines:
        console.print(line)


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
