"""`ragtriage eval sweep`: one throwaway KB per chunk size, the same eval set on each, one table."""

from __future__ import annotations

from pathlib import Path

import click

from ragtriage.commands.common import (
    WorkspaceAt,
    dataset_option,
    echo_json,
    progress_bar,
    stdout_console,
    workspace_options,
)
from ragtriage.commands.eval_render import print_held_out
from ragtriage.eval.chunk_sweep import SweepTable, run_chunk_sweep
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.text import plural
from ragtriage.wording import quoted


def _sizes(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    try:
        sizes = [int(part) for part in value.replace(" ", "").split(",") if part]
    except ValueError:
        raise click.BadParameter(
            f"{quoted(value)}: give sizes in characters separated by commas, e.g. 400,800"
        ) from None
    if not sizes:
        raise click.BadParameter("give at least one size, e.g. 400,800")
    return sizes


def print_sweep(table: SweepTable) -> None:
    """One row per chunk size: KB size, cases mapped, Hit@K / Recall@K / MRR, refusal; best marked."""
    console = stdout_console()
    view = FitTable(
        [
            Col("chars", "number", justify="right"),
            # At 80 columns the KB size and the unmapped count (also in a line below) make room
            # for the figures and the best mark, so the table stays one row per size.
            Col("chunks", "number", justify="right", drop_order=2),
            Col("cases", "number", justify="right"),
            Col("unmapped", "number", justify="right", drop_order=1),
            *[Col(metric, "number", justify="right") for metric in table.metrics],
            Col("refusal acc", "number", justify="right"),
            Col("best", "label"),
        ],
        title=f"chunk-size sweep on {table.dataset}@{table.dataset_version} (best: highest MRR)",
    )
    for row in table.rows:
        refusal = "n/a" if row.refusal_accuracy is None else f"{row.refusal_accuracy:.4f}"
        view.add_row(
            str(row.target_chars),
            str(row.chunks),
            str(row.ranking_cases),
            str(row.unmapped_cases),
            *[f"{row.metrics[metric]:.4f}" if metric in row.metrics else "n/a" for metric in table.metrics],
            refusal,
            "◀ best" if row.best else "",
        )
    console.print(view)
    first = table.rows[0] if table.rows else None
    if first is not None:
        console.print(
            f"{plural(first.documents, 'document')}; chars = target, max = 1.5 × target, overlap ≤ target/4; "
            f"{plural(first.refusal_cases, 'no-gold case')} scored for refusal"
        )
    if table.rows and not table.rows[0].refusal_cases:
        console.print(
            "refusal acc n/a: the eval set has no no-answer case (import one with no gold, or promote "
            "a case labelled no_answer_in_kb)"
        )
    if any(not row.ranking_cases for row in table.rows):
        console.print(
            "n/a: no case with gold was scored in that setting (only no-answer cases ran); "
            "add cases with gold_refs to the eval set"
        )
    if table.derived_refs:
        console.print(
            f"{plural(len(table.derived_refs), 'case')} with chunk-id gold mapped through the spans and "
            "anchors of this KB's gold chunks (as `promote` stores them)"
        )
    skipped = table.skipped_chunk_id_gold
    if skipped:
        shown = ", ".join(skipped[:5]) + (
            f", … ({len(skipped) - 5} more, see --json)" if len(skipped) > 5 else ""
        )
        console.print(
            f"skipped {plural(len(skipped), 'case')} of {table.cases}: gold is chunk ids only, which cannot "
            f"map onto another chunking: this KB holds no span or anchor for their gold ({shown}); "
            "add gold_refs to the eval file"
        )
    if any(row.unmapped_cases for row in table.rows):
        counts = ", ".join(f"{row.target_chars} chars {row.unmapped_cases}" for row in table.rows)
        console.print(
            f"unmapped: cases whose gold refs map to no chunk in that setting (scored as misses: {counts}); "
            "see `ragtriage doctor`"
        )
    if table.skipped_documents:
        console.print(
            f"left out {plural(len(table.skipped_documents), 'document')} without a readable source file "
            "(imported chunks cannot be re-chunked)"
        )
    for note in table.notes:
        console.print(note)
    if table.held_out is not None:
        print_held_out(table.held_out, f"best size against {table.baseline_chars} chars")


@click.command("sweep")
@click.option(
    "--chunk-chars",
    "chunk_chars",
    required=True,
    callback=_sizes,
    help="Chunk target sizes in characters, comma-separated (e.g. 400,800,1200,2000).",
)
@dataset_option("Eval set to run.")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the throwaway homes [a temporary folder]; they are removed at the end.",
)
@click.option(
    "--folds",
    type=click.IntRange(0),
    default=5,
    show_default=True,
    help="Cross-validation folds (0: none) for the held-out MRR of choosing the best size.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the folds and the paired test.")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
@workspace_options
def sweep_command(
    chunk_chars: list[int],
    dataset: str,
    workdir: Path | None,
    folds: int,
    seed: int,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Build a throwaway KB per chunk size from the KB's source files, run the eval set on each,
    and print one table with the best size marked (highest MRR).

    Gold must survive re-chunking: cases with gold refs (doc_id with anchor or span, as
    `promote` stores them), document-level gold or no gold run in every setting; a case whose
    gold is chunk ids gets the span and anchor of those chunks in this KB, and is skipped and
    counted when they have none. The throwaway homes share this home's embedding cache, so
    repeated chunk texts are embedded once.

    \b
    Columns:
      chars        target chunk size (max 1.5 × target, overlap ≤ target/4)
      chunks       chunks in the throwaway KB
      cases        cases with gold that were scored (ranking cases)
      unmapped     ranking cases whose gold refs map to no chunk there
                   (scored as misses)
      hit@K        share of ranking cases with a gold chunk in the top K
      recall@K     mean share of each case's gold chunks in the top K
      mrr          mean of 1/rank of the first gold chunk (0: not found)
      refusal acc  share of no-answer cases the pipeline refused
      best         highest MRR (ties: Hit@K, then the smaller size)
    n/a: no case with gold was scored in that setting.

    Held out: with --folds N the best size is chosen on N−1 folds of the cases and scored on the
    held one (from the per-case scores of the runs, nothing re-run), against the configured
    kb.target_chars when it is swept (else the first size): MRR gain in sample and held out, its
    spread over folds, a paired test, and a warning when the held-out gain is under half the
    in-sample one or not significant.
    """
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    with where.open() as workspace, progress_bar(not as_json) as bar:
        table = run_chunk_sweep(
            workspace,
            chunk_chars,
            dataset,
            workdir=workdir,
            folds=folds,
            seed=seed,
            on_progress=lambda label, done, total: (bar(label) or (lambda *_: None))(done, total),
        )
    if as_json:
        echo_json(table)
        return
    print_sweep(table)
