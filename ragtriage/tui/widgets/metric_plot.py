"""A metric across runs as plain text bars (oldest run first), one line per run."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

BAR_WIDTH = 30


def plot_text(metric: str, points: Sequence[tuple[str, float | None]]) -> Text:
    """`run 3  ███████░░░ 0.712` per point; the bar is the value on a 0–1 scale."""
    text = Text(f"{metric} across runs\n", style="bold")
    if not points:
        text.append("no runs yet: press n to start one", style="dim")
        return text
    for name, value in points:
        text.append(f"{name:>10} ")
        if value is None:
            text.append("(no value)\n", style="dim")
            continue
        filled = round(max(0.0, min(1.0, value)) * BAR_WIDTH)
        text.append("█" * filled, style="green")
        text.append("░" * (BAR_WIDTH - filled), style="dim")
        text.append(f" {value:.3f}\n")
    return text


class MetricPlot(Static):
    """Shows `plot_text`."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", markup=False, id=id)

    def show(self, metric: str, points: Sequence[tuple[str, float | None]]) -> None:
        """Plot `points` (label, value) for `metric`."""
        self.update(plot_text(metric, points))
