"""The HTML reports, each one self-contained file with no network reference: a run's (optionally
run B against it), and the health report of `ragtriage report --monitor`.

It holds the metric table with the run's configuration and dataset version, per-bucket figures,
with a comparison the deltas, win/tie/loss and the paired randomization test, charts as inline SVG
(metric by bucket, per-case scatter A vs B, rank-shift histogram) and the worst cases with their
gold journey. Every value comes from the stored runs through `eval.run_view` and `eval.compare`,
the functions `eval show` and `eval compare` use; Jinja2 autoescaping escapes every logged or
document text. The health report holds the figures of `ragtriage monitor`: a trend chart per figure
and the tables with their definitions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from sqlalchemy.engine import Engine

from ragtriage import __version__
from ragtriage.errors import InputError
from ragtriage.eval.compare import DEFAULT_TEST_METRICS, Comparison, compare_runs
from ragtriage.eval.gate import GateResult
from ragtriage.eval.run_view import CaseResult, RunDetail, RunListItem, case_results, run_detail
from ragtriage.eval.specs import COVERAGE, headline_labels
from ragtriage.service import charts
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.eval_tables import EvalRunRow
from ragtriage.triage.monitor import FIGURES, MonitorReport
from ragtriage.wording import quoted

__all__ = ["render_health", "render_index", "render_report", "write_health", "write_report"]

#: Metrics in the main table (every metric is in the "all metrics" table below it).
HEADLINE_METRICS = ("recall@5", "recall@10", "mrr", "ndcg@10", "hit@1", "hit@5", "p@5", COVERAGE)
#: Metrics charted and tabled per bucket.
BUCKET_METRICS = ("recall@5", "mrr", "ndcg@10")
#: Worst cases shown with their gold journey.
WORST_CASES = 10
#: Significance level the verdict line uses.
ALPHA = 0.05

_ENV = Environment(
    loader=PackageLoader("ragtriage.service", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _number(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.4f}"


_ENV.filters["num"] = _number
_ENV.filters["signed"] = _signed


def template_environment() -> Environment:
    """The autoescaping Jinja2 environment of every service page and report."""
    return _ENV


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """`{"retrieval": {"bm25_k": 10}}` → `{"retrieval.bm25_k": "10"}` (lists shown inline)."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return flat


def _primary(detail: RunDetail, comparison: Comparison | None) -> str:
    if comparison is not None:
        return comparison.primary_metric
    means = (detail.aggregates or {}).get("means", {})
    return next((m for m in DEFAULT_TEST_METRICS if m in means), next(iter(means), "mrr"))


def _shifts(cases: Sequence[CaseResult]) -> tuple[list[int], int]:
    """Gold rank shifts through rerank (places gained) and how many gold chunks rerank dropped."""
    moved = [int(s["shift"]) for c in cases for s in c.rank_shift if s.get("shift") is not None]
    dropped = sum(
        1 for c in cases for s in c.rank_shift if s.get("before") is not None and s.get("after") is None
    )
    return moved, dropped


def _run_facts(detail: RunDetail) -> dict[str, Any]:
    manifest = detail.index_manifest or {}
    return {
        "id": detail.run_id,
        "label": f"run {detail.run_id}" + (f" ({detail.name})" if detail.name else ""),
        "detail": detail,
        "dataset": f"{detail.dataset}@{detail.dataset_version}",
        "embedder": " ".join(str(manifest[k]) for k in ("embedder", "dim") if manifest.get(k) is not None)
        or "–",
        "started": detail.started_at.strftime("%Y-%m-%d %H:%M UTC") if detail.started_at else "–",
        "no_gold": (detail.aggregates or {}).get("no_gold", {}),
        "rank_shift": (detail.aggregates or {}).get("rank_shift", {}),
    }


def _worst(
    engine: Engine,
    primary: str,
    runs: Sequence[EvalRunRow],
    cases_a: Sequence[CaseResult],
    comparison: Comparison | None,
) -> list[dict[str, Any]]:
    """The cases to show in full, read again with candidates and gold journey: the most regressed
    (with a comparison) or the lowest on the primary metric. `runs` is (A,) or (A, B)."""
    if comparison is not None:
        ids = [d.case_id for d in comparison.regressed[:WORST_CASES]]
    else:
        ranked = sorted(
            (c for c in cases_a if c.has_gold), key=lambda c: (c.metrics.get(primary, 0.0), c.case_id)
        )
        ids = [c.case_id for c in ranked[:WORST_CASES] if c.metrics.get(primary, 0.0) < 1.0]
    if not ids:
        return []
    by_run = [{c.case_id: c for c in case_results(engine, run, case_ids=ids)} for run in runs]
    worst = []
    for case_id in ids:
        a = by_run[0].get(case_id)
        b = by_run[1].get(case_id) if len(by_run) > 1 else None
        shown = b or a
        if shown is not None:
            worst.append({"case": shown, "a": a, "b": b, "routes": _route_names(a, b)})
    return worst


def _route_names(*cases: CaseResult | None) -> list[str]:
    return sorted(
        {name for case in cases if case is not None for g in case.gold_journey for name in g.routes}
    )


def _bucket_rows(
    detail: RunDetail, comparison: Comparison | None
) -> tuple[list[str], dict[str, dict[str, float]], dict[str, dict[str, float]] | None, dict[str, int]]:
    if comparison is None:
        buckets = detail.bucket_aggregates or {}
        values = {name: dict(agg.get("means", {})) for name, agg in buckets.items()}
        return list(buckets), values, None, {name: int(agg.get("cases", 0)) for name, agg in buckets.items()}
    values_a = {name: {d.metric: d.a for d in deltas} for name, deltas in comparison.buckets.items()}
    values_b = {name: {d.metric: d.b for d in deltas} for name, deltas in comparison.buckets.items()}
    return list(comparison.buckets), values_a, values_b, dict(comparison.bucket_cases)


def build_context(engine: Engine, run_ref: str | int, compare: str | int | None = None) -> dict[str, Any]:
    """Everything the report template shows, from the stored runs.

    Raises:
        NotFoundError: an unknown run. InputError: a `compare` run of another eval set.
    """
    detail_a = run_detail(engine, run_ref, limit=1)
    runs = [eval_store.get_run(engine, detail_a.run_id)]
    cases_a = case_results(engine, runs[0], detail=False)
    detail_b = cases_b = comparison = None
    if compare is not None:
        detail_b = run_detail(engine, compare, limit=1)
        if detail_b.dataset != detail_a.dataset:
            raise InputError(
                f"--compare {compare}: run {detail_b.run_id} evaluated eval set {quoted(detail_b.dataset)} but run "
                f"{detail_a.run_id} evaluated {quoted(detail_a.dataset)}; compare two runs of the same eval set"
            )
        runs.append(eval_store.get_run(engine, detail_b.run_id))
        cases_b = case_results(engine, runs[1], detail=False)
        comparison = compare_runs(engine, detail_a.run_id, detail_b.run_id)
    primary = _primary(detail_a, comparison)
    facts_a = _run_facts(detail_a)
    facts_b = _run_facts(detail_b) if detail_b is not None else None
    bucket_names, values_a, values_b, bucket_cases = _bucket_rows(detail_a, comparison)
    bucket_metrics = [m for m in BUCKET_METRICS if any(m in v for v in values_a.values())]
    label_a, label_b = facts_a["label"], facts_b["label"] if facts_b else ""
    figures: dict[str, Markup] = {}
    if bucket_names and bucket_metrics:
        figures["buckets"] = Markup(
            charts.bucket_chart(
                bucket_names, bucket_metrics, values_a, values_b, label_a=label_a, label_b=label_b
            )
        )
    if comparison is not None and cases_b is not None:
        b_by_id = {c.case_id: c for c in cases_b}
        points = [
            (c.case_id, c.metrics.get(primary, 0.0), b_by_id[c.case_id].metrics.get(primary, 0.0))
            for c in cases_a
            if c.has_gold and c.case_id in b_by_id and b_by_id[c.case_id].has_gold
        ]
        figures["scatter"] = Markup(charts.scatter_chart(points, primary, label_a=label_a, label_b=label_b))
    series = {label_a: _shifts(cases_a)}
    if cases_b is not None:
        series[label_b] = _shifts(cases_b)
    if any(shifts or dropped for shifts, dropped in series.values()):
        figures["rank_shift"] = Markup(charts.rank_shift_chart(series))
    means_a = (detail_a.aggregates or {}).get("means", {})
    config_a = _flatten(detail_a.config)
    config_b = _flatten(detail_b.config) if detail_b is not None else {}
    config_keys = sorted(set(config_a) | set(config_b))
    return {
        "title": f"ragtriage report: {label_a}" + (f" vs {label_b}" if facts_b else ""),
        "a": facts_a,
        "b": facts_b,
        "comparison": comparison,
        "primary": primary,
        "alpha": ALPHA,
        "means_a": means_a,
        "headline": headline_labels(
            HEADLINE_METRICS,
            [*means_a, *(delta.metric for delta in comparison.overall)]
            if comparison is not None
            else means_a,
        ),
        "bucket_names": bucket_names,
        "bucket_metrics": bucket_metrics,
        "bucket_values_a": values_a,
        "bucket_values_b": values_b,
        "bucket_cases": bucket_cases,
        "figures": figures,
        "config_keys": config_keys,
        "config_a": config_a,
        "config_b": config_b,
        "config_changed": [
            k for k in config_keys if detail_b is not None and config_a.get(k) != config_b.get(k)
        ],
        "worst": _worst(engine, primary, runs, cases_a, comparison),
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
    }


def render_report(
    engine: Engine, run_ref: str | int, *, compare: str | int | None = None, gate: GateResult | None = None
) -> str:
    """The report as one HTML document (inline CSS and SVG, no scripts, no external references);
    with `gate`, the gate's verdict and checks come first."""
    context = build_context(engine, run_ref, compare)
    return _ENV.get_template("report.html.j2").render(**context, gate=gate)


def write_report(
    engine: Engine,
    run_ref: str | int,
    out: Path,
    *,
    compare: str | int | None = None,
    gate: GateResult | None = None,
) -> Path:
    """Render the report and write it to `out` (UTF-8); returns the path written.

    Raises:
        InputError: `out` cannot be written (names the path and the reason).
    """
    return write_html(render_report(engine, run_ref, compare=compare, gate=gate), out)


def write_html(html: str, out: Path) -> Path:
    """Write a rendered report to `out` (UTF-8, folders made); returns the path written.

    Raises:
        InputError: `out` cannot be written (names the path and the reason).
    """
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html, encoding="utf-8")
    except OSError as error:
        raise InputError(f"{out}: cannot write the report ({error.strerror or error})") from None
    return out


def render_index(runs: Sequence[RunListItem], *, kb: str) -> str:
    """The service's start page: the runs, each with its report and a comparison with the run before it."""
    previous: dict[int, int] = {}
    for index, run in enumerate(runs):
        older = next((r for r in runs[index + 1 :] if r.dataset == run.dataset), None)
        if older is not None:
            previous[run.run_id] = older.run_id
    return _ENV.get_template("index.html.j2").render(runs=runs, kb=kb, previous=previous, version=__version__)


def render_health(report: MonitorReport) -> str:
    """The monitor report as one HTML document (inline CSS and SVG, no scripts)."""
    keys = [group.key for group in report.groups]
    series = {
        name: [group.figures[name].value if name in group.figures else None for group in report.groups]
        for name in FIGURES
    }
    chart = None
    if keys and any(v is not None for values in series.values() for v in values):
        chart = Markup(charts.trend_chart(keys, series))
    return (
        template_environment()
        .get_template("health.html.j2")
        .render(
            report=report,
            figures=FIGURES,
            chart=chart,
            generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            version=__version__,
        )
    )


def write_health(report: MonitorReport, out: Path) -> Path:
    """Write the health report to `out`.

    Raises:
        InputError: `out` cannot be written.
    """
    return write_html(render_health(report), out)
