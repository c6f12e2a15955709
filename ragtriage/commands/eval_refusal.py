"""`ragtriage eval calibrate-refusal`: sweep the refusal threshold over a run's scores, propose one."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table
from rich.text import Text

from ragtriage.commands.common import (
    dataset_option,
    echo_json,
    open_workspace,
    stdout_console,
    workspace_options,
)
from ragtriage.eval.refusal_calibration import SCORE_KINDS, CalibrationReport, ThresholdRow, unscored_refused

#: Rows printed around the proposal (the JSON has them all).
SHOWN_ROWS = 15


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _shown(report: CalibrationReport) -> list[ThresholdRow]:
    rows = report.rows
    if len(rows) <= SHOWN_ROWS:
        return rows
    center = rows.index(report.proposed) if report.proposed in rows else 0
    start = max(0, min(center - SHOWN_ROWS // 2, len(rows) - SHOWN_ROWS))
    return rows[start : start + SHOWN_ROWS]


def _print(report: CalibrationReport) -> None:
    console = stdout_console()
    unscored = (
        f" ({report.unscored_cases} without a score, "
        f"{'always refused' if unscored_refused(report.score) else 'n/a: never refused'})"
        if report.rows and report.unscored_cases
        else ""
    )
    console.print(
        Text(
            f"run {report.run_id}: {report.score} score; {report.no_answer_cases} no-answer and "
            f"{report.answerable_cases} answerable cases{unscored}"
        )
    )
    if not report.rows or not report.no_answer_cases:
        # Nothing to sweep, or no refusal accuracy to read in any row: the reason is the output.
        console.print(Text(f"no threshold proposed: {report.reason}"))
        return
    table = Table(box=None, padding=(0, 1, 0, 0))
    for name in ("threshold", "refusal acc", "(no-answer)", "wrongly refused", "(answerable)"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    for row in _shown(report):
        table.add_row(
            f"{row.threshold:.4f}",
            _pct(row.refusal_accuracy),
            f"{row.refused_no_answer}/{report.no_answer_cases}",
            _pct(row.wrongly_refused),
            f"{row.refused_answerable}/{report.answerable_cases}",
            "← proposed" if row == report.proposed else "",
        )
    if len(report.rows) > SHOWN_ROWS:
        console.print(
            Text(f"{SHOWN_ROWS} of {len(report.rows)} thresholds around the proposal (--json: all)")
        )
    console.print(table)
    console.print(Text(f"objective: {report.objective}"))
    if report.proposed is None:
        console.print(Text(f"no threshold proposed: {report.reason}"))
    else:
        console.print(
            Text(
                f"proposed: [rerank] refusal_threshold = {report.proposed.threshold:g}"
                + (f', refusal_score = "{report.score}"' if report.score != "cross_encoder" else "")
                + f" (refusal accuracy {_pct(report.proposed.refusal_accuracy)}, "
                f"{_pct(report.proposed.wrongly_refused)} of answerable cases refused)"
            )
        )


def register_eval(group: click.Group) -> None:
    """Attach `calibrate-refusal` to the `eval` group."""

    @group.command("calibrate-refusal")
    @click.option("--run", "run_ref", default=None, help="Run id or name [the newest complete run].")
    @dataset_option("Eval set (for the newest run).")
    @click.option(
        "--score",
        type=click.Choice(SCORE_KINDS),
        default=None,
        help="Score to sweep [the cross-encoder's when the run has it, else the one the run refused by].",
    )
    @click.option(
        "--max-wrong-refusals",
        "max_wrong",
        type=click.FloatRange(0, 1),
        default=0.05,
        show_default=True,
        help="Objective bound: share of answerable cases that may be refused.",
    )
    @click.option(
        "--write", is_flag=True, help="Write the proposed threshold (and score) to the settings file."
    )
    @click.option("--json", "as_json", is_flag=True, help="Print the sweep as JSON.")
    @workspace_options
    def calibrate_command(
        run_ref: str | None,
        dataset: str,
        score: str | None,
        max_wrong: float,
        write: bool,
        as_json: bool,
        home: Path | None,
        config_file: Path | None,
    ) -> None:
        """Sweep the refusal threshold over the scores an eval run recorded and propose one.

        A case is refused when its score is below the threshold. For each threshold: refusal
        accuracy on no-answer cases, and the share of answerable cases wrongly refused. The
        proposal maximises refusal accuracy subject to at most --max-wrong-refusals of answerable
        cases refused. The score is the cross-encoder's when the run has one, otherwise the best
        dense cosine (or --score fused/final/lexical_support: the IDF-weighted share of the query's
        content terms that the final candidates contain). --write sets [rerank] refusal_threshold and
        refusal_score in the settings file (comments kept), so refusal works without a cross-encoder.
        """
        from ragtriage.eval import store as eval_store
        from ragtriage.eval.refusal_calibration import calibrate, case_scores, write_threshold
        from ragtriage.eval.run_pick import run_or_newest

        with open_workspace(home, config_file) as workspace:
            engine = workspace.engine
            run = run_or_newest(engine, run_ref, dataset)
            results = [
                (r.has_gold, r.snapshot or {}) for r in eval_store.run_case_results(engine, int(run.id or 0))
            ]
            kind, cases = case_scores(results, score)
            report = calibrate(int(run.id or 0), kind, cases, max_wrong=max_wrong)
            target = workspace.config_file or workspace.home / "config.toml"
            if write and report.proposed is not None:
                write_threshold(target, report.proposed.threshold, report.score)
        if as_json:
            echo_json(report)
        else:
            _print(report)
        if write:
            if report.proposed is None:
                click.echo("nothing written: no threshold meets the objective", err=True)
                click.get_current_context().exit(1)
            click.echo(f"wrote [rerank] refusal_threshold to {target}", err=True)
