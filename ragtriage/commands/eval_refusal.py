"""`ragtriage eval calibrate-refusal`: sweep the refusal threshold over a run's scores, propose one."""

from __future__ import annotations

from typing import TypeVar

import click
from rich.table import Table
from rich.text import Text

from ragtriage.commands.common import (
    WorkspaceAt,
    dataset_option,
    echo_json,
    stdout_console,
    workspace_options,
)
from ragtriage.commands.eval_render import print_held_out
from ragtriage.eval.refusal_calibration import (
    SCORE_KINDS,
    CalibrationReport,
    GapRow,
    ThresholdRow,
    calibrate_results,
    unscored_refused,
    write_threshold,
)
from ragtriage.eval.run_view import run_or_newest
from ragtriage.store import eval_repo as eval_store

#: Rows printed around the proposal (the JSON has them all).
SHOWN_ROWS = 15
_Row = TypeVar("_Row")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _window(rows: list[_Row], center: int) -> list[_Row]:
    """At most `SHOWN_ROWS` consecutive `rows`, `rows[center]` in the middle where the ends allow."""
    if len(rows) <= SHOWN_ROWS:
        return rows
    start = max(0, min(center - SHOWN_ROWS // 2, len(rows) - SHOWN_ROWS))
    return rows[start : start + SHOWN_ROWS]


def _shown(report: CalibrationReport) -> list[ThresholdRow]:
    """The threshold rows around the proposed one."""
    rows = report.rows
    return _window(rows, rows.index(report.proposed) if report.proposed in rows else 0)


def _gap(value: float | None) -> str:
    return "off" if value is None else f"{value:g}"


def _shown_gaps(report: CalibrationReport) -> list[GapRow]:
    """The dense gap rows around the chosen gap."""
    gaps = [row.dense_gap for row in report.gap_rows]
    return _window(report.gap_rows, gaps.index(report.dense_gap) if report.dense_gap in gaps else 0)


def _print_gaps(report: CalibrationReport) -> None:
    """The dense gap sweep: the best threshold at each candidate gap."""
    console = stdout_console()
    table = Table(box=None, padding=(0, 1, 0, 0))
    for name in ("dense gap", "threshold", "no-answer refused", "answerable refused"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    for row in _shown_gaps(report):
        best = row.best
        chosen = report.proposed is not None and row.dense_gap == report.dense_gap
        if best is None:
            cells = ["-", "-", "-"]
        else:
            cells = [
                f"{best.threshold:.4f}",
                f"{best.refused_no_answer}/{report.no_answer_cases} {_pct(best.refusal_accuracy)}",
                f"{best.refused_answerable}/{report.answerable_cases} {_pct(best.wrongly_refused)}",
            ]
        table.add_row(_gap(row.dense_gap), *cells, "← proposed" if chosen else "")
    shown = (
        f"{SHOWN_ROWS} of {len(report.gap_rows)} gaps around the proposal (--json: all); "
        if len(report.gap_rows) > SHOWN_ROWS
        else ""
    )
    console.print(
        Text(
            f"dense gap sweep ({shown}each row: the best threshold at that gap, '-': none within the "
            "bound; off: the share alone)"
        )
    )
    console.print(table)


def _print_held_out(report: CalibrationReport) -> None:
    """The proposal's share of right decisions against the run's own, in sample and out of fold."""
    assert report.held_out is not None and report.proposed is not None
    print_held_out(
        report.held_out,
        "the proposal against the run's own refusals",
        f"out of fold: refusal accuracy {_pct(report.held_out_refusal_accuracy)}, "
        f"{_pct(report.held_out_wrongly_refused)} of answerable cases refused (in sample "
        f"{_pct(report.proposed.refusal_accuracy)} and {_pct(report.proposed.wrongly_refused)})",
    )


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
    if report.gap_rows:
        _print_gaps(report)
    if report.gap_note:
        console.print(Text(f"note: {report.gap_note}"))
    if report.dense_gap_source in ("swept", "settings"):
        where = "the proposed" if report.dense_gap_source == "swept" else "the settings'"
        console.print(Text(f"thresholds at {where} refusal_dense_gap = {_gap(report.dense_gap)}:"))
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
        if report.held_out is not None:
            _print_held_out(report)
        settings = [f"refusal_threshold = {report.proposed.threshold:g}"]
        settings.append(f'refusal_threshold_score = "{report.score}"')
        if report.score != "cross_encoder":
            settings.append(f'refusal_score = "{report.score}"')
        if report.dense_gap_source == "swept":
            settings.append(
                "refusal_dense_gap = " + ('"off"' if report.dense_gap is None else f"{report.dense_gap:g}")
            )
        console.print(
            Text(
                f"proposed: [rerank] {', '.join(settings)} (refusal accuracy "
                f"{_pct(report.proposed.refusal_accuracy)}, {_pct(report.proposed.wrongly_refused)} of "
                "answerable cases refused)"
            )
        )


def _write_refusal(report: CalibrationReport) -> str | None:
    """Why --write (without --force) writes nothing, in one line; None when it may write."""
    if report.proposed is None:
        return "nothing written: no threshold meets the objective"
    if report.held_out is None:
        return (
            "nothing written: --folds 0 (or a single case) gives no held-out figures to judge the "
            "proposal by; add --force to write it anyway"
        )
    return None if report.held_out.significant else report.held_out.refusal("the proposed threshold")


@click.command("calibrate-refusal")
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
    "--dense-gap",
    "dense_gap",
    type=click.Choice(["sweep", "keep"]),
    default=None,
    help="lexical_support: sweep [rerank] refusal_dense_gap with the threshold, or keep the settings' "
    "[sweep when the settings have one, keep when it is off].",
)
@click.option(
    "--folds",
    type=click.IntRange(0),
    default=5,
    show_default=True,
    help="Cross-validation folds (0: none) for the held-out figures of the proposal.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the folds and the paired test.")
@click.option(
    "--write",
    is_flag=True,
    help="Write the proposed threshold, its score kind (and a swept dense gap) to the settings file, "
    "only when its held-out gain over the run's own refusals is significant (paired test, p < 0.05).",
)
@click.option(
    "--force", is_flag=True, help="With --write: write even when the held-out gain is not significant."
)
@click.option("--json", "as_json", is_flag=True, help="Print the sweep as JSON.")
@workspace_options
def calibrate_command(
    run_ref: str | None,
    dataset: str,
    score: str | None,
    max_wrong: float,
    dense_gap: str | None,
    folds: int,
    seed: int,
    write: bool,
    force: bool,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Sweep the refusal threshold over the scores an eval run recorded and propose one.

    A case is refused when its score is below the threshold. For each threshold: refusal
    accuracy on no-answer cases, and the share of answerable cases wrongly refused. The
    proposal maximises refusal accuracy subject to at most --max-wrong-refusals of answerable
    cases refused. The score is the cross-encoder's when the run has one, otherwise the best
    dense cosine (or --score fused/final/lexical_support: the IDF-weighted share of the query's
    content terms that the final candidates contain). --write sets [rerank] refusal_threshold, the
    kind it was calibrated for (refusal_threshold_score) and refusal_score in the settings file
    (comments kept), so refusal works without a cross-encoder; a threshold whose kind differs from
    the score a run refuses by does not judge it.

    With lexical_support and dense agreement ([rerank] refusal_dense_gap), the gap is swept too:
    for each candidate gap (from the dense gaps the run recorded per case, and off) the best
    threshold under the same objective; the proposal is the best pair (ties: the lower gap).
    The gap is a cosine difference on your embedder's scale, so calibrate it after changing the
    embedder. --write then sets refusal_dense_gap as well.

    Held out: with --folds N the proposal is re-made on N−1 folds and applied to the held one; the
    share of right decisions (no-answer refused, answerable kept) is compared with what the run
    refused, in sample and out of fold, with a paired test and a warning when the held-out gain is
    under half the in-sample one or not significant. --write refuses such a proposal unless --force.
    """
    with where.open() as workspace:
        engine = workspace.engine
        run = run_or_newest(engine, run_ref, dataset)
        rows = eval_store.run_case_results(engine, int(run.id or 0))
        results = [(r.has_gold, r.snapshot or {}) for r in rows]
        report = calibrate_results(
            int(run.id or 0),
            results,
            score,
            max_wrong=max_wrong,
            configured_gap=workspace.settings.rerank.refusal_dense_gap,
            sweep_gap=None if dense_gap is None else dense_gap == "sweep",
            refused=[r.refused for r in rows],
            folds=folds,
            seed=seed,
        )
        target = workspace.config_file or workspace.home / "config.toml"
        refusal = _write_refusal(report) if write and not force else None
        if write and report.proposed is not None and refusal is None:
            swept = report.dense_gap_source == "swept"
            write_threshold(
                target,
                report.proposed.threshold,
                report.score,
                write_gap=swept,
                dense_gap=report.dense_gap,
            )
    if as_json:
        echo_json(report)
    else:
        _print(report)
    if write:
        if report.proposed is None or refusal is not None:
            click.echo(refusal or "nothing written: no threshold meets the objective", err=True)
            click.get_current_context().exit(1)
        written = (
            "refusal_threshold and refusal_dense_gap"
            if report.dense_gap_source == "swept"
            else ("refusal_threshold")
        )
        click.echo(f"wrote [rerank] {written} to {target}", err=True)
