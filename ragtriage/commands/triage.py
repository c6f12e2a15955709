"""`ragtriage diagnose` and `ragtriage aliases` commands (the workflow commands are in `workflow.py`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import click
from rich.text import Text
from sqlmodel import col, select

from ragtriage.commands.common import (
    WorkspaceAt,
    echo_json,
    stderr_console,
    stdout_console,
    workspace_options,
)
from ragtriage.kb.service import document_titles
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.journey_view import journey_notes, journey_table, suggestion_lines
from ragtriage.render.text import PLACE_HEADER, chunk_place, hanging_text, plural
from ragtriage.store.db import read_session
from ragtriage.store.log_tables import TriageRow
from ragtriage.triage.agreement import AgreementReport, diagnose_all
from ragtriage.triage.alias_mining import DEFAULT_ALIAS_FILE, add_aliases, mine_aliases
from ragtriage.triage.context import WorkspaceContext
from ragtriage.triage.diagnose import Diagnosis, diagnose_request
from ragtriage.workspace import Workspace


def _cases_with_gold(workspace: Workspace) -> Iterator[str]:
    """Request ids of flagged requests that have gold chunk ids, oldest first."""
    with read_session(workspace.engine) as session:
        rows = session.exec(select(TriageRow).order_by(col(TriageRow.request_ts))).all()
        ids = [row.request_id for row in rows if row.gold_chunk_ids]
    yield from ids


def _render(diagnosis: Diagnosis, doc_titles: Mapping[str, str]) -> None:
    """The diagnosis in words and tables (`doc_titles`: doc_id → title, for the likely gold)."""
    console = stdout_console()
    head = Text("diagnosis of ")
    head.append(diagnosis.request_id or "an ad-hoc query", style="bold")
    head.append(f": {diagnosis.query}")
    if diagnosis.key_terms:
        head.append(f"\nkey terms: {', '.join(diagnosis.key_terms)}")
    console.print(head)
    for source, journey in diagnosis.journeys.items():
        console.print(journey_table(journey, f"gold journey ({source})"))
        for note in journey_notes(journey):
            console.print(hanging_text(console, note))
    for line in suggestion_lines(diagnosis):
        # Evidence bullets (`  - …`) wrap under their text, other lines under their first word.
        console.print(hanging_text(console, line, indent=4 if line.startswith("  - ") else 2))
    for result in diagnosis.counterfactuals:
        if not result.available:
            console.print(hanging_text(console, f"counterfactual {result.name}: not run ({result.reason})"))
            continue
        verdict = "brings gold back" if result.improves else "does not bring gold back"
        detail = "; ".join(result.detail)
        console.print(
            hanging_text(
                console, f"counterfactual {result.name}: {verdict}" + (f" ({detail})" if detail else "")
            )
        )
    if diagnosis.needs is not None:
        console.print(hanging_text(console, diagnosis.needs.message))
        if diagnosis.needs.likeliest:
            likely = FitTable(
                [
                    Col("likely gold", "id"),
                    Col(PLACE_HEADER, "text"),
                    Col("stage", "label"),
                    Col("rank", "number", justify="right"),
                    Col("query terms it has", "text"),
                ],
                title="chunks that carry the query's terms",
            )
            for chunk in diagnosis.needs.likeliest:
                likely.add_row(
                    chunk.chunk_id,
                    chunk_place(doc_titles.get(chunk.doc_id or ""), chunk.heading_path, chunk.title) or "—",
                    chunk.stage,
                    str(chunk.rank),
                    ", ".join(chunk.overlap_terms),
                )
            console.print(likely)
        for step in diagnosis.needs.next_steps:
            # Wrapped between words: the request id in the command stays whole.
            console.print(hanging_text(console, f"next: {step}", indent=6))


def _likely_doc_titles(workspace: Workspace, diagnosis: Diagnosis) -> dict[str, str]:
    """doc_id → title of the documents of the likely gold chunks."""
    likeliest = diagnosis.needs.likeliest if diagnosis.needs is not None else []
    return document_titles(workspace.engine, [chunk.doc_id for chunk in likeliest if chunk.doc_id])


def _progress_printer() -> Callable[[int, int], None]:
    err = stderr_console()

    def progress(done: int, total: int) -> None:
        if err.is_terminal:
            err.print(f"\rdiagnosed {done}/{total}", end="" if done < total else "\n")

    return progress


def _render_all(report: AgreementReport) -> None:
    """The `diagnose --all` table and the agreement lines."""
    table = FitTable(
        [
            Col("request_id", "id"),
            Col("suggested", "label"),
            Col("confidence", "number", justify="right"),
            Col("confirmed by", "label"),
        ],
        title=f"diagnoses of {plural(len(report.diagnoses), 'request')} with gold",
    )
    for result in report.diagnoses:
        s = result.suggestion
        table.add_row(
            Text(result.request_id or ""),
            Text(s.label or "none"),
            Text(f"{s.confidence:.2f}"),
            Text(s.confirmed_by or "not confirmed"),
        )
    console = stdout_console()
    console.print(table)
    for name, value, count in (
        ("agreement with confirmed labels", report.agreement, report.labelled_cases),
        ("agreement on held-out cases", report.agreement_holdout, report.holdout_cases),
    ):
        shown = "n/a" if value is None else f"{value:.2%}"
        console.print(f"{name}: {shown} over {plural(count, 'case')}")
    for miss in report.disagreements:
        console.print(
            Text(f"  {miss.request_id}: suggested {miss.suggested}, confirmed {miss.confirmed}")
            + Text(" (holdout)" if miss.holdout else "")
        )
    if not report.diagnoses:
        console.print(
            "no flagged request has gold yet: mark gold with `ragtriage label REQUEST_ID LABEL --gold CHUNK_ID` "
            "(or g in the TUI), then run this again"
        )
        return
    console.print(
        f"{plural(len(report.diagnoses), 'case')} in {report.seconds:.1f} s ({report.ms_per_case:.0f} ms per case)"
    )


@click.command("diagnose")
@click.argument("request_id", required=False)
@click.option("--query", help="Diagnose a query instead of a logged request.")
@click.option(
    "--gold", "gold", multiple=True, help="Gold chunk id (repeat); default: the triage record's gold."
)
@click.option(
    "--no-gold", is_flag=True, help="The case has no answer in the KB (gold is empty, not unknown)."
)
@click.option("--must-have", multiple=True, help="A must-have constraint term of the query (repeat).")
@click.option(
    "--all", "all_cases", is_flag=True, help="Every flagged request that has gold; prints agreement."
)
@click.option("--no-counterfactuals", is_flag=True, help="Skip the counterfactual replays.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@workspace_options
def diagnose_command(
    request_id: str | None,
    query: str | None,
    gold: tuple[str, ...],
    no_gold: bool,
    must_have: tuple[str, ...],
    all_cases: bool,
    no_counterfactuals: bool,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Where did the gold chunk get lost, and why: gold journey, root cause, confirming replays."""
    if all_cases and (request_id or query):
        raise click.UsageError("--all takes no REQUEST_ID or --query")
    gold_ids: list[str] | None = [] if no_gold else (list(gold) or None)
    with where.open() as workspace:
        context = WorkspaceContext(workspace)
        try:
            if not all_cases:
                result, _ = diagnose_request(
                    workspace,
                    context,
                    request_id,
                    query=query,
                    gold=gold_ids,
                    must_have=must_have,
                    counterfactuals=not no_counterfactuals,
                )
                if as_json:
                    echo_json(result)
                else:
                    _render(result, _likely_doc_titles(workspace, result))
                return
            report = diagnose_all(
                context,
                workspace.engine,
                counterfactuals=not no_counterfactuals,
                no_gold_labels=workspace.settings.triage.no_gold_labels,
                on_progress=None if as_json else _progress_printer(),
            )
        finally:
            context.close()
    if as_json:
        echo_json(report)
        return
    _render_all(report)


@click.group("aliases")
def aliases_group() -> None:
    """Mine and edit the alias dictionary."""


@aliases_group.command("suggest")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@workspace_options
def aliases_suggest(as_json: bool, where: WorkspaceAt) -> None:
    """Alias entries proposed by `alias_missing` diagnoses of the flagged requests that have gold."""
    with where.open() as workspace:
        context = WorkspaceContext(workspace)
        try:
            diagnoses = [
                diagnose_request(workspace, context, case_id)[0] for case_id in _cases_with_gold(workspace)
            ]
            suggestions = mine_aliases(diagnoses, context.aliases)
        finally:
            context.close()
    if as_json:
        echo_json(suggestions)
        return
    console = stdout_console()
    if not suggestions:
        console.print(
            "no alias suggestions: no flagged request with gold was diagnosed as alias_missing; "
            "mark gold on more requests (`ragtriage label … --gold`) or check `ragtriage diagnose --all`"
        )
        return
    table = FitTable(
        [
            Col("term", "label"),
            Col("synonyms", "text"),
            Col("requests", "number", justify="right"),
            Col("confirmed", "number", justify="right"),
            Col("supporting request ids", "ids"),
        ],
        title="alias suggestions (confirmed = its alias replay brought gold back)",
    )
    for entry in suggestions:
        table.add_row(
            entry.term,
            ", ".join(entry.synonyms),
            str(len(entry.request_ids)),
            str(entry.confirmed),
            " ".join(entry.request_ids[:5]),
        )
    console.print(table)


@aliases_group.command("add")
@click.argument("term")
@click.argument("synonyms", nargs=-1, required=True)
@workspace_options
def aliases_add(term: str, synonyms: tuple[str, ...], where: WorkspaceAt) -> None:
    """Add TERM = [SYNONYM…] to the alias file (settings.rewrite.alias_file, else <home>/aliases.toml)."""
    with where.open() as workspace:
        configured = workspace.resolve_path(workspace.settings.rewrite.alias_file)
        path = configured if configured is not None else workspace.home / DEFAULT_ALIAS_FILE
        change = add_aliases(path, term, synonyms)
    added = ", ".join(change.added) if change.added else "nothing"
    message = f"{path}: added {added} under {term}"
    if change.already_present:
        message += f"; already present: {', '.join(change.already_present)}"
    stdout_console().print(message)
    if configured is None:
        stderr_console().print(
            f"note: settings.rewrite.alias_file is unset, so the pipeline does not read {path} yet; "
            f'set [rewrite] alias_file = "{path}" in your settings'
        )
