"""Case screen flows: open, label with number keys, gold, note, confirm, dismiss, promote, replay, conflicts."""

from __future__ import annotations

from textual.message import Message

from ragtriage.logs.queue import list_queue
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.triage_repo import find_record, set_status
from ragtriage.tui.app import TriageApp
from ragtriage.tui.messages import RecordConflict, ReplayFinished
from ragtriage.tui.screens.case_screen import CaseScreen
from ragtriage.tui.screens.note_modal import NoteModal
from ragtriage.workspace import Workspace
from tests.tui.conftest import SIZE


async def _settle(app: TriageApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until no worker runs and no key press waits for a save (a burst chains workers)."""
    for _ in range(100):
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        waiting = isinstance(screen, CaseScreen) and (screen._save_in_flight or screen._waiting_actions)
        if not waiting and not any(w.is_running for w in app.workers):
            return


def _case_with_gold(workspace: Workspace) -> str:
    for item in list_queue(workspace.engine, limit=50).items:
        record = find_record(workspace.engine, item.request_id)
        if record is not None and record.gold_chunk_ids:
            return item.request_id
    raise AssertionError("the test home has no flagged request with gold")


async def _open(app: TriageApp, pilot, request_id: str) -> CaseScreen:  # type: ignore[no-untyped-def]
    await _settle(app, pilot)
    app.screen.open_case(request_id)  # type: ignore[attr-defined]
    await _settle(app, pilot)
    screen = app.screen
    assert isinstance(screen, CaseScreen)
    # On a loaded machine the load worker may start after the first settle: wait for its message.
    for _ in range(50):
        if screen.case is not None and screen.candidate_table.row_count:
            break
        await _settle(app, pilot)
    return screen


async def test_enter_opens_the_highlighted_case_and_escape_goes_back(workspace: Workspace) -> None:
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        expected = app.screen.queue_table.highlighted_request_id  # type: ignore[attr-defined]
        await pilot.press("enter")
        await _settle(app, pilot)
        assert isinstance(app.screen, CaseScreen)
        assert app.screen.request_id == expected
        assert app.screen.case is not None and app.screen.candidate_table.row_count > 0
        await pilot.press("escape")
        assert not isinstance(app.screen, CaseScreen)


async def test_number_keys_confirm_dismiss_and_note_are_saved(workspace: Workspace) -> None:
    request_id = _case_with_gold(workspace)
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, request_id)
        await pilot.press("4")  # alias_missing
        await _settle(app, pilot)
        record = find_record(workspace.engine, request_id)
        assert record is not None and record.primary_label == "alias_missing"
        assert screen.case is not None and screen.case.record is not None
        assert screen.case.record.revision == record.revision
        assert screen.has_class("-labelled")
        await pilot.press("c")
        await _settle(app, pilot)
        assert find_record(workspace.engine, request_id).status == "confirmed"  # type: ignore[union-attr]
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, NoteModal)
        await pilot.press(*"checked", "enter")
        await _settle(app, pilot)
        notes = find_record(workspace.engine, request_id).notes  # type: ignore[union-attr]
        assert [note.text for note in notes] == ["checked"]
        await pilot.press("x")
        await _settle(app, pilot)
        assert find_record(workspace.engine, request_id).status == "dismissed"  # type: ignore[union-attr]


async def test_g_toggles_the_highlighted_candidate_as_gold(workspace: Workspace) -> None:
    request_id = _case_with_gold(workspace)
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, request_id)
        chunk_id = screen.candidate_table.highlighted_chunk_id
        assert chunk_id is not None
        before = list(screen.case.gold)  # type: ignore[union-attr]
        await pilot.press("g")
        await _settle(app, pilot)
        after = find_record(workspace.engine, request_id).gold_chunk_ids  # type: ignore[union-attr]
        expected = [g for g in before if g != chunk_id] if chunk_id in before else [*before, chunk_id]
        assert after == expected


async def test_keys_pressed_during_a_save_apply_in_order_instead_of_conflicting(
    workspace: Workspace,
) -> None:
    """Label, gold on two rows, confirm and promote in one burst: every key applies, none conflicts."""
    request_id = _case_with_gold(workspace)
    seen: list[Message] = []
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        screen = await _open(app, pilot, request_id)
        table = screen.candidate_table
        first = table.highlighted_chunk_id
        gold_before = list(screen.case.gold)  # type: ignore[union-attr]
        # No settling between keys: each key lands while the previous save is still in flight.
        await pilot.press("5", "g", "j", "g", "c", "p")
        second = table.highlighted_chunk_id
        assert first is not None and second is not None and first != second
        await _settle(app, pilot)
        assert not [m for m in seen if isinstance(m, RecordConflict)]
        record = find_record(workspace.engine, request_id)
        assert record is not None and record.status == "confirmed"
        assert record.primary_label == "bm25_miss"
        expected = list(gold_before)
        for chunk_id in (first, second):
            expected = (
                [g for g in expected if g != chunk_id] if chunk_id in expected else [*expected, chunk_id]
            )
        assert record.gold_chunk_ids == expected
        cases = eval_store.dataset_cases(workspace.engine, eval_store.DEFAULT_DATASET)
        assert [c.provenance.get("request_id") for c in cases] == [request_id]


async def test_a_change_made_meanwhile_is_shown_and_never_overwritten(workspace: Workspace) -> None:
    request_id = _case_with_gold(workspace)
    seen: list[Message] = []
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        screen = await _open(app, pilot, request_id)
        shown_revision = screen.case.record.revision  # type: ignore[union-attr]
        set_status(workspace.engine, request_id, "in_progress", user="someone-else")
        await pilot.press("3")
        await _settle(app, pilot)
        record = find_record(workspace.engine, request_id)
        assert record is not None and record.primary_label is None and record.status == "in_progress"
        assert [m.request_id for m in seen if isinstance(m, RecordConflict)] == [request_id]
        # The case reloaded: the next key press saves on top of the other triager's change.
        assert screen.case.record.revision == shown_revision + 1  # type: ignore[union-attr]
        await pilot.press("3")
        await _settle(app, pilot)
        record = find_record(workspace.engine, request_id)
        assert (
            record is not None and record.primary_label == "rewrite_error" and record.status == "in_progress"
        )


async def test_replay_shows_the_replayed_trace_and_diagnosis(workspace: Workspace) -> None:
    request_id = _case_with_gold(workspace)
    seen: list[Message] = []
    app = TriageApp(workspace)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        screen = await _open(app, pilot, request_id)
        await pilot.press("r")
        await _settle(app, pilot)
        assert [m.request_id for m in seen if isinstance(m, ReplayFinished)] == [request_id]
        assert screen.source == "replayed"
        assert screen.case is not None and screen.case.diagnosis is not None
        assert screen.journey_strip.journey is not None and screen.journey_strip.journey.source == "replay"
        await pilot.press("t")
        assert screen.source == "logged"


async def test_confirmed_case_is_promoted_once_then_deduplicated(workspace: Workspace) -> None:
    request_id = _case_with_gold(workspace)
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await _open(app, pilot, request_id)
        await pilot.press("5", "c")
        await _settle(app, pilot)
        await pilot.press("p")
        await _settle(app, pilot)
        cases = eval_store.dataset_cases(workspace.engine, eval_store.DEFAULT_DATASET)
        assert [c.provenance.get("request_id") for c in cases] == [request_id]
        await pilot.press("p")
        await _settle(app, pilot)
        assert len(eval_store.dataset_cases(workspace.engine, eval_store.DEFAULT_DATASET)) == 1
        assert any("already an eval case" in str(n.message) for n in app._notifications)


async def test_a_narrow_terminal_puts_the_preview_under_the_table_so_chunk_ids_fit(
    workspace: Workspace,
) -> None:
    request_id = _case_with_gold(workspace)
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=(80, 30)) as pilot:
        screen = await _open(app, pilot, request_id)
        preview = screen.query_one("#preview-scroll")
        assert screen.has_class("-narrow")
        # Beside the table it got about a quarter of 80 columns; under it, the whole width.
        assert preview.region.width >= 70 and preview.region.y > screen.candidate_table.region.y
        await pilot.resize_terminal(160, 45)
        await pilot.pause()
        assert not screen.has_class("-narrow")
        # Beside the table: wide enough for a UUID after its label (ids start their own line).
        assert preview.region.x > screen.candidate_table.region.x and preview.region.width >= 46
