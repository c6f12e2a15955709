"""The queue table's column widths: from the content and the width, the same whether the page
arrives before or after the first resize; time as MM-DD HH:MM; the query takes the spare width and
the preview line shows it whole; the header names the screen."""

from __future__ import annotations

import re

import pytest
from rich.cells import cell_len
from textual.app import App, ComposeResult

from ragtriage.logs.queue import QueueItem, list_queue
from ragtriage.tui.app import TriageApp
from ragtriage.tui.screens.queue_screen import QueueScreen
from ragtriage.tui.widgets.queue_table import (
    CHROME,
    COLUMNS,
    QUERY,
    QUERY_MIN,
    QueueTable,
    plan_widths,
    queue_row,
)
from ragtriage.workspace import Workspace

HEIGHT = 36


async def _settle(app: App[None], pilot) -> None:  # type: ignore[no-untyped-def]
    await app.workers.wait_for_complete()
    await pilot.pause()


def _fits(table: QueueTable, width: int) -> None:
    shown = [w for w in table.layout_widths if w]
    used = sum(shown) + 2 * table.cell_padding * len(shown) + CHROME
    assert used <= width, (table.layout_widths, width)


@pytest.mark.parametrize("width", [100, 160])
async def test_queue_at_width_shows_whole_ids_times_and_the_query_in_the_spare_width(
    workspace: Workspace, width: int
) -> None:
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=(width, HEIGHT)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, QueueScreen)
        assert screen.sub_title == "queue"
        table = screen.queue_table
        _fits(table, width)
        items = table.items
        assert items
        for item in items:
            cells = table.get_row(item.request_id)
            assert cells[1].plain == item.request_id  # never cut
            assert re.fullmatch(r"\d\d-\d\d \d\d:\d\d", cells[0].plain)
            assert cells[4].plain == (item.suggested_label or "—")
        longest = max(cell_len(" ".join(i.raw_query.split())) for i in items)
        query_width = table.layout_widths[QUERY]
        assert query_width >= min(longest, QUERY_MIN)
        if width == 160:
            assert query_width >= longest  # the fixture queries fit whole at 160 columns
        # The spare width goes to the query: the table fills the screen unless every query is whole.
        used = sum(table.layout_widths) + 2 * table.cell_padding * len(COLUMNS) + CHROME
        assert used == width or query_width >= longest
        preview = str(screen.query_one("#queue-preview").render())
        highlighted = table.item(table.highlighted_request_id or "")
        assert highlighted is not None and highlighted.raw_query in preview
        await pilot.press("j")
        await pilot.pause()
        following = table.item(table.highlighted_request_id or "")
        assert following is not None and following.raw_query in str(
            screen.query_one("#queue-preview").render()
        )


async def test_the_header_names_the_case_screen(workspace: Workspace) -> None:
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=(120, HEIGHT)) as pilot:
        await _settle(app, pilot)
        request_id = app.screen.queue_table.highlighted_request_id  # type: ignore[attr-defined]
        await pilot.press("enter")
        await _settle(app, pilot)
        assert app.screen.sub_title == f"case {request_id}"
        assert "triage queue" not in app.screen.sub_title


async def test_widths_follow_a_resize_after_the_data(workspace: Workspace) -> None:
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=(100, HEIGHT)) as pilot:
        await _settle(app, pilot)
        table = app.screen.queue_table  # type: ignore[attr-defined]
        narrow = table.layout_widths
        await pilot.resize_terminal(160, HEIGHT)
        await pilot.pause()
        wide = table.layout_widths
        _fits(table, 160)
        assert wide[QUERY] > narrow[QUERY]
        expected = plan_widths([queue_row(i) for i in table.items], table.size.width, table.cell_padding)
        assert wide == expected.widths


class _Harness(App[None]):
    """A bare app with one queue table; `early` pages are shown before the first layout."""

    def __init__(self, early: list[QueueItem] | None) -> None:
        super().__init__()
        self.early = early

    def compose(self) -> ComposeResult:
        yield QueueTable(id="queue-table")

    def on_mount(self) -> None:
        if self.early is not None:
            self.query_one(QueueTable).show_page(self.early)


@pytest.mark.parametrize("width", [100, 160])
async def test_data_before_or_after_the_first_resize_gives_the_same_columns(
    workspace: Workspace, width: int
) -> None:
    items = list_queue(workspace.engine, limit=100).items
    before = _Harness(early=items)
    async with before.run_test(size=(width, HEIGHT)) as pilot:
        await pilot.pause()
        early_widths = before.query_one(QueueTable).layout_widths
    after = _Harness(early=None)
    async with after.run_test(size=(width, HEIGHT)) as pilot:
        await pilot.pause()
        table = after.query_one(QueueTable)
        table.show_page(items)
        await pilot.pause()
        late_widths = table.layout_widths
        _fits(table, width)
    assert early_widths == late_widths
    assert early_widths[0] == len("11-02 21:54")
