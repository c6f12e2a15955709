"""`ragtriage eval fit-rerank`: fit the rerank feature weights on an eval set (coordinate ascent)."""

from __future__ import annotations

import click
from rich.text import Text

from ragtriage.commands.common import (
    WorkspaceAt,
    dataset_option,
    echo_json,
    progress_bar,
    stdout_console,
    workspace_options,
)
from ragtriage.commands.eval_render import print_held_out
from ragtriage.errors import InputError
from ragtriage.eval.rerank_fit import CROSS_ENCODER, FitReport, collect_fit_cases, fit_weights, write_weights
from ragtriage.pipeline.rerank import FEATURE_NAMES
from ragtriage.render.fit import Col, FitTable
from ragtriage.wording import quoted


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _verdict(report: FitReport) -> str:
    if not report.fitted_names:
        return "nothing to fit: every feature has one value within each query's candidates"
    if report.generalises is None:
        return "not cross-validated (--folds 0): the fit-set figures overstate what unseen queries get"
    if report.generalises:
        return "the fitted weights beat the current ones out of fold: worth a run on held-out cases"
    return "the fitted weights do not beat the current ones out of fold: keep the current weights"


def _write_refusal(report: FitReport) -> str | None:
    """Why --write (without --force) writes nothing, in one line; None when the held-out gain is significant."""
    if not report.fitted_names:
        return "nothing written: no feature varies, so there is no weight to fit"
    if report.held_out is None:
        return (
            "nothing written: --folds 0 gives no held-out figures to judge the fit by; "
            "add --force to write it anyway"
        )
    return None if report.held_out.significant else report.held_out.refusal("the fitted weights")


def print_fit(report: FitReport) -> None:
    """Weights (current, fitted), then MRR@K and Hit@H on the fit set and out of fold, then the verdict."""
    console = stdout_console()
    skipped = "".join(f", {count} left out ({reason})" for reason, count in report.skipped.items())
    console.print(
        Text(
            f"{report.cases} cases{skipped}; {report.pool_without_gold} with no gold in the rerank input "
            f"(they score 0 with any weights); final list cut at top_n = {report.top_n}"
        )
    )
    weights = FitTable(
        [
            Col("feature", "label"),
            Col("current", "number", justify="right"),
            Col("fitted", "number", justify="right"),
            Col("", "label"),
        ],
        title="[rerank.weights]",
    )
    for name in report.names:
        note = (
            "constant: not fitted"
            if name in report.constant
            else ("" if name in report.fitted_names else "kept")
        )
        weights.add_row(name, f"{report.current[name]:g}", f"{report.fitted[name]:.6g}", note)
    console.print(weights)
    figures = FitTable(
        [
            Col("figure", "label"),
            Col("current", "number", justify="right"),
            Col("fitted", "number", justify="right"),
        ],
    )
    figures.add_row(f"MRR@{report.k}, fit set", _fmt(report.mrr_current), _fmt(report.mrr_fitted))
    figures.add_row(f"Hit@{report.hit_k}, fit set", _fmt(report.hit_current), _fmt(report.hit_fitted))
    if report.generalises is not None:
        figures.add_row(
            f"MRR@{report.k}, {report.folds}-fold", _fmt(report.cv_mrr_current), _fmt(report.cv_mrr_fitted)
        )
        figures.add_row(
            f"Hit@{report.hit_k}, {report.folds}-fold",
            _fmt(report.cv_hit_current),
            _fmt(report.cv_hit_fitted),
        )
    console.print(figures)
    if report.held_out is not None:
        print_held_out(report.held_out, "the fitted weights")
    console.print(Text(_verdict(report)))


@click.command("fit-rerank")
@dataset_option("Eval set to fit on.")
@click.option(
    "--tag",
    "tags",
    multiple=True,
    help="Fit only on cases carrying this tag (repeatable: all of them), e.g. --tag split:tune.",
)
@click.option(
    "--features",
    default=None,
    help="Comma-separated features to fit [every feature that varies]; the others keep their weight.",
)
@click.option("--k", "k", type=click.IntRange(1), default=10, show_default=True, help="Fit MRR@K.")
@click.option(
    "--folds",
    type=click.IntRange(0),
    default=5,
    show_default=True,
    help="Cross-validation folds (0: none) to estimate the fit on unseen queries.",
)
@click.option(
    "--restarts",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="Ascents from perturbed weights; the best fit wins.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the restarts and folds.")
@click.option(
    "--write",
    is_flag=True,
    help="Write the fitted weights to the settings file, only when their held-out MRR gain is "
    "significant (paired test, p < 0.05).",
)
@click.option(
    "--force", is_flag=True, help="With --write: write even when the held-out gain is not significant."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr.")
@workspace_options
def fit_rerank_command(
    dataset: str,
    tags: tuple[str, ...],
    features: str | None,
    k: int,
    folds: int,
    restarts: int,
    seed: int,
    write: bool,
    force: bool,
    as_json: bool,
    progress: bool,
    where: WorkspaceAt,
) -> None:
    """Fit the rerank stage's feature weights by coordinate ascent on MRR@K.

    Replays the answerable cases of the eval set (those with every --tag) with the current
    settings and records each candidate's rerank features. Coordinate ascent (Metzler & Croft
    2007, RankLib) then moves one weight at a time to the value that raises mean MRR@K most,
    over the final list (top_n), until no step helps; the weights are rescaled to the current
    ones' L1 norm. With --folds N it also fits on N−1 folds and scores the held fold, so the
    report shows the held-out gain beside the in-sample one (mean, spread over folds, paired
    test) and warns when it is under half the in-sample gain or not significant. Fit on a tuning
    split and check a held-out one with `eval run` before shipping weights. --write sets
    [rerank.weights] in the settings file, and refuses when the held-out gain is not significant
    (or --folds 0 gives none) unless --force.
    """
    only = [name.strip() for name in features.split(",") if name.strip()] if features else None
    with where.open() as workspace:
        settings = workspace.settings
        names = list(FEATURE_NAMES)
        if settings.rerank.backend != "none":
            names.insert(0, CROSS_ENCODER)
        if only:
            unknown = [name for name in only if name not in names]
            if unknown:
                raise InputError(
                    f"--features: no feature {quoted(unknown[0])}; choose from {', '.join(names)}"
                )
        with progress_bar(progress) as bar:
            cases, skipped = collect_fit_cases(
                workspace, dataset, names, tags=tags, on_progress=bar("replaying cases")
            )
        if not cases:
            raise InputError(f"eval set {quoted(dataset)} has no answerable case to fit on; add gold first")
        current = settings.rerank.weights.model_dump()
        report = fit_weights(
            cases,
            names,
            current,
            only=only,
            k=k,
            top_n=settings.rerank.top_n,
            folds=folds,
            restarts=restarts,
            seed=seed,
            skipped=skipped,
        )
        target = workspace.config_file or workspace.home / "config.toml"
        refusal = _write_refusal(report) if write and not force else None
        wrote = write and bool(report.fitted_names) and refusal is None
        if wrote:
            write_weights(target, {name: report.fitted[name] for name in report.names})
    if as_json:
        echo_json({**report.__dict__, "generalises": report.generalises})
    else:
        print_fit(report)
    if write:
        if not wrote:
            click.echo(
                refusal or "nothing written: no feature varies, so there is no weight to fit", err=True
            )
            click.get_current_context().exit(1)
        click.echo(f"wrote [rerank.weights] to {target}", err=True)
