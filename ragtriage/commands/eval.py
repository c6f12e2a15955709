"""`ragtriage eval …`: the click group, `score` (a TREC run file against qrels), and the subcommands
of the `eval_*` modules attached to it."""

from __future__ import annotations

from pathlib import Path

import click

from ragtriage.commands.common import echo_json, stdout_console
from ragtriage.commands.eval_compare import ablate_command, compare_command, gate_command
from ragtriage.commands.eval_fit import fit_rerank_command
from ragtriage.commands.eval_refusal import calibrate_command
from ragtriage.commands.eval_runs import export_command, import_command, run_command, runs_command
from ragtriage.commands.eval_show import show_command
from ragtriage.commands.eval_sweep import sweep_command
from ragtriage.eval.formats import read_trec_qrels, read_trec_run
from ragtriage.eval.scoring import ScoreReport, build_score_report
from ragtriage.eval.specs import DEFAULT_KS, MetricSpec, default_specs, parse_ks, parse_metrics
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.text import plural


@click.group("eval")
def eval_group() -> None:
    """Eval sets and batch evaluation: score runs, compare them, gate a change."""


def _metric_specs(metrics: tuple[str, ...], ks_text: str | None) -> list[MetricSpec]:
    """The metrics asked for with --metrics, else p/recall/hit/ndcg at every --ks cutoff plus MRR."""
    try:
        ks = parse_ks(ks_text) if ks_text is not None else list(DEFAULT_KS)
        specs = parse_metrics(metrics) if metrics else default_specs(ks)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--metrics" if metrics else "--ks") from None
    for spec in specs:
        if spec.needs_candidates:
            raise click.BadParameter(
                f"{spec} needs the candidate list before rerank, which a run file does not have; "
                "use `ragtriage eval run` for coverage",
                param_hint="--metrics",
            )
    return specs


@eval_group.command("score")
@click.option(
    "--qrels",
    "qrels_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TREC qrels file: `qid 0 docid grade` per line.",
)
@click.option(
    "--run",
    "run_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TREC run file: `qid Q0 docid rank score tag` per line.",
)
@click.option("--json", "as_json", is_flag=True, help="Print per-query values and means as JSON.")
@click.option(
    "--metrics",
    multiple=True,
    metavar="LIST",
    help="Metrics, comma-separated or repeated: p@5, recall@10, hit@5, mrr, mrr@10, ndcg@10.",
)
@click.option(
    "--ks", "ks_text", default=None, metavar="LIST", help="Cutoffs for the default metrics [1,3,5,10,20]."
)
def score(
    qrels_path: Path, run_path: Path, as_json: bool, metrics: tuple[str, ...], ks_text: str | None
) -> None:
    """Score an existing TREC run file against qrels (no replay).

    Rankings are de-duplicated (first occurrence kept); judged queries missing from the run score 0;
    ranked queries without qrels are skipped and counted.
    """
    specs = _metric_specs(metrics, ks_text)
    qrels = read_trec_qrels(qrels_path)
    run = read_trec_run(run_path)
    report = build_score_report(run.rankings, qrels, specs, warnings=run.warnings)
    if as_json:
        echo_json(report.model_dump(mode="json"))
        return
    _print_report(report, specs)


def _print_report(report: ScoreReport, specs: list[MetricSpec]) -> None:
    table = FitTable(
        [Col("metric", "label"), Col("mean", "number", justify="right")],
        title=plural(report.queries, "query"),
    )
    for spec in specs:
        table.add_row(spec.label, f"{report.mean.get(spec.label, 0.0):.4f}")
    stdout_console().print(table)
    # Plain echo, not Rich: a warning stays one greppable line whatever the terminal width.
    if report.skipped_no_qrels:
        click.echo(f"skipped (no qrels): {report.skipped_no_qrels}", err=True)
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)


for _command in (
    import_command,
    export_command,
    run_command,
    runs_command,
    compare_command,
    gate_command,
    ablate_command,
    show_command,
    calibrate_command,
    sweep_command,
    fit_rerank_command,
):
    eval_group.add_command(_command)
