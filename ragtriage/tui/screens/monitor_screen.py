"""The monitor: retrieval health per day or pipeline_version (the same core as `ragtriage monitor`)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Static
from textual.worker import get_current_worker

from ragtriage.logs.requests import span_days, stored_request_span
from ragtriage.triage.monitor import MonitorReport, compute_monitor
from ragtriage.tui.host import QUIT, host
from ragtriage.tui.screens.worker_failures import WorkerFailures
from ragtriage.tui.widgets.monitor_panel import MonitorPanel
from ragtriage.wording import plural

#: Windows the `t` key cycles through (days back from now; None: every stored request).
WINDOWS_DAYS: tuple[int | None, ...] = (7, 30, 1, None)


def utc_now() -> datetime:
    """The monitor's clock (tests on frozen traffic replace it)."""
    return datetime.now(timezone.utc)


class MonitorLoaded(Message):
    """The monitor report was computed."""

    def __init__(self, report: MonitorReport, stored_days: str | None = None) -> None:
        super().__init__()
        self.report = report
        self.stored_days = stored_days
        """The days the stored requests span (None: none stored), for an empty window's hint."""


class MonitorScreen(WorkerFailures, Screen[None]):
    """Figures table and charts; `g` groups by day or version, `t` changes the window."""

    BINDINGS = [
        QUIT,
        Binding("escape", "app.pop_screen", "Back", id="close-monitor"),
        Binding(
            "g", "toggle_by", "Day/version", id="monitor-group-by", tooltip="Group by day or pipeline_version"
        ),
        Binding(
            "t",
            "cycle_window",
            "Window",
            id="monitor-window",
            tooltip="The last 7 days, 30 days, 1 day or every stored request",
        ),
        Binding("f5,ctrl+r", "reload", "Reload", id="reload-monitor"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.by = "day"
        self.window_days: int | None = WINDOWS_DAYS[0]

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static("", id="monitor-title", markup=False)
        with VerticalScroll(id="monitor-scroll"):
            yield MonitorPanel(id="monitor-panel")
        yield Footer()

    @property
    def panel(self) -> MonitorPanel:
        return self.query_one(MonitorPanel)

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        """Compute the report for the current grouping and window in a worker."""
        window = (
            "all stored requests" if self.window_days is None else f"last {plural(self.window_days, 'day')}"
        )
        self.query_one("#monitor-title", Static).update(
            f"monitor: {window} by {self.by} (definitions: ragtriage monitor --help)"
        )
        self.compute(self.by, self.window_days)

    @work(thread=True, exclusive=True, exit_on_error=False, group="monitor")
    def compute(self, by: str, window_days: int | None) -> None:
        """The headless core, off the UI thread."""
        workspace = host(self.app).workspace
        settings = workspace.settings
        now = utc_now()
        span = stored_request_span(workspace.engine)
        if window_days is not None:
            since = now - timedelta(days=window_days)
        else:
            since = span[0] if span is not None else now
        report = compute_monitor(
            workspace.engine,
            now=now,
            by=by,  # type: ignore[arg-type]
            since=since,
            bad_ratings=settings.logs.flagging.bad_ratings,
            coverage_n=settings.retrieval.candidate_pool,
            kb=settings.kb.name,
        )
        if not get_current_worker().is_cancelled:
            self.post_message(MonitorLoaded(report, None if span is None else span_days(span)))

    @on(MonitorLoaded)
    def _show(self, message: MonitorLoaded) -> None:
        self.panel.show(message.report, message.stored_days)

    def action_toggle_by(self) -> None:
        self.by = "version" if self.by == "day" else "day"
        self.reload()

    def action_cycle_window(self) -> None:
        index = WINDOWS_DAYS.index(self.window_days)
        self.window_days = WINDOWS_DAYS[(index + 1) % len(WINDOWS_DAYS)]
        self.reload()

    def action_reload(self) -> None:
        self.reload()
