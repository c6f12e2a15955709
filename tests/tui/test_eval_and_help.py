"""Eval screen (start a run, compare two runs), help screen with binding ids, keymap overrides, modals."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Static

from ragtriage.store import eval_repo as eval_store
from ragtriage.tui.app import TriageApp
from ragtriage.tui.screens.eval_screen import EvalScreen
from ragtriage.tui.screens.help_screen import HelpScreen
from ragtriage.tui.screens.note_modal import NoteModal
from ragtriage.workspace import Workspace
from ragtriage_demo.demo import ensure_eval_run, fixture_answer_keys
from tests.tui.conftest import QIDS, SIZE


async def _settle(app: App[None], pilot) -> None:  # type: ignore[no-untyped-def]
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_eval_screen_starts_a_run_and_compares_two(workspace: Workspace) -> None:
    keys = [key for key in fixture_answer_keys(workspace) if key.qid in QIDS]
    ensure_eval_run(workspace, eval_store.DEFAULT_DATASET, keys)
    app = TriageApp(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        await pilot.press("e")
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, EvalScreen)
        assert screen.runs_table.row_count == 1
        await pilot.press("n")
        await _settle(app, pilot)
        await _settle(app, pilot)
        assert screen.runs_table.row_count == 2
        assert [r["status"] for r in screen.runs] == ["complete", "complete"]
        await pilot.press("space", "down", "c")
        await _settle(app, pilot)
        compare_panel = screen.query_one("#compare-panel", Static)
        assert "paired cases" in str(compare_panel.content.title)  # type: ignore[union-attr]


async def test_help_lists_binding_ids_and_keymap_overrides_apply(workspace: Workspace) -> None:
    workspace.settings.keymap["open-eval"] = "ctrl+e"
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        ids = {row[2] for row in app.screen.rows}
        assert {"open-case", "filter-text", "help", "quit"} <= ids
        await pilot.press("escape")
        await pilot.press("e")
        await _settle(app, pilot)
        assert not isinstance(app.screen, EvalScreen)
        await pilot.press("ctrl+e")
        await _settle(app, pilot)
        assert isinstance(app.screen, EvalScreen)


class _Harness(App[None]):
    """Pushes one modal and records what it dismissed with."""

    def __init__(self) -> None:
        super().__init__()
        self.results: list[str | None] = []

    def compose(self) -> ComposeResult:
        yield Static("harness")

    def on_mount(self) -> None:
        self.push_screen(NoteModal(), self.results.append)


async def test_note_modal_returns_text_on_enter_and_none_on_escape() -> None:
    app = _Harness()
    async with app.run_test() as pilot:
        await pilot.press(*"hello", "enter")
        assert app.results == ["hello"]
        app.push_screen(NoteModal(), app.results.append)
        await pilot.pause()
        await pilot.press(*"abc", "escape")
        assert app.results == ["hello", None]
        app.push_screen(NoteModal(), app.results.append)
        await pilot.pause()
        await pilot.press("space", "enter")
        assert app.results == ["hello", None, None]
