"""Report charts as inline SVG strings drawn with matplotlib's SVG backend (no pyplot, no network).

Text stays text (`svg.fonttype = none`), so the page's font stack renders it and Chinese bucket
names show with whatever CJK font the reader's system has; matplotlib's mathtext is off, so a `$`
in a bucket name is a dollar sign. matplotlib escapes text it writes into the SVG.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib
from matplotlib.figure import Figure

__all__ = ["bucket_chart", "rank_shift_chart", "scatter_chart"]

COLOR_A = "#8c96a8"
COLOR_B = "#2f6fdf"
COLOR_WIN, COLOR_LOSS, COLOR_TIE = "#2b9348", "#d62828", "#8c96a8"

#: Fonts tried in order for every glyph; the first two exist wherever matplotlib does or on Debian CI.
FONTS = ["DejaVu Sans", "WenQuanYi Micro Hei", "Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC"]

_RC: dict[str, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "ragtriage",  # stable element ids: the same run gives the same file
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.sans-serif": FONTS,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e3e6ea",
    "axes.axisbelow": True,
}
_PROLOGUE = re.compile(r"^.*?(?=<svg)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)


@contextmanager
def _style() -> Iterator[None]:
    """matplotlib settings for every chart, applied to this thread's drawing only."""
    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]  # stubs want literal keys
        yield


def _svg(figure: Figure, label: str) -> str:
    """The figure as an `<svg>` element (no XML prologue or RDF metadata), labelled for screen readers."""
    buffer = io.StringIO()
    with warnings.catch_warnings():
        # Glyphs DejaVu lacks (CJK) are measured approximately; the browser draws them with its fonts.
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        warnings.filterwarnings("ignore", message="findfont")
        # Constrained layout already fits the labels: no second "tight" drawing pass.
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = _METADATA.sub("", _PROLOGUE.sub("", buffer.getvalue(), count=1))
    return text.replace("<svg ", f'<svg class="chart" role="img" aria-label="{_attr(label)}" ', 1)


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def bucket_chart(
    buckets: Sequence[str],
    metrics: Sequence[str],
    values_a: Mapping[str, Mapping[str, float]],
    values_b: Mapping[str, Mapping[str, float]] | None = None,
    *,
    label_a: str = "A",
    label_b: str = "B",
) -> str:
    """Horizontal bars of each metric per bucket (run A, and run B beside it when given)."""
    with _style():
        height = 1.0 + 0.32 * len(buckets) * (2 if values_b is not None else 1)
        figure = _figure(2.6 * len(metrics) + 1.6, max(2.2, height))
        axes = figure.subplots(1, len(metrics), sharey=True, squeeze=False)[0]
        positions = list(range(len(buckets)))
        bar = 0.38 if values_b is not None else 0.6
        for ax, metric in zip(axes, metrics, strict=True):
            a = [values_a.get(b, {}).get(metric, 0.0) for b in buckets]
            if values_b is None:
                ax.barh(positions, a, height=bar, color=COLOR_B, label=label_a)
            else:
                b_values = [values_b.get(b, {}).get(metric, 0.0) for b in buckets]
                ax.barh([p - bar / 2 for p in positions], a, height=bar, color=COLOR_A, label=label_a)
                ax.barh([p + bar / 2 for p in positions], b_values, height=bar, color=COLOR_B, label=label_b)
            ax.set_xlim(0, 1)
            ax.set_title(metric)
            ax.invert_yaxis()
        axes[0].set_yticks(positions, list(buckets))
        if values_b is not None:
            figure.legend(
                *axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=2, frameon=False
            )
        return _svg(figure, "metric by bucket: " + ", ".join(metrics))


def scatter_chart(
    points: Sequence[tuple[str, float, float]], metric: str, *, label_a: str, label_b: str
) -> str:
    """Per-case scatter of run A (x) against run B (y) on `metric`; points above the diagonal are wins."""
    with _style():
        figure = _figure(4.4, 4.0)
        ax = figure.subplots()
        # Cases with the same pair of scores share one dot, sized and labelled by how many they are.
        counts: dict[tuple[float, float], int] = {}
        for _, a, b in points:
            counts[(round(a, 4), round(b, 4))] = counts.get((round(a, 4), round(b, 4)), 0) + 1
        xs, ys = [a for a, _ in counts], [b for _, b in counts]
        colors = [COLOR_WIN if b > a + 1e-9 else COLOR_LOSS if b < a - 1e-9 else COLOR_TIE for a, b in counts]
        ax.plot([0, 1], [0, 1], color="#b0b6bf", linewidth=1, linestyle="--")
        sizes = [24 + 36 * (n - 1) ** 0.5 for n in counts.values()]
        ax.scatter(xs, ys, c=colors, s=sizes, alpha=0.85, edgecolors="white", linewidths=0.5)
        for (a, b), n in counts.items():
            if n > 1:
                ax.annotate(f"×{n}", (a, b), textcoords="offset points", xytext=(6, -10), fontsize=8)
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel(f"{label_a}: {metric}")
        ax.set_ylabel(f"{label_b}: {metric}")
        ax.set_title(f"{metric} per case ({len(points)} cases)")
        return _svg(figure, f"per-case {metric}, run A against run B")


def rank_shift_chart(series: Mapping[str, tuple[Sequence[int], int]]) -> str:
    """Histogram of gold rank shifts by rerank (places gained; negative = pushed down), one series per
    run, plus a bar for gold the reranker dropped. `series` maps a label to (shifts, dropped count)."""
    with _style():
        figure = _figure(6.4, 3.0)
        ax = figure.subplots()
        every = [s for shifts, _ in series.values() for s in shifts]
        low, high = (min(every), max(every)) if every else (-1, 1)
        low, high = min(low, -1), max(high, 1)
        dropped_at = low - 2
        width = 0.8 / max(1, len(series))
        colors = [COLOR_A, COLOR_B] if len(series) > 1 else [COLOR_B]
        for index, (label, (shifts, dropped)) in enumerate(series.items()):
            counts = {value: 0 for value in range(low, high + 1)}
            for shift in shifts:
                counts[shift] += 1
            offset = (index - (len(series) - 1) / 2) * width
            ax.bar(
                [v + offset for v in counts],
                list(counts.values()),
                width=width,
                color=colors[index],
                label=label,
            )
            ax.bar(
                [dropped_at + offset],
                [dropped],
                width=width,
                color=colors[index],
                hatch="//",
                edgecolor="white",
            )
        ticks = sorted({dropped_at, low, 0, high, *range(low, high + 1, max(1, (high - low) // 8))})
        ax.set_xticks(ticks, ["dropped" if t == dropped_at else f"{t:+d}" if t else "0" for t in ticks])
        ax.set_xlabel("gold rank gained by rerank (places)")
        ax.set_ylabel("gold chunks")
        ax.set_title("rank shift of gold chunks through rerank")
        if len(series) > 1:
            ax.legend(frameon=False)
        return _svg(figure, "rank-shift histogram")


def trend_chart(keys: Sequence[str], series: Mapping[str, Sequence[float | None]]) -> str:
    """One small line chart per figure over the groups (days or pipeline versions); gaps where a
    group has no value."""
    with _style():
        names = list(series)
        columns = 2
        rows = max(1, (len(names) + columns - 1) // columns)
        figure = _figure(9.0, 1.9 * rows + 0.4)
        axes = figure.subplots(rows, columns, squeeze=False).ravel()
        positions = list(range(len(keys)))
        step = max(1, len(keys) // 6)
        for ax, name in zip(axes, names, strict=False):
            values = [float("nan") if v is None else v for v in series[name]]
            ax.plot(positions, values, marker="o", markersize=3, color=COLOR_B, linewidth=1.4)
            ax.set_title(name, fontsize=9)
            ax.set_xticks(positions[::step], [keys[i] for i in positions[::step]], fontsize=7)
        for ax in axes[len(names) :]:
            ax.set_visible(False)
        return _svg(figure, "retrieval health by group: " + ", ".join(names))
