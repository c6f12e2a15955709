"""The eval screen: runs, metrics and per-bucket tables, comparison of two runs, a metric across runs, new runs."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, ProgressBar, Static
from textual.worker import Worker, get_current_worker

from ragtriage.eval.compare import Comparison, compare_runs
from ragtriage.eval.runner import effective_status, run_eval
from ragtriage.store import eval_repo as eval_store
from ragtriage.tui.host import QUIT, host
from ragtriage.tui.messages import ComparisonReady, EvalFinished, EvalProgress, EvalRunsLoaded
from ragtriage.tui.screens.worker_failures import WorkerFailures
from ragtriage.tui.widgets.metric_plot import MetricPlot

SUMMARY_METRICS = ("recall@5", "mrr", "ndcg@10")
PLOT_METRICS = ("recall@5", "mrr", "ndcg@10", "hit@1", "hit@5")


def run_row(run: Any) -> dict[str, Any]:
    """Plain data of one run for the table (ORM rows never cross threads)."""
    return {
        "id": int(run.id or 0),
        "name": run.name or "",
        "dataset": f"{run.dataset}@{run.dataset_version}",
        "status": effective_status(run),
        "cases": f"{run.cases_done}/{run.case_count}",
        "config": run.config_hash,
        "aggregates": dict(run.aggregates or {}),
        "buckets": dict(run.bucket_aggregates or {}),
        "dataset_name": run.dataset,
    }


def comparison_text(comparison: Comparison) -> Table:
    """Deltas, win/tie/loss with p-values and the regressed cases of run B against run A."""
    table = Table(
        title=Text(
            f"run {comparison.run_b} vs run {comparison.run_a}: {comparison.paired_cases} paired cases"
        ),
        expand=True,
    )
    for column in ("metric", "A", "B", "Δ", "win/tie/loss", "p"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    tests = {t.metric: t for t in comparison.tests}
    for delta in comparison.overall:
        test = tests.get(delta.metric)
        wtl = f"{test.outcome.wins}/{test.outcome.ties}/{test.outcome.losses}" if test else ""
        table.add_row(
            delta.metric,
            f"{delta.a:.4f}",
            f"{delta.b:.4f}",
            f"{delta.delta:+.4f}",
            wtl,
            f"{test.test.p_value:.4f}" if test else "",
        )
    regressed = ", ".join(f"{c.case_id} ({c.delta:+.2f})" for c in comparison.regressed[:12]) or "none"
    table.caption = Text(
        f"regressed on {comparison.primary_metric}: {regressed}; improved {comparison.improved}"
    )
    return table


class EvalScreen(WorkerFailures, Screen[None]):
    """`space` marks run A, `c` compares it with the highlighted run, `n` starts a run, `m` changes the plot."""

    BINDINGS = [
        QUIT,
        Binding("escape", "cancel_or_back", "Back/cancel", id="eval-back-or-cancel", priority=True),
        Binding("space", "mark_run", "Mark A", id="mark-run"),
        Binding("c", "compare", "Compare", id="compare-runs"),
        Binding("n", "start_run", "New run", id="start-run"),
        Binding("m", "cycle_metric", "Plot metric", id="plot-metric"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[dict[str, Any]] = []
        self.marked: int | None = None
        self.metric = PLOT_METRICS[0]
        self.eval_worker: Worker[None] | None = None

    SUB_TITLE = "eval runs"

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield DataTable(id="runs-table", cursor_type="row")
        yield ProgressBar(id="eval-progress", show_eta=False)
        with Horizontal(id="eval-details"):
            yield DataTable(id="metrics-table", cursor_type="none")
            yield DataTable(id="buckets-table", cursor_type="none")
            yield MetricPlot(id="metric-plot")
        with VerticalScroll(id="compare-scroll"):
            yield Static(
                "mark a run with space, highlight another, press c to compare",
                markup=False,
                id="compare-panel",
            )
        yield Footer()

    @property
    def runs_table(self) -> DataTable[Text]:
        return self.query_one("#runs-table", DataTable)

    def on_mount(self) -> None:
        self.query_one("#eval-progress").display = False
        self.runs_table.add_columns(
            "", "run", "name", "dataset", "status", "cases", "config", *SUMMARY_METRICS[:3]
        )
        self.query_one("#metrics-table", DataTable).add_columns("metric", "value")
        self.query_one("#buckets-table", DataTable).add_columns("bucket", "cases", "recall@5", "mrr")
        self.runs_table.focus()
        self.load_runs()

    @work(thread=True, exclusive=True, exit_on_error=False, group="eval-loads")
    def load_runs(self) -> None:
        """Read the runs list in a thread."""
        rows = [run_row(run) for run in eval_store.list_runs(host(self.app).workspace.engine)]
        self.post_message(EvalRunsLoaded(rows))

    @on(EvalRunsLoaded)
    def _show_runs(self, message: EvalRunsLoaded) -> None:
        self.runs = message.runs
        table = self.runs_table
        table.clear()
        for run in self.runs:
            means = run["aggregates"].get("means", {})
            table.add_row(
                Text("A" if run["id"] == self.marked else ""),
                Text(str(run["id"])),
                Text(run["name"]),
                Text(run["dataset"]),
                Text(run["status"]),
                Text(run["cases"]),
                Text(run["config"]),
                *(Text(f"{means[m]:.4f}" if m in means else "—") for m in SUMMARY_METRICS[:3]),
                key=str(run["id"]),
            )
        self._show_plot()
        self._show_details(self.highlighted_run())

    def highlighted_run(self) -> dict[str, Any] | None:
        """The run under the cursor."""
        if not self.runs_table.row_count:
            return None
        key, _ = self.runs_table.coordinate_to_cell_key(self.runs_table.cursor_coordinate)
        return next((r for r in self.runs if str(r["id"]) == key.value), None)

    @on(DataTable.RowHighlighted, "#runs-table")
    def _run_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_details(self.highlighted_run())

    def _show_details(self, run: dict[str, Any] | None) -> None:
        metrics = self.query_one("#metrics-table", DataTable)
        buckets = self.query_one("#buckets-table", DataTable)
        metrics.clear()
        buckets.clear()
        if run is None:
            return
        for name, value in run["aggregates"].get("means", {}).items():
            metrics.add_row(Text(name), Text(f"{value:.4f}"))
        for bucket, aggregate in run["buckets"].items():
            means = aggregate.get("means", {})
            buckets.add_row(
                Text(bucket),
                Text(str(aggregate.get("cases", 0))),
                *(Text(f"{means[m]:.3f}" if m in means else "—") for m in ("recall@5", "mrr")),
            )

    def _show_plot(self) -> None:
        points = [
            (f"run {r['id']}", r["aggregates"].get("means", {}).get(self.metric)) for r in reversed(self.runs)
        ]
        self.query_one(MetricPlot).show(self.metric, points)

    def action_cycle_metric(self) -> None:
        self.metric = PLOT_METRICS[(PLOT_METRICS.index(self.metric) + 1) % len(PLOT_METRICS)]
        self._show_plot()

    def action_mark_run(self) -> None:
        run = self.highlighted_run()
        if run is not None:
            self.marked = run["id"]
            self.post_message(EvalRunsLoaded(self.runs))

    def action_compare(self) -> None:
        run = self.highlighted_run()
        if self.marked is None or run is None or run["id"] == self.marked:
            self.notify("mark run A with space, then highlight another run", severity="warning")
            return
        self.compare(self.marked, run["id"])

    @work(thread=True, exclusive=True, exit_on_error=False, group="comparisons")
    def compare(self, run_a: int, run_b: int) -> None:
        """Compare in a thread (the randomization test takes a moment)."""
        self.post_message(ComparisonReady(compare_runs(host(self.app).workspace.engine, run_a, run_b)))

    @on(ComparisonReady)
    def _show_comparison(self, message: ComparisonReady) -> None:
        self.query_one("#compare-panel", Static).update(comparison_text(message.comparison))

    def action_start_run(self) -> None:
        if self.eval_worker is not None and not self.eval_worker.is_finished:
            return
        run = self.highlighted_run()
        dataset = run["dataset_name"] if run is not None else eval_store.DEFAULT_DATASET
        progress = self.query_one("#eval-progress", ProgressBar)
        progress.update(total=None, progress=0)
        progress.display = True
        self.eval_worker = self.start_run(dataset)

    @work(thread=True, exclusive=True, exit_on_error=False, group="evals")
    def start_run(self, dataset: str) -> None:
        """Run the eval set in a thread; escape stops it (the run stays `incomplete`, resumable)."""
        worker = get_current_worker()
        app = host(self.app)
        app.pipeline_ready.wait()
        summary = run_eval(
            app.workspace,
            dataset,
            name="tui",
            on_progress=self._post_progress,
            should_stop=lambda: worker.is_cancelled,
        )
        self.post_message(EvalFinished(summary.run_id, summary.status))

    def _post_progress(self, done: int, total: int) -> None:
        self.post_message(EvalProgress(done, total))

    @on(EvalProgress)
    def _show_progress(self, message: EvalProgress) -> None:
        self.query_one("#eval-progress", ProgressBar).update(total=message.total, progress=message.done)

    @on(EvalFinished)
    def _run_finished(self, message: EvalFinished) -> None:
        self.query_one("#eval-progress").display = False
        self.eval_worker = None
        self.notify(f"run {message.run_id}: {message.status}", markup=False)
        self.load_runs()

    def on_worker_failed(self, worker: Worker[object]) -> None:
        if worker.group == "evals":
            self.query_one("#eval-progress").display = False
            self.eval_worker = None

    def action_cancel_or_back(self) -> None:
        if self.eval_worker is not None and not self.eval_worker.is_finished:
            self.eval_worker.cancel()
            return
        self.app.pop_screen()
