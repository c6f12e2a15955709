"""Rich tables for eval comparisons, ablations and the doctor (stdout; data only, no diagnostics)."""

from __future__ import annotations

from ragtriage.commands.common import stdout_console
from ragtriage.eval.ablation import ABLATION_METRICS, AblationTable
from ragtriage.eval.compare import Comparison
from ragtriage.eval.doctor import DoctorReport
from ragtriage.eval.held_out import HeldOut
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.text import hanging_text, plural

#: Metrics shown per bucket in the comparison (all metrics are in --json).
BUCKET_METRICS = ("recall@5", "mrr", "ndcg@10")


def _numbers(first: str, *headers: str) -> list[Col]:
    """A label column, then right-aligned number columns (never cut)."""
    return [Col(first, "label"), *(Col(h, "number", justify="right") for h in headers)]


def _signed(value: float) -> str:
    return f"{value:+.4f}"


def print_held_out(held: HeldOut, choice: str, detail: str | None = None) -> None:
    """The held-out figures of a tuning command's `choice` (one table), a `detail` line, then the warning."""
    console = stdout_console()
    table = FitTable(
        _numbers(held.metric, "baseline", "chosen", "gain"),
        title=f"{choice}: in sample and {held.folds}-fold held out on {plural(held.cases, 'case')}",
    )
    table.add_row("in sample", f"{held.baseline:.4f}", f"{held.in_sample:.4f}", _signed(held.in_sample_gain))
    table.add_row("held out", f"{held.baseline:.4f}", f"{held.held_out:.4f}", _signed(held.held_out_gain))
    console.print(table)
    console.print(
        hanging_text(
            console,
            f"held-out gain {_signed(held.held_out_gain)} ± {held.spread:.4f} over {held.folds} folds; "
            f"paired test p = {held.test.p_value:.4f}"
            + (" (significant)" if held.significant else " (not significant)"),
        )
    )
    if detail:
        console.print(hanging_text(console, detail))
    if held.warning:
        console.print(hanging_text(console, held.warning))


def print_comparison(comparison: Comparison) -> None:
    """Overall deltas, significance, per-bucket deltas and the regressed cases."""
    console = stdout_console()
    for warning in comparison.warnings:
        console.print(f"warning: {warning}")
    # One line per run: at 80 columns a shared line would wrap a hash away from its name.
    console.print(
        f"run {comparison.run_a}: profile {comparison.profile_a} (config {comparison.config_hash_a})"
    )
    console.print(
        f"run {comparison.run_b}: profile {comparison.profile_b} (config {comparison.config_hash_b})"
    )
    table = FitTable(
        _numbers("metric", f"run {comparison.run_a}", f"run {comparison.run_b}", "delta"),
        title=f"run {comparison.run_b} vs run {comparison.run_a} on "
        f"{plural(comparison.paired_cases, 'paired case')}",
    )
    for delta in comparison.overall:
        table.add_row(delta.metric, f"{delta.a:.4f}", f"{delta.b:.4f}", _signed(delta.delta))
    console.print(table)
    tests = FitTable(
        _numbers("metric", "wins", "ties", "losses", "mean delta", "p-value", "cases"),
        title="per case: win/tie/loss of B against A, paired randomization test",
    )
    for item in comparison.tests:
        outcome, test = item.outcome, item.test
        tests.add_row(
            item.metric,
            str(outcome.wins),
            str(outcome.ties),
            str(outcome.losses),
            _signed(test.mean_delta),
            f"{test.p_value:.4f}",
            str(test.n),
        )
    console.print(tests)
    halves = comparison.split_half
    if halves is not None:
        console.print(
            hanging_text(
                console,
                f"held out: {halves.metric} delta {_signed(halves.first)} and {_signed(halves.second)} on two "
                f"random halves of the paired cases ({'same sign' if halves.agree else 'signs differ'}), "
                f"p = {halves.test.p_value:.4f}",
            )
        )
        if halves.warning:
            console.print(hanging_text(console, halves.warning))
    if comparison.buckets:
        buckets = FitTable(_numbers("bucket", "cases", *BUCKET_METRICS), title="per bucket (delta B − A)")
        for bucket, deltas in comparison.buckets.items():
            by_metric = {d.metric: d.delta for d in deltas}
            buckets.add_row(
                bucket,
                str(comparison.bucket_cases.get(bucket, 0)),
                *(_signed(by_metric[m]) if m in by_metric else "-" for m in BUCKET_METRICS),
            )
        console.print(buckets)
    if comparison.regressed:
        regressed = FitTable(
            [
                Col("case", "id"),
                Col("confirmed", "label"),
                Col("request", "id"),
                *(Col(name, "number", justify="right") for name in ("A", "B", "delta")),
            ],
            title=f"{plural(len(comparison.regressed), 'case')} regressed on {comparison.primary_metric} "
            "(confirmed badcases first)",
        )
        for case in comparison.regressed:
            regressed.add_row(
                case.case_id,
                "yes" if case.confirmed else "",
                case.request_id or "",
                f"{case.a:.4f}",
                f"{case.b:.4f}",
                _signed(case.delta),
            )
        console.print(regressed)
    else:
        console.print(f"no case regressed on {comparison.primary_metric} ({comparison.improved} improved)")


def print_ablation(table: AblationTable) -> None:
    """One row per configuration with Recall@5/10/20 and MRR, and deltas against the reference."""
    console = stdout_console()
    metric_columns = []
    for metric in ABLATION_METRICS:
        metric_columns += [Col(metric, "number", justify="right"), Col("Δ", "number", justify="right")]
    view = FitTable(
        [
            Col("config", "label"),
            Col("routes", "text"),
            Col("run", "number", justify="right"),
            *metric_columns,
        ],
        title=f"ablation on {table.dataset}@{table.dataset_version} (deltas against {table.reference})",
    )
    for row in table.rows:
        cells = []
        for metric in ABLATION_METRICS:
            cells += [
                f"{row.metrics[metric]:.4f}",
                "" if row.config == table.reference else _signed(row.deltas.get(metric, 0.0)),
            ]
        view.add_row(row.config, row.description, str(row.run_id), *cells)
    console.print(view)
    for row in table.rows:
        for note in row.notes:
            console.print(f"{row.config}: {note}")


def print_doctor(report: DoctorReport) -> None:
    """Each finding with its cases, ids, proposals and the fix."""
    console = stdout_console()
    console.print(
        f"doctor: {report.dataset}@{report.dataset_version}, {plural(report.cases, 'case')}, KB {report.kb}"
    )
    if not report.findings:
        console.print(
            "no problems found (checked gold ids against the KB, document vs chunk ids, deleted and "
            "duplicate gold); if metrics still look wrong, compare runs with `ragtriage eval compare`"
        )
        return
    # Wrapped lines hang under their finding or case (at 80 columns an id list spans lines).
    for finding in report.findings:
        console.print()
        console.print(
            hanging_text(
                console,
                f"[{finding.severity}] {finding.kind}: {finding.summary}"
                + (f" ({plural(len(finding.case_ids), 'case')})" if finding.items else ""),
                indent=4,
            )
        )
        for item in finding.items[:20]:
            parts = [item.case_id]
            if item.gold_id:
                parts.append(f"gold {item.gold_id}")
            if item.note:
                parts.append(item.note)
            if item.proposal:
                overlap = f" (overlap {item.overlap:.2f})" if item.overlap is not None else ""
                parts.append(f"→ {item.proposal}{overlap}")
            console.print(hanging_text(console, "  " + "; ".join(parts), indent=4))
        if len(finding.items) > 20:
            console.print(f"  … and {len(finding.items) - 20} more (see --json)")
        if finding.ids:
            more = f" … and {len(finding.ids) - 20:,} more (see --json)" if len(finding.ids) > 20 else ""
            console.print(hanging_text(console, "  ids: " + " ".join(finding.ids[:20]) + more, indent=4))
        console.print(hanging_text(console, f"  fix: {finding.fix}", indent=4))
