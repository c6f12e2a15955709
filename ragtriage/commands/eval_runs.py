"""`ragtriage eval import|export|run|runs|compare|gate|ablate`: eval sets, batch runs and their comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ragtriage.commands.common import (
    echo_json,
    open_workspace,
    progress_bar,
    stdout_console,
    workspace_options,
)
from ragtriage.eval import store as eval_store
from ragtriage.eval.formats import CASE_FORMATS, EXPORT_FORMATS
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.text import plural


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
    console.print(
        f"ranking cases {summary.aggregates.get('cases', 0)}; no-gold cases {no_gold.get('cases', 0)} "
        f"(refused {no_gold.get('refused', 0)}, refusal accuracy {_fmt(no_gold.get('refusal_accuracy'))}); "
        f"rerank shift of gold {_fmt(shift.get('mean_shift'))} over {plural(shift.get('gold_pairs', 0), 'pair')}, "
        f"{shift.get('dropped_by_rerank', 0)} dropped; wall {summary.timings.get('wall_s', 0)} s"
    )


def register_eval(group: click.Group) -> None:
    """Attach import, export, run, runs, compare, gate and ablate to the `eval` group."""

    @group.command("import")
    @click.argument("file", type=click.Path(exists=True, path_type=Path))
    @click.option("--format", "fmt", type=click.Choice(CASE_FORMATS), required=True, help="File format.")
    @click.option("--dataset", default=eval_store.DEFAULT_DATASET, show_default=True, help="Eval set name.")
    @click.option(
        "--granularity",
        type=click.Choice(["chunk", "doc"]),
        default=None,
        help="Override whether gold ids are chunk ids or document ids.",
    )
    @click.option("--split", default="test", show_default=True, help="BEIR qrels split.")
    @click.option("--json", "as_json", is_flag=True)
    @workspace_options
    def import_command(
        file: Path,
        fmt: str,
        dataset: str,
        granularity: str | None,
        split: str,
        as_json: bool,
        home: Path | None,
        config_file: Path | None,
    ) -> None:
        """Import eval cases; changed cases get a new version, the dataset a new version."""
        from ragtriage.eval.formats import read_cases

        warnings: list[str] = []
        cases = read_cases(file, fmt, warnings=warnings, split=split, granularity=granularity)  # type: ignore[arg-type]
        with open_workspace(home, config_file) as workspace:
            report = eval_store.add_cases(workspace.engine, dataset, cases, provenance={"source": str(file)})
        for warning in warnings:
            click.echo(f"warning: {warning}", err=True)
        if as_json:
            echo_json(report)
            return
        click.echo(
            f"{dataset}@{report.dataset_version}: {len(report.added)} added, {len(report.updated)} updated, "
            f"{len(report.unchanged)} unchanged"
        )

    @group.command("export")
    @click.argument("out", type=click.Path(path_type=Path))
    @click.option("--dataset", default=eval_store.DEFAULT_DATASET, show_default=True)
    @click.option("--format", "fmt", type=click.Choice(EXPORT_FORMATS), required=True)
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
        home: Path | None,
        config_file: Path | None,
    ) -> None:
        """Write an eval set (one dataset version) to OUT.

        `--format finetune` writes FlagEmbedding's reranker/embedder JSONL, one
        `{"query", "pos": [...], "neg": [...]}` per case: positives are the gold chunks' text, hard
        negatives the non-gold chunks the run ranked above the gold, topped up from its candidate
        pool (never a gold chunk). Cases without gold are skipped and counted. It uses the cases of
        the run's dataset version (`--version` does not apply).
        """
        if fmt == "finetune":
            from ragtriage.eval.finetune import export_finetune

            if version is not None:
                raise click.BadParameter(
                    "finetune uses the run's dataset version; drop --version", param_hint="--version"
                )
            with open_workspace(home, config_file) as workspace:
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
        from ragtriage.eval.formats import write_cases

        with open_workspace(home, config_file) as workspace:
            cases = [c.case for c in eval_store.dataset_cases(workspace.engine, dataset, version)]
        for path in write_cases(cases, out, fmt):  # type: ignore[arg-type]
            click.echo(f"wrote {path}", err=True)

    @group.command("run")
    @click.option("--dataset", default=eval_store.DEFAULT_DATASET, show_default=True)
    @click.option("--name", default=None, help="A name for the run (compare and gate accept it).")
    @click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Threads over batches of queries.",
    )
    @click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True)
    @click.option("--resume", "resume", default=None, metavar="RUN", help="Finish the missing cases of RUN.")
    @click.option(
        "--profile",
        "profile",
        default=None,
        metavar="NAME",
        help="Replay profile to run (see `ragtriage profiles`), as `replay --profile`; "
        "default: the settings file as it is.",
    )
    @click.option("--json", "as_json", is_flag=True)
    @workspace_options
    def run_command(
        dataset: str,
        name: str | None,
        workers: int,
        batch_size: int,
        resume: str | None,
        profile: str | None,
        as_json: bool,
        home: Path | None,
        config_file: Path | None,
    ) -> None:
        """Replay every case of the eval set through the pipeline and store the run."""
        from ragtriage.eval.runner import run_eval

        with open_workspace(home, config_file) as workspace, progress_bar(not as_json) as bar:
            from ragtriage.pipeline.indexer import index_lag

            lag = index_lag(workspace)
            if lag is not None:
                click.echo(
                    f"note: {lag}; until then every case is scored on the old or empty indexes", err=True
                )
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
        if as_json:
            echo_json(summary)
        else:
            _print_summary(summary)
        if summary.status != "complete":
            click.echo(
                f"run {summary.run_id} is {summary.status}; finish it with "
                f"`ragtriage eval run --resume {summary.run_id}`",
                err=True,
            )
            click.get_current_context().exit(1)

    @group.command("runs")
    @click.option("--dataset", default=None)
    @click.option("--json", "as_json", is_flag=True)
    @workspace_options
    def runs_command(dataset: str | None, as_json: bool, home: Path | None, config_file: Path | None) -> None:
        """List stored runs, newest first."""
        from ragtriage.eval.run_view import list_run_items

        with open_workspace(home, config_file) as workspace:
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

    @group.command("compare")
    @click.argument("run_a")
    @click.argument("run_b")
    @click.option(
        "--metric", default=None, help="Metric that orders regressed cases [first of mrr, recall@5, ndcg@10]."
    )
    @click.option("--json", "as_json", is_flag=True)
    @workspace_options
    def compare_command(
        run_a: str, run_b: str, metric: str | None, as_json: bool, home: Path | None, config_file: Path | None
    ) -> None:
        """Compare RUN_B against RUN_A: deltas, win/tie/loss, significance, regressed cases."""
        from ragtriage.commands.eval_render import print_comparison
        from ragtriage.eval.compare import compare_runs

        with open_workspace(home, config_file) as workspace:
            try:
                comparison = compare_runs(workspace.engine, run_a, run_b, primary_metric=metric)
            except ValueError as error:
                raise click.BadParameter(str(error), param_hint="--metric") from None
        if as_json:
            echo_json(comparison)
            return
        print_comparison(comparison)

    @group.command("gate")
    @click.option("--run", "run_ref", required=True, metavar="RUN")
    @click.option("--baseline", default=None, metavar="RUN")
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
    @click.option("--json", "as_json", is_flag=True)
    @workspace_options
    def gate_command(
        run_ref: str,
        baseline: str | None,
        mins: tuple[str, ...],
        max_drops: tuple[str, ...],
        no_regress: str | None,
        metric: str | None,
        report_path: Path | None,
        as_json: bool,
        home: Path | None,
        config_file: Path | None,
    ) -> None:
        """Exit 1 when a rule fails (one reason per rule), 2 for a malformed rule, 0 when all pass."""
        from ragtriage.eval.gate import evaluate_gate

        with open_workspace(home, config_file) as workspace:
            result = evaluate_gate(
                workspace.engine,
                run_ref,
                baseline_ref=baseline,
                mins=mins,
                max_drops=max_drops,
                no_regress=no_regress,
                regress_metric=metric,
            )  # type: ignore[arg-type]
            if report_path is not None:
                from ragtriage.service.report import write_report

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

    @group.command("ablate")
    @click.option("--dataset", default=eval_store.DEFAULT_DATASET, show_default=True)
    @click.option(
        "--reference",
        type=click.Choice(["A", "C"]),
        default="A",
        show_default=True,
        help="The configuration deltas are computed against.",
    )
    @click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True)
    @click.option("--json", "as_json", is_flag=True)
    @workspace_options
    def ablate_command(
        dataset: str, reference: str, workers: int, as_json: bool, home: Path | None, config_file: Path | None
    ) -> None:
        """Run configurations A–F (raw BM25 … raw + rewritten + rerank) and print one table."""
        from ragtriage.commands.eval_render import print_ablation
        from ragtriage.eval.ablation import run_ablation

        with open_workspace(home, config_file) as workspace, progress_bar(not as_json) as bar:
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
