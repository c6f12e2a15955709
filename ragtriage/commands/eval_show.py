"""`ragtriage eval show RUN`: one stored run with its per-case results (what the REST API returns)."""

from __future__ import annotations

from collections.abc import Mapping

import click
from rich.text import Text

from ragtriage.commands.common import WorkspaceAt, echo_json, stdout_console, workspace_options
from ragtriage.eval.run_view import MAX_PAGE, RunDetail, run_detail
from ragtriage.kb.service import document_titles, get_chunks
from ragtriage.kb.types import ChunkRecord
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.kb_view import place_table
from ragtriage.render.text import field_text

#: Per-case metrics shown in the table (every metric is in --json).
CASE_METRICS = ("recall@5", "mrr", "ndcg@10")


def _print_detail(detail: RunDetail, known: Mapping[str, ChunkRecord], doc_titles: Mapping[str, str]) -> None:
    """The run's header, its page of cases, then what their relevant chunks are (`known`: the
    KB's chunks by id, `doc_titles`: doc_id → title)."""
    console = stdout_console()
    console.print(
        Text(
            f"run {detail.run_id} ({detail.name or 'unnamed'}) of KB {detail.kb} on "
            f"{detail.dataset}@{detail.dataset_version}: {detail.status}, "
            f"{detail.cases_done}/{detail.case_count} cases"
        )
    )
    # On a line of its own: at 80 columns the hash would otherwise wrap away from its name.
    console.print(Text(f"profile {detail.profile}, config {detail.config_hash}"))
    page = detail.cases
    # Ids wrap only between ids, never inside one (FitTable goes vertical when narrow).
    table = FitTable(
        [
            Col("case", "id"),
            Col("query", "text"),
            *(Col(metric, "number", justify="right") for metric in CASE_METRICS),
            Col("retrieved", "ids"),
            Col("relevant", "ids"),
            Col("dropped at", "text"),
        ]
    )
    for case in page.items:
        drops = sorted({g.dropped_at for g in case.gold_journey if g.dropped_at})
        table.add_row(
            Text(case.case_id),
            Text(case.query or "-"),
            *(Text(f"{case.metrics[m]:.4f}" if m in case.metrics else "-") for m in CASE_METRICS),
            Text(" ".join(case.retrieved_chunk_ids[:5]) or ("(refused)" if case.refused else "-")),
            Text(" ".join(case.relevant_chunk_ids) or "(no gold)"),
            Text(", ".join(drops) or ("-" if not case.relevant_chunk_ids else "reached final")),
        )
    console.print(table)
    relevant = [chunk_id for case in page.items for chunk_id in case.relevant_chunk_ids]
    if relevant:
        console.print(place_table("relevant chunks", relevant, known, doc_titles))
    for case in page.items:
        if case.refused:
            console.print(
                field_text(console, f"refused {case.case_id}", case.refusal_reason or "nothing retrieved")
            )
            if case.lexical_support is not None:
                console.print(field_text(console, "  query terms", case.lexical_support.explain(), indent=4))
    end = page.offset + len(page.items)
    more = f"; next page: --offset {end}" if end < page.total else ""
    console.print(Text(f"cases {page.offset + 1 if page.items else page.offset}–{end} of {page.total}{more}"))


@click.command("show")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--offset", type=click.IntRange(min=0), default=0, show_default=True, help="Cases to skip (paging)."
)
@click.option(
    "--limit", type=click.IntRange(1, MAX_PAGE), default=50, show_default=True, help="Cases per page."
)
@click.option("--json", "as_json", is_flag=True, help="The run, its settings and the case results as JSON.")
@workspace_options
def show_command(run_ref: str, offset: int, limit: int, as_json: bool, where: WorkspaceAt) -> None:
    """One run: status, settings, and per-case results with candidates and gold journey (paged)."""
    with where.open() as workspace:
        detail = run_detail(workspace.engine, run_ref, offset=offset, limit=limit)
        if as_json:
            echo_json(detail)
            return
        known = get_chunks(
            workspace.engine, [c for case in detail.cases.items for c in case.relevant_chunk_ids]
        )
        doc_titles = document_titles(workspace.engine, [chunk.doc_id for chunk in known.values()])
    _print_detail(detail, known, doc_titles)
