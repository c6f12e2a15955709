"""The health report (`ragtriage report --monitor`): the figures of `ragtriage monitor` as one
self-contained HTML file, a trend chart per figure and the tables with their definitions."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from markupsafe import Markup

from ragtriage import __version__
from ragtriage.service import charts
from ragtriage.service.report import template_environment, write_html
from ragtriage.triage.monitor import FIGURES, MonitorReport

__all__ = ["render_health", "write_health"]


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
