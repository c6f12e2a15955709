"""`ragtriage eval import|export|run|runs`: eval sets in and out, batch runs and the run list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ragtriage.commands.common import (
    WorkspaceAt,
    dataset_option,
    echo_json,
    progress_bar,
    stdout_console,
    workspace_options,
)
from ragtriage.eval.doctor import run_doctor
from ragtriage.eval.finetune import export_finetune
from ragtriage.eval.formats import CASE_FORMATS, EXPORT_FORMATS, detect_case_format, read_cases, write_cases
from ragtriage.eval.run_view import list_run_items
from ragtriage.eval.runner import run_eval
from ragtriage.index.index_state import index_lag
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.text import plural
from ragtriage.store import eval_repo as eval_store


def _fmt(value: Any) -> str:
    return "-" if value is None else (f"{value:.4f}" if isinstance(value, float) else str(value))


def _print_summary(summary: Any) -> None:
    console = stdout_console()
    means = summary.aggregates.get("means", {})
    table = FitTable(
        [Col("metric", "label"), Col("mean", "number", justify="right")],
        title=f"run {summary.run_id} ({summary.name or 'unnamed'}) on "
        f"{summary.dataset}@{summary.dataset_version}, profile {summary.profile}: {summary.status}, "
        f"{summary.cases_done}/{plural(summary.case_count, 'case')}, granularity {summary.granularity}",
    )
    for name, value in means.items():
        table.add_row(name, _fmt(value))
    console.print(table)
    no_gold = summary.aggregates.get("no_gold", {})
    shift = summary.aggregates.get("rank_shift", {})
    refusal = (
        f"refused {no_gold.get('refused', 0)}, refusal accuracy {_fmt(no_gold.get('refusal_accuracy'))}"
        if no_gold.get("refusal_accuracy") is not None
        else "refusal accuracy n/a: no case without gold"
    )
    moved = (
        f"rerank shift of gold {_fmt(shift.get('mean_shift'))} over "
        f"{plural(shift.get('gold_pairs', 0), 'pair')}, {shift.get('dropped_by_rerank', 0)} dropped"
        if shift.get("mean_shift") is not None
        else "rerank shift of gold n/a: no gold chunk was in both the fused and the reranked list "
        "(no rerank in this profile, or gold never retrieved)"
    )
    console.print(
        f"ranking cases {summary.aggregates.get('cases', 0)}; no-gold cases {no_gold.get('cases', 0)} "
        f"({refusal}); {moved}; wall {summary.timings.get('wall_s', 0)} s"
    )


def _gold_warnings(workspace: Any, dataset: str) -> list[str]:
    """The doctor's error findings on `dataset` as one warning line (gold the KB does not hold,
    document ids as chunk ids, deleted gold…): the scores they make wrong are printed anyway."""
    line = run_doctor(workspace, dataset, refusal_cost=False).error_line()
    return [] if line is None else [line]


@click.command("import")
@click.argument("file", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("auto", *CASE_FORMATS)),
    default="auto",
    show_default=True,
    help="File format; auto tells it by the content (folder: beir, JSON array: cases-json, "
    "JSON lines: cases-jsonl, qrels lines: trec).",
)
@dataset_option()
@click.option(
    "--granularity",
    type=click.Choice(["chunk", "doc"]),
    default=None,
    help="Override whether gold ids are chunk ids or document ids.",
)
@click.option("--split", default="test", show_default=True, help="BEIR qrels split.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@workspace_options
def import_command(
    file: Path,
    fmt: str,
    dataset: str,
    granularity: str | None,
    split: str,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Import eval cases; changed cases get a new version, the dataset a new version."""
    warnings: list[str] = []
    if fmt == "auto":
        fmt = detect_case_format(file)
    cases = read_cases(file, fmt, warnings=warnings, split=split, granularity=granularity)  # type: ignore[arg-type]
    with where.open() as workspace:
        report = eval_store.add_cases(workspace.engine, dataset, cases, provenance={"source": str(file)})
        warnings += _gold_warnings(workspace, dataset)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        echo_json(report)
        return
    click.echo(
        f"{dataset}@{report.dataset_version}: {len(report.added)} added, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged"
    )


@click.command("export")
@click.argument("out", type=click.Path(path_type=Path))
@dataset_option()
@click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), required=True, help="File format.")
@click.option("--version", "version", type=int, default=None, help="Dataset version [current].")
@click.option(
    "--negatives",
    type=click.IntRange(min=0),
    default=7,
    show_default=True,
    help="finetune: hard negatives per query.",
)
@click.option(
    "--run",
    "run_ref",
    default=None,
    help="finetune: the run whose ranking gives the negatives [newest complete].",
)
@workspace_options
def export_command(
    out: Path,
    dataset: str,
    fmt: str,
    version: int | None,
    negatives: int,
    run_ref: str | None,
    where: WorkspaceAt,
) -> None:
    """Write an eval set (one dataset version) to OUT.

    `--format finetune` writes FlagEmbedding's reranker/embedder JSONL, one
    `{"query", "pos": [...], "neg": [...]}` per case: positives are the gold chunks' text, hard
    negatives the non-gold chunks the run ranked above the gold, topped up from its candidate
    pool (never a gold chunk). Cases without gold are skipped and counted. It uses the cases of
    the run's dataset version (`--version` does not apply).
    """
    if fmt == "finetune":
        if version is not None:
            raise click.BadParameter(
                "finetune uses the run's dataset version; drop --version", param_hint="--version"
            )
        with where.open() as workspace:
            report = export_finetune(
                workspace.engine, out, dataset=dataset, run_ref=run_ref, negatives=negatives
            )
        click.echo(
            f"wrote {out}: {report.written} of {report.cases} cases from run {report.run_id}, "
            f"{report.negatives} negatives ({report.short_of_negatives} cases short of {negatives}); "
            f"skipped {report.skipped_no_answer} no-answer, {report.skipped_doc_granularity} document-level, "
            f"{report.skipped_not_in_run} not in the run, {report.skipped_no_text} without gold text",
            err=True,
        )
        if not report.written:
            click.echo(
                "nothing to train on: a line needs a case with chunk gold whose text is in the KB; "
                "promote confirmed cases (`ragtriage promote REQUEST_ID`), import the KB the gold ids "
                "come from (`ragtriage kb import`), or check them with `ragtriage doctor`",
                err=True,
            )
        return

    with where.open() as workspace:
        cases = [c.case for c in eval_store.dataset_cases(workspace.engine, dataset, version)]
    for path in write_cases(cases, out, fmt):  # type: ignore[arg-type]
        click.echo(f"wrote {path}", err=True)


@click.command("run")
@dataset_option()
@click.option("--name", default=None, help="A name for the run (compare and gate accept it).")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Threads over batches of queries.",
)
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=32, show_default=True, help="Queries per batch."
)
@click.option("--resume", "resume", default=None, metavar="RUN", help="Finish the missing cases of RUN.")
@click.option(
    "--profile",
    "profile",
    default=None,
    metavar="NAME",
    help="Replay profile to run (see `ragtriage profiles`), as `replay --profile`; "
    "default: the settings file as it is.",
)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@workspace_options
def run_command(
    dataset: str,
    name: str | None,
    workers: int,
    batch_size: int,
    resume: str | None,
    profile: str | None,
    as_json: bool,
    where: WorkspaceAt,
) -> None:
    """Replay every case of the eval set through the pipeline and store the run."""
    with where.open() as workspace, progress_bar(not as_json) as bar:
        lag = index_lag(workspace.home, workspace.settings, workspace.engine)
        if lag is not None:
            click.echo(f"note: {lag}; until then every case is scored on the old or empty indexes", err=True)
        try:
            summary = run_eval(
                workspace,
                dataset,
                name=name,
                workers=workers,
                resume_run_id=resume,
                batch_size=batch_size,
                on_progress=bar("evaluating"),
                profile=profile,
            )
        except KeyboardInterrupt:
            runs = eval_store.list_runs(workspace.engine)
            run_id = runs[0].id if runs else "RUN"
            click.echo(
                f"interrupted: run {run_id} is incomplete; finish it with "
                f"`ragtriage eval run --resume {run_id}`",
                err=True,
            )
            raise SystemExit(130) from None
        gold_warnings = _gold_warnings(workspace, dataset)
    if as_json:
        echo_json(summary)
    else:
        _print_summary(summary)
    for warning in gold_warnings:
        click.echo(f"warning: {warning}", err=True)
    if summary.status != "complete":
        click.echo(
            f"run {summary.run_id} is {summary.status}; finish it with "
            f"`ragtriage eval run --resume {summary.run_id}`",
            err=True,
        )
        click.get_current_context().exit(1)


@click.command("runs")
@click.option("--dataset", default=None, help="Only runs of this eval set.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@workspace_options
def runs_command(dataset: str | None, as_json: bool, where: WorkspaceAt) -> None:
    """List stored runs, newest first."""
    with where.open() as workspace:
        rows = [item.model_dump() for item in list_run_items(workspace.engine, dataset)]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        stdout_console().print(
            "no eval runs in this home; start one with `ragtriage eval run --name NAME` "
            "(after `ragtriage eval import` or `ragtriage promote`)"
        )
        return
    table = FitTable(
        [
            Col("id", "number", justify="right"),
            Col("name", "text", drop_order=2),
            Col("dataset", "label"),
            Col("status", "label"),
            Col("cases", "number", justify="right"),
            Col("profile", "label", drop_order=4),
            Col("config", "id", drop_order=1),
            Col("recall@5", "number", justify="right"),
            Col("mrr", "number", justify="right"),
            Col("started", "label", drop_order=3),
        ],
        title=plural(len(rows), "run"),
    )
    for row in rows:
        table.add_row(
            str(row["run_id"]),
            row["name"] or "",
            f"{row['dataset']}@{row['dataset_version']}",
            row["status"],
            f"{row['cases_done']}/{row['case_count']}",
            row["profile"],
            row["config_hash"],
            _fmt(row["means"]["recall@5"]),
            _fmt(row["means"]["mrr"]),
            row["started_at"],
        )
    stdout_console().print(table)
