"""`ragtriage eval compare|gate|ablate`: one run against another, a pass/fail gate for CI, and the
A–F configuration table."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click

from ragtriage.commands.common import (
    WorkspaceAt,
    dataset_option,
    echo_json,
    progress_bar,
    workspace_options,
)
from ragtriage.commands.eval_render import print_ablation, print_comparison
from ragtriage.eval.ablation import run_ablation
from ragtriage.eval.compare import compare_runs
from ragtriage.eval.gate import evaluate_gate


@click.command("compare")
@click.argument("run_a")
@click.argument("run_b")
@click.option(
    "--metric", default=None, help="Metric that orders regressed cases [first of mrr, recall@5, ndcg@10]."
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@workspace_options
def compare_command(run_a: str, run_b: str, metric: str | None, as_json: bool, where: WorkspaceAt) -> None:
    """Compare RUN_B against RUN_A: deltas, win/tie/loss, significance, regressed cases."""
    with where.open() as workspace:
        try:
            comparison = compare_runs(workspace.engine, run_a, run_b, primary_metric=metric)
        except ValueError as error:
            raise click.BadParameter(str(error), param_hint="--metric") from None
    if as_json:
        echo_json(comparison)
        return
    print_comparison(comparison)


@click.command("gate")
@click.option("--run", "run_ref", required=True, metavar="RUN", help="Run to judge (id or name).")
@click.option(
    "--baseline", default=None, metavar="RUN", help="Run to compare with (--max-drop, --no-regress)."
)
@click.option("--min", "mins", multiple=True, metavar="METRIC=VALUE", help="Floor, e.g. recall@5=0.8.")
@click.option(
    "--max-drop",
    "max_drops",
    multiple=True,
    metavar="METRIC=VALUE",
    help="Largest allowed drop against the baseline, e.g. mrr=0.02 or mrr=5%.",
)
@click.option(
    "--no-regress",
    type=click.Choice(["confirmed", "all"]),
    default=None,
    help="Fail when any confirmed badcase (or any case) regressed against the baseline.",
)
@click.option("--metric", default=None, help="Metric for --no-regress [mrr].")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the HTML report (RUN against --baseline) with the verdict to this file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@workspace_options
def gate_command(
    run_ref: str,
    baseline: str | None,
    mins: tuple[str, ...],
    max_drops: tuple[str, ...],
    no_regress: Literal["confirmed", "all"] | None,
    metric: str | None,
    report_path: Path | None,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Exit 1 when a rule fails (one reason per rule), 2 for a malformed rule, 0 when all pass."""
    with where.open() as workspace:
        result = evaluate_gate(
            workspace.engine,
            run_ref,
            baseline_ref=baseline,
            mins=mins,
            max_drops=max_drops,
            no_regress=no_regress,
            regress_metric=metric,
        )
        if report_path is not None:
            from ragtriage.service.report import write_report  # Jinja2, matplotlib: only for --report

            # The baseline is run A of the report and the gated run is B, as in `eval compare`.
            first, second = (
                (result.baseline_id, result.run_id) if result.baseline_id else (result.run_id, None)
            )
            write_report(workspace.engine, first, report_path, compare=second, gate=result)
            click.echo(f"wrote {report_path}", err=True)
    if as_json:
        echo_json(result)
    else:
        for check in result.checks:
            click.echo(f"{'PASS' if check.passed else 'FAIL'}  {check.rule}: {check.reason}")
        click.echo(f"gate {'passed' if result.passed else 'FAILED'} for run {result.run_id}")
    if not result.passed:
        click.get_current_context().exit(1)


@click.command("ablate")
@dataset_option()
@click.option(
    "--reference",
    type=click.Choice(["A", "C"]),
    default="A",
    show_default=True,
    help="The configuration deltas are computed against.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Threads over batches of queries.",
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@workspace_options
def ablate_command(dataset: str, reference: str, workers: int, as_json: bool, where: WorkspaceAt) -> None:
    """Run configurations A–F (raw BM25 … raw + rewritten + rerank) and print one table."""
    with where.open() as workspace, progress_bar(not as_json) as bar:
        table = run_ablation(
            workspace,
            dataset,
            reference=reference,
            workers=workers,
            on_progress=lambda letter, done, total: (bar(f"config {letter}") or (lambda *_: None))(
                done, total
            ),
        )
    if as_json:
        echo_json(table)
        return
    print_ablation(table)
