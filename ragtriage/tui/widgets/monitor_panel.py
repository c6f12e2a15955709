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

    def show(self, report: MonitorReport, stored_days: str | None = None) -> None:
        """Draw `report`; an empty window says on which days the stored requests are and what to try."""
        self.report = report
        width = max(40, min((self.size.width or 100) - 2, 120))
        if report.overall.requests == 0:
            if stored_days is None:
                hint = "the store holds no request yet: ingest logs with `ragtriage logs ingest FILE`"
            else:
                hint = (
                    f"the stored requests are from {stored_days}: "
                    "press t for a longer window (t cycles 7 days, 30 days, 1 day, all)"
                )
            self.update(Text(f"no stored request in this window; {hint}"))
            return
        self.update(monitor_renderable(report, width, color=True))
