"""`MonitorReport` for people: a table of every figure per group, the n/a reasons, and plotext charts.

The CLI prints these; the TUI monitor screen shows the same renderables. Charts come from plotext
(a plotting library made for the terminal); without colour (a pipe) each series has its own marker
so the lines stay apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ragtriage.store.monitor_sql import UNKNOWN_GROUP
from ragtriage.triage.monitor import FIGURES, Figure, MonitorGroup, MonitorReport

#: Column headers of the figures (at most 6 characters: nine columns fit 80 characters).
HEADERS = {
    "empty_result_rate": "empty",
    "rewrite_trigger_rate": "rewrt",
    "rewrite_gain": "rwgain",
    "rank_shift": "shift",
    "bad_feedback_share": "badfb",
    "coverage": "cov@{n}",
    "first_day_recall": "day1",
}
#: What each header stands for (printed under the table).
LEGEND = (
    "empty = empty-result rate · rewrt = rewrite trigger rate · rwgain = recall gain from rewriting · "
    "shift = mean rank shift before→after rerank (+ = up) · badfb = bad-feedback share · "
    "cov@N = candidate coverage@N of confirmed cases · day1 = first-day recall of new documents "
    "(definitions: ragtriage monitor --help)"
)
#: Width of one figure cell and of the requests cell.
CELL, REQUESTS_CELL = 6, 9
#: The rate figures drawn as lines over the groups, with the marker each series uses.
CHART_SERIES = {
    "empty_result_rate": "o",
    "rewrite_trigger_rate": "x",
    "bad_feedback_share": "*",
    "coverage": "+",
    "first_day_recall": "#",
}
NA = "n/a"


def shown_key(key: str, by: str) -> str:
    """A group key as printed: requests that logged no pipeline_version are `unversioned`, requests
    without a time `undated` (the SQL groups both under `UNKNOWN_GROUP`)."""
    if key != UNKNOWN_GROUP:
        return key
    return "unversioned" if by == "version" else "undated"


def format_figure(name: str, figure: Figure) -> str:
    """A figure as a table cell: `12.5%`, `+1.50` (rank shift), `+0.034` (gain), or `n/a`."""
    if figure.value is None:
        return NA
    if name == "rank_shift":
        return f"{figure.value:+.2f}"
    if name == "rewrite_gain":
        return f"{figure.value:+.3f}"
    return f"{100 * figure.value:.1f}%"


def table_width(report: MonitorReport) -> int:
    """Characters the table needs (one space between columns)."""
    # Terminal cells, not characters: a pipeline_version may hold CJK (two cells each).
    key_width = max(cell_len(shown_key(group.key, report.by)) for group in [*report.groups, report.overall])
    return max(key_width, len(report.by)) + REQUESTS_CELL + len(FIGURES) * CELL + len(FIGURES) + 1


def shown_groups(report: MonitorReport) -> list[MonitorGroup]:
    """The groups worth a row: a day with no request and no figure (every one n/a) is left out, so
    a long window shows its traffic, not weeks of n/a; the n/a reasons still name those days."""
    return [
        group
        for group in report.groups
        if group.requests or any(figure.value is not None for figure in group.figures.values())
    ]


def monitor_table(report: MonitorReport) -> Table:
    """One row per group plus `all`: requests and every figure (see `table_width`)."""
    table = Table(box=None, padding=(0, 1, 0, 0), show_edge=False, pad_edge=False)
    table.add_column(report.by, no_wrap=True)
    table.add_column("requests", justify="right", no_wrap=True, min_width=REQUESTS_CELL)
    for name in FIGURES:
        table.add_column(
            HEADERS[name].format(n=report.coverage_n), justify="right", no_wrap=True, min_width=CELL
        )
    for group in [*shown_groups(report), report.overall]:
        table.add_row(
            Text(shown_key(group.key, report.by), style="bold" if group.key == "all" else ""),
            f"{group.requests:,}",
            *(format_figure(name, group.figures[name]) for name in FIGURES),
        )
    return table


def monitor_blocks(report: MonitorReport) -> Text:
    """The narrow layout: one block per group, one figure per line (long group names, narrow terminals)."""
    text = Text()
    for group in [*shown_groups(report), report.overall]:
        text.append(shown_key(group.key, report.by), style="bold")
        text.append(f"  {group.requests:,} requests\n")
        for name in FIGURES:
            figure = group.figures[name]
            value = format_figure(name, figure)
            if figure.value is None and figure.reason:
                value = f"n/a ({figure.reason})"
            text.append(f"  {name.replace('coverage', f'coverage@{report.coverage_n}')}: {value}\n")
    return text


def na_reasons(report: MonitorReport) -> list[str]:
    """`figure: reason (groups)` for every n/a, one line per distinct reason."""
    seen: dict[tuple[str, str], list[str]] = {}
    for group in [*report.groups, report.overall]:
        for name in FIGURES:
            figure = group.figures[name]
            if figure.value is None and figure.reason:
                seen.setdefault((name, figure.reason), []).append(group.key)
    # One line per reason: "no stored request" is said once for all figures of empty groups.
    merged: dict[str, tuple[list[str], list[str]]] = {}
    for (name, reason), keys in seen.items():
        names = merged.setdefault(reason, ([], keys))[0]
        names.append(HEADERS[name].format(n=report.coverage_n))
    lines = []
    for reason, (names, keys) in merged.items():
        where = "all groups" if len(keys) == len(report.groups) + 1 else _ranges(keys, report.by)
        lines.append(f"{', '.join(names)} n/a: {reason} ({where})")
    return lines


def _ranges(keys: list[str], by: str) -> str:
    """`2026-11-01, 2026-11-06 … 2026-12-01`: consecutive days as one range."""
    try:
        days = [date.fromisoformat(key) for key in keys if key != "all"]
    except ValueError:
        return ", ".join(shown_key(key, by) for key in keys)
    spans: list[list[date]] = []
    for day in days:
        if spans and day - spans[-1][1] == timedelta(days=1):
            spans[-1][1] = day
        else:
            spans.append([day, day])
    text = [a.isoformat() if a == b else f"{a.isoformat()} … {b.isoformat()}" for a, b in spans]
    return ", ".join([*text, *(["all"] if "all" in keys else [])])


def label_lines(group: MonitorGroup) -> Iterator[str]:
    """`label  share (count of total)` of the bad-feedback requests per confirmed label."""
    for label, figure in sorted(group.bad_feedback_by_label.items(), key=lambda item: -(item[1].value or 0)):
        yield f"  {label}: {format_figure('bad_feedback_share', figure)} ({figure.count} of {figure.total})"
    rest = group.bad_feedback_not_labelled
    if rest is not None and rest.count:
        share = format_figure("bad_feedback_share", rest)
        yield f"  not labelled (no confirmed label yet): {share} ({rest.count} of {rest.total})"


def monitor_charts(report: MonitorReport, width: int, *, color: bool) -> str:
    """Plotext charts as text: the rates per group (lines) and bad feedback per label (bars)."""
    import plotext as plt  # ~0.1 s: only charts pay for it, not every command's --help

    parts: list[str] = []
    keys = [group.key for group in report.groups]
    plotted = False
    plt.clear_figure()
    plt.plotsize(width, 16)
    plt.theme("pro" if color else "clear")
    for name, marker in CHART_SERIES.items():
        points = [
            (index, 100 * group.figures[name].value)  # type: ignore[operator]
            for index, group in enumerate(report.groups, start=1)
            if group.figures[name].value is not None
        ]
        if points:
            plotted = True
            plt.plot(
                [x for x, _ in points],
                [y for _, y in points],
                label=HEADERS[name].format(n=report.coverage_n),
                marker=marker,
            )
    if plotted and len(keys) > 0:
        step = max(1, len(keys) // 8)
        ticks = list(range(1, len(keys) + 1, step))
        plt.xticks(ticks, [_short(keys[t - 1], report.by) for t in ticks])
        plt.title(f"rates per {report.by} (%)")
        parts.append(plt.build())
    labels = dict(report.overall.bad_feedback_by_label)
    rest = report.overall.bad_feedback_not_labelled
    if labels and rest is not None and rest.count:
        labels["not labelled"] = rest
    if labels:
        plt.clear_figure()
        plt.plotsize(width, max(6, 2 * len(labels) + 4))
        plt.theme("pro" if color else "clear")
        names = sorted(labels, key=lambda label: labels[label].value or 0)
        plt.bar(names, [100 * (labels[n].value or 0) for n in names], orientation="horizontal", width=0.4)
        plt.title("share of bad-feedback requests per confirmed label (%)")
        parts.append(plt.build())
    text = "\n".join(parts)
    return text if color else plt.uncolorize(text)


def _short(key: str, by: str) -> str:
    # A day's month-day is enough on the axis; the table gives the full date.
    return key[5:] if len(key) == 10 and key[4] == "-" else shown_key(key, by)


def monitor_renderable(
    report: MonitorReport, width: int, *, color: bool, charts: bool = True
) -> RenderableType:
    """Table, n/a reasons, per-label shares and charts, as one Rich renderable."""
    if table_width(report) <= width:
        legend = LEGEND
        if any(group.key == UNKNOWN_GROUP for group in report.groups):
            missing = "pipeline_version" if report.by == "version" else "time"
            legend += f" · {shown_key(UNKNOWN_GROUP, report.by)} = requests that logged no {missing}"
        parts: list[RenderableType] = [monitor_table(report), Text(legend, style="dim")]
        reasons = na_reasons(report)
        if reasons:
            parts.append(Text("\n".join(reasons), style="dim"))
    else:
        parts = [monitor_blocks(report)]
    labels = list(label_lines(report.overall))
    if labels:
        parts.append(Text("bad feedback per confirmed label (all):\n" + "\n".join(labels)))
    if charts:
        chart = monitor_charts(report, width, color=color)
        if chart:
            parts.append(Text.from_ansi(chart) if color else Text(chart))
    return Group(*parts)
