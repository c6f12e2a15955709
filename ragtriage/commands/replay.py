"""`ragtriage replay`: run a query (or a file of queries, or a logged request) through the pipeline
and show the trace, or print it as JSON."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import click
from rich.text import Text

from ragtriage.commands.common import (
    WorkspaceAt,
    echo_json,
    stderr_console,
    stdout_console,
    workspace_options,
)
from ragtriage.config.profiles import resolve_profile
from ragtriage.errors import InputError
from ragtriage.index.index_state import index_lag
from ragtriage.kb.service import document_titles
from ragtriage.pipeline.pipeline import Pipeline
from ragtriage.pipeline.types import Trace
from ragtriage.render.logged_view import print_logged_replay
from ragtriage.render.trace_view import print_trace
from ragtriage.replay.logged import compare_request
from ragtriage.triage.gold_check import unretrievable_gold
from ragtriage.workspace import Workspace


@dataclass(frozen=True)
class QueryLine:
    """One line of a `--queries` file."""

    line_no: int
    query: str
    gold: list[str]


def read_queries(path: Path) -> list[QueryLine]:
    """Read a JSONL file of `{"query": "...", "gold": ["chunk_id", ...]}` objects (gold optional).

    Raises:
        InputError: a line is not JSON, not an object, has no non-empty `query`, or a bad `gold`;
            the message names the file and the line.
    """
    lines: list[QueryLine] = []
    fix = 'write one object per line: {"query": "...", "gold": ["chunk_id"]}'
    with open(path, encoding="utf-8-sig", errors="replace") as handle:
        for line_no, raw_line in enumerate(handle, start=1):
            if not raw_line.strip():
                continue
            try:
                record = json.loads(raw_line)
            except json.JSONDecodeError as error:
                raise InputError(f"{path}:{line_no}: not valid JSON ({error.msg}); {fix}") from None
            if not isinstance(record, dict):
                raise InputError(f"{path}:{line_no}: expected a JSON object; {fix}")
            query = record.get("query")
            if not isinstance(query, str) or not query.strip():
                raise InputError(f"{path}:{line_no}: 'query' is missing or empty; {fix}")
            gold = record.get("gold", [])
            if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
                raise InputError(f"{path}:{line_no}: 'gold' must be a list of chunk ids; {fix}")
            lines.append(QueryLine(line_no, query, list(gold)))
    if not lines:
        raise InputError(f"{path}: no queries in the file; {fix}")
    return lines


@click.command("replay")
@click.argument("request_id", required=False)
@click.option("--query", "-q", "query", help="Query text to run through the pipeline.")
@click.option(
    "--queries",
    "queries_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='JSONL file, one {"query": ..., "gold": [...]} per line.',
)
@click.option(
    "--gold",
    "gold",
    multiple=True,
    metavar="CHUNK_ID",
    help="Mark a gold chunk (repeatable); with REQUEST_ID, instead of its stored gold.",
)
@click.option(
    "--use-logged-rewrite", is_flag=True, help="With REQUEST_ID: reuse the rewrite the request logged."
)
@click.option(
    "--profile",
    "profile",
    metavar="NAME",
    help="Replay profile (see `ragtriage profiles`); default: the one mapped to the request's "
    "pipeline_version, or the default profile.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the trace as JSON (JSONL with --queries).")
@workspace_options
def replay_command(
    request_id: str | None,
    query: str | None,
    queries_file: Path | None,
    gold: tuple[str, ...],
    use_logged_rewrite: bool,
    profile: str | None,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Replay REQUEST_ID, a --query, or every line of --queries, and show each stage of the pipeline."""
    given = [
        name
        for name, value in (("REQUEST_ID", request_id), ("--query", query), ("--queries", queries_file))
        if value is not None
    ]
    if len(given) != 1:
        raise click.UsageError("give exactly one of REQUEST_ID, --query TEXT or --queries FILE.jsonl")
    if gold and queries_file is not None:
        raise click.UsageError(
            "--gold goes with REQUEST_ID or --query; in a --queries file put 'gold' on each line"
        )
    if use_logged_rewrite and request_id is None:
        raise click.UsageError("--use-logged-rewrite needs a REQUEST_ID")
    lines = read_queries(queries_file) if queries_file is not None else []
    console = stdout_console()
    with where.open() as workspace:
        _warn_index_lag(workspace)
        if request_id is not None:
            _replay_logged(workspace, request_id, use_logged_rewrite, as_json, profile, list(gold) or None)
            _warn_unretrievable_gold(workspace, list(gold))
            return
        resolved = resolve_profile(workspace.settings, None, profile)
        pipeline = workspace.pipeline_for(resolved)
        if query is not None:
            # Warm up first so the trace's timings show the query, not model loading.
            pipeline.warm_up()
            traces = [pipeline.run(query, gold=list(gold))]
        else:
            traces = _run_file(pipeline, lines, show_progress=not as_json)
        for trace in traces:
            trace.profile = resolved.ref()
        _warn_unretrievable_gold(workspace, [*gold, *(g for line in lines for g in line.gold)])
        doc_titles = _final_doc_titles(workspace, traces) if not as_json else {}
    if as_json and queries_file is not None:
        for trace in traces:
            click.echo(trace.model_dump_json())
        return
    if as_json:
        echo_json(traces[0])
        return
    for number, trace in enumerate(traces):
        if len(traces) > 1:
            console.rule(f"query {number + 1} of {len(traces)} (line {lines[number].line_no})")
        print_trace(console, trace, doc_titles)


def _final_doc_titles(workspace: Workspace, traces: list[Trace]) -> dict[str, str]:
    """doc_id → title of the documents of the traces' final chunks (the final-context table names them)."""
    doc_ids = [
        candidate.doc_id
        for trace in traces
        for chunk_id in trace.final
        if (candidate := trace.candidate(chunk_id)) is not None and candidate.doc_id
    ]
    return document_titles(workspace.engine, doc_ids)


def _warn_index_lag(workspace: Workspace) -> None:
    """A note on stderr when the indexes lag the KB: the ranked lists would be empty or old."""
    lag = index_lag(workspace.home, workspace.settings, workspace.engine)
    if lag is not None:
        stderr_console().print(Text(f"note: {lag}", style="yellow"))


def _warn_unretrievable_gold(workspace: Workspace, gold: list[str]) -> None:
    """A note on stderr for each gold id no index can return (unknown, or deleted in the KB)."""
    for line in unretrievable_gold(workspace.engine, gold):
        stderr_console().print(Text(f"note: {line}", style="yellow"))


def _replay_logged(
    workspace: Workspace,
    request_id: str,
    use_logged_rewrite: bool,
    as_json: bool,
    profile: str | None,
    gold: list[str] | None,
) -> None:
    """Show the logged request next to its replay, stage by stage (`ragtriage.replay.logged`);
    `gold` None: the gold stored on the request's triage record."""
    comparison = compare_request(workspace, request_id, use_logged_rewrite, profile, gold)
    if as_json:
        echo_json(comparison)
        return
    print_logged_replay(stdout_console(), comparison)


def _run_file(pipeline: Pipeline, lines: list[QueryLine], *, show_progress: bool) -> list[Trace]:
    queries = [line.query for line in lines]
    golds = [line.gold for line in lines]
    if not show_progress or len(lines) < 2:
        return pipeline.run_many(queries, golds=golds)
    with click.progressbar(length=len(lines), label="replaying", file=sys.stderr) as bar:
        done = [0]

        def advance(finished: int, _total: int) -> None:
            bar.update(finished - done[0])
            done[0] = finished

        return pipeline.run_many(queries, golds=golds, on_progress=advance)
