"""Shows a `MonitorReport`: the figures table, n/a reasons and the plotext charts."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ragtriage.render.monitor_view import monitor_renderable
from ragtriage.triage.monitor import MonitorReport


class MonitorPanel(Static):
    """Renders the report it is given at its own width (charts included)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(Text("computing the monitor…", style="dim"), markup=False, id=id)
        self.report: MonitorReport | None = None

    def show(self, report: MonitorReport) -> None:
        """Draw `report`; an empty window says what to try."""
        self.report = report
        width = max(40, min((self.size.width or 100) - 2, 120))
        if report.overall.requests == 0:
            self.update(
                Text(
                    "no stored request in this window: press t for a longer window, "
                    "or ingest logs with `ragtriage logs ingest`"
                )
            )
            return
        self.update(monitor_renderable(report, width, color=True))
