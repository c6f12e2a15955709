"""Monitor screen: reached with `m` from the queue, windows and grouping switch, figures shown."""

from __future__ import annotations

from datetime import timedelta

import pytest
from textual.app import App
from textual.widgets import Static

from ragtriage.tui.app import TriageApp
from ragtriage.tui.screens import monitor_screen
from ragtriage.tui.screens.monitor_screen import MonitorScreen
from ragtriage.tui.screens.queue_screen import QueueScreen
from ragtriage.workspace import Workspace
from ragtriage_demo.real import TRAFFIC_START
from tests.tui.conftest import SIZE


async def _settle(app: App[None], pilot) -> None:  # type: ignore[no-untyped-def]
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_monitor_screen_from_the_queue(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    # The fixture traffic is frozen on 2026-11-02: ten days later the 7-day window is empty.
    monkeypatch.setattr(monitor_screen, "utc_now", lambda: TRAFFIC_START + timedelta(days=10))
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        assert isinstance(app.screen, QueueScreen)
        await pilot.press("m")
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, MonitorScreen)
        assert screen.panel.report is not None and screen.panel.report.overall.requests == 0
        shown = str(screen.panel.content)
        assert "press t for a longer window" in shown
        assert f"the stored requests are from {TRAFFIC_START:%Y-%m-%d}" in shown
        await pilot.press("t")  # 30 days: the traffic is in
        await _settle(app, pilot)
        report = screen.panel.report
        assert report is not None and report.overall.requests > 0
        assert report.overall.figures["bad_feedback_share"].value is not None
        assert str(screen.query_one("#monitor-title", Static).content).startswith(
            "monitor: last 30 days by day"
        )
        await pilot.press("g")
        await _settle(app, pilot)
        assert screen.panel.report is not None and screen.panel.report.by == "version"
        await pilot.press("t")  # 1 day: the count reads in the singular
        await _settle(app, pilot)
        assert str(screen.query_one("#monitor-title", Static).content).startswith(
            "monitor: last 1 day by version"
        )
        await pilot.press("t")  # all: from the oldest stored request, whatever the clock says
        await _settle(app, pilot)
        report = screen.panel.report
        assert report is not None and report.overall.requests > 0
        assert str(screen.query_one("#monitor-title", Static).content).startswith(
            "monitor: all stored requests by version"
        )
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, QueueScreen)
