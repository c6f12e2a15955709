"""Case screen flow not covered elsewhere: find gold by searching the KB in a modal (G)."""

from __future__ import annotations

from textual.widgets import Input

from ragtriage.logs.queue import list_queue
from ragtriage.store.triage_repo import find_record
from ragtriage.tui.app import TriageApp
from ragtriage.tui.screens.case_screen import CaseScreen
from ragtriage.tui.screens.gold_search_modal import GoldSearchModal
from ragtriage.workspace import Workspace
from tests.tui.conftest import SIZE

#: fixtures/queries.jsonl q004: the answer is the 审批委托 section of approval/delegation.
DELEGATION_QUERY = "休假前怎么把审批交给同事处理"


async def _settle(app: TriageApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await app.workers.wait_for_complete()
    await pilot.pause()


async def _open(app: TriageApp, pilot, request_id: str) -> CaseScreen:  # type: ignore[no-untyped-def]
    await _settle(app, pilot)
    app.screen.open_case(request_id)  # type: ignore[attr-defined]
    await _settle(app, pilot)
    assert isinstance(app.screen, CaseScreen)
    return app.screen


def _request_with_query(workspace: Workspace, text: str) -> str:
    page = list_queue(workspace.engine, limit=200, text=text)
    assert page.items, f"the TUI test home has no flagged request for {text!r}"
    return page.items[0].request_id


async def test_search_modal_marks_the_chosen_chunk_as_gold(workspace: Workspace) -> None:
    request_id = _request_with_query(workspace, DELEGATION_QUERY)
    before = set(find_record(workspace.engine, request_id).gold_chunk_ids)  # type: ignore[union-attr]
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await _open(app, pilot, request_id)
        await pilot.press("G")
        await _settle(app, pilot)
        modal = app.screen
        assert isinstance(modal, GoldSearchModal)
        modal.query_one("#search-input", Input).value = ""
        modal.query_one("#search-input", Input).focus()
        await pilot.press(*"审批委托", "enter")
        await _settle(app, pilot)
        assert modal.results.row_count > 0
        first = str(modal.results.coordinate_to_cell_key((0, 0)).row_key.value)
        await pilot.press("enter")  # the results table has focus: choose the first hit
        await _settle(app, pilot)
        assert isinstance(app.screen, CaseScreen)
    after = set(find_record(workspace.engine, request_id).gold_chunk_ids)  # type: ignore[union-attr]
    assert after == before | {first}
    assert first.startswith("approval/delegation#")


async def test_escape_in_the_search_modal_changes_nothing(workspace: Workspace) -> None:
    request_id = _request_with_query(workspace, DELEGATION_QUERY)
    before = find_record(workspace.engine, request_id)
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await _open(app, pilot, request_id)
        await pilot.press("G")
        await _settle(app, pilot)
        await pilot.press("escape")
        await _settle(app, pilot)
        assert isinstance(app.screen, CaseScreen)
    after = find_record(workspace.engine, request_id)
    assert after is not None and before is not None and after.revision == before.revision
