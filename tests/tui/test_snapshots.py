"""Snapshots of the main screens at a fixed size (times in the fixture traffic are frozen)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ragtriage.tui.app import TriageApp
from ragtriage.workspace import Workspace
from tests.tui.conftest import SIZE


async def _queue(pilot: Any) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def _case(pilot: Any) -> None:
    await _queue(pilot)
    from ragtriage.logs.queue import list_queue

    # The newest flagged request whose record has gold (set from the answer key).
    engine = pilot.app.workspace.engine
    item = next(i for i in list_queue(engine, limit=50).items if i.suggested_label not in (None, "unknown"))
    pilot.app.screen.open_case(item.request_id)
    await _queue(pilot)
    await _queue(pilot)


async def _case_replayed(pilot: Any) -> None:
    await _case(pilot)
    await pilot.press("r")
    await _queue(pilot)
    await _queue(pilot)
    pilot.app.clear_notifications()  # the "replayed" toast would cover the diagnosis
    await pilot.pause()


async def _eval(pilot: Any) -> None:
    await _queue(pilot)
    await pilot.press("e")
    await _queue(pilot)


async def _help(pilot: Any) -> None:
    await _queue(pilot)
    await pilot.press("f1")
    await pilot.pause()


@pytest.mark.parametrize(
    "run_before",
    [_queue, _case, _eval, _help],
    ids=["queue", "case", "eval", "help"],
)
def test_screen_snapshot(workspace: Workspace, snap_compare: Callable[..., bool], run_before: Any) -> None:
    app = TriageApp(workspace, warm_up=False)
    assert snap_compare(app, run_before=run_before, terminal_size=SIZE)


@pytest.mark.parametrize("width", [80, 100, 160])
def test_queue_snapshot_at_width(workspace: Workspace, snap_compare: Callable[..., bool], width: int) -> None:
    """The queue's columns at 80 columns, a narrow and a wide terminal (query gets the spare width)."""
    app = TriageApp(workspace, warm_up=False)
    assert snap_compare(app, run_before=_queue, terminal_size=(width, SIZE[1]))


@pytest.mark.parametrize("size", [(80, 24), (160, 45)], ids=["80x24", "160x45"])
def test_case_snapshot_at_size(
    workspace: Workspace, snap_compare: Callable[..., bool], size: tuple[int, int]
) -> None:
    """The replayed case: at least 8 candidate rows and the whole first evidence line at 80×24; the
    preview beside the table at 160×45 with each id on its own line; `q Quit` first in the footer."""
    app = TriageApp(workspace, warm_up=False)
    assert snap_compare(app, run_before=_case_replayed, terminal_size=size)
