"""Queue screen: rows and counts, filters, sort, paging, and letter keys while the filter input has focus."""

from __future__ import annotations

from ragtriage.logs.queue import list_queue
from ragtriage.tui.app import TriageApp
from ragtriage.tui.screens.queue_screen import QueueScreen
from ragtriage.workspace import Workspace
from tests.tui.conftest import MARKUP_QUERY, SIZE


async def _settle(app: TriageApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_queue_opens_first_with_every_flagged_request(workspace: Workspace) -> None:
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, QueueScreen)
        total = list_queue(workspace.engine, limit=0).total
        assert total > 0
        assert screen.queue_table.row_count == total
        assert screen.total == total
        assert sum(screen.counts.by_status.values()) == total


async def test_markup_in_a_logged_query_is_shown_literally(workspace: Workspace) -> None:
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        table = app.screen.queue_table  # type: ignore[attr-defined]
        cells = [table.get_row("fx-markup")[2]]
        assert cells[0].plain == MARKUP_QUERY
        assert cells[0].spans == []


async def test_free_text_filter_and_letters_typed_into_the_input(workspace: Workspace) -> None:
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, QueueScreen)
        await pilot.press("slash")
        # `s` and `o` are queue bindings: with the input focused they must type, not cycle filters.
        await pilot.press(*"link")
        assert screen.filter_input.value == "link"
        assert screen.status is None and screen.sort == "newest"
        await pilot.press("enter")
        await _settle(app, pilot)
        assert screen.text_filter == "link"
        assert screen.queue_table.row_count == 1
        assert screen.queue_table.highlighted_request_id == "fx-markup"
        await pilot.press("escape")
        await _settle(app, pilot)
        assert screen.text_filter is None
        assert screen.queue_table.row_count == screen.total > 1


async def test_status_filter_and_sort_keys(workspace: Workspace) -> None:
    from ragtriage.store.triage_repo import set_status

    set_status(workspace.engine, "fx-markup", "dismissed")
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, QueueScreen)
        await pilot.press("s")  # new
        await _settle(app, pilot)
        assert screen.status == "new"
        assert "fx-markup" not in [str(k.value) for k in screen.queue_table.rows]
        await pilot.press("s", "s", "s")  # in_progress, confirmed, dismissed
        await _settle(app, pilot)
        assert screen.status == "dismissed"
        assert [str(k.value) for k in screen.queue_table.rows] == ["fx-markup"]
        await pilot.press("escape", "o")  # clear filters, sort oldest first
        await _settle(app, pilot)
        assert screen.sort == "oldest"
        assert screen.queue_table.highlighted_request_id == "fx-markup"  # an hour before the others


async def test_paging_shows_the_true_total(workspace: Workspace, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from ragtriage.tui.screens import queue_screen

    monkeypatch.setattr(queue_screen, "PAGE_SIZE", 2)
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, QueueScreen)
        total = screen.total
        assert total > 2 and screen.queue_table.row_count == 2
        first_page = [str(k.value) for k in screen.queue_table.rows]
        await pilot.press("right_square_bracket")
        await _settle(app, pilot)
        assert screen.page_offset == 2
        second_page = [str(k.value) for k in screen.queue_table.rows]
        assert not set(first_page) & set(second_page)
        await pilot.press("left_square_bracket")
        await _settle(app, pilot)
        assert [str(k.value) for k in screen.queue_table.rows] == first_page
