"""The case screen at 80×24 and 160×45 after a replay: at least 8 candidate rows, the whole first
evidence line of the diagnosis, chunk and doc ids never broken in the preview, and `q` shown in the
footer; `q` quits from every screen except inside a text input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.containers import VerticalScroll
from textual.widgets import Footer, Input
from textual.widgets._footer import FooterKey

from ragtriage.tui.app import TriageApp
from ragtriage.tui.screens.case_screen import CaseScreen
from ragtriage.tui.screens.queue_screen import QueueScreen
from ragtriage.tui.widgets.chunk_preview import ChunkPreview
from ragtriage.tui.widgets.diagnosis_panel import DiagnosisPanel
from ragtriage.workspace import Workspace
from tests.tui.test_case_screen import _case_with_gold, _open, _settle

SIZES = [(80, 24), (160, 45)]


def _visible_text(widget: DiagnosisPanel | ChunkPreview, viewport: VerticalScroll) -> list[str]:
    """The widget's lines as drawn inside its scrolling parent (scrolled to the top)."""
    return [widget.render_line(y).text.rstrip() for y in range(viewport.scrollable_content_region.height)]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _footer_shows_quit(app: TriageApp) -> bool:
    keys = app.screen.query_one(Footer).query(FooterKey)
    return any(key.key == "q" and key.region.right <= app.size.width for key in keys)


async def _replayed_case(app: TriageApp, pilot: Any, workspace: Workspace) -> CaseScreen:
    screen = await _open(app, pilot, _case_with_gold(workspace))
    await pilot.press("r")
    await _settle(app, pilot)
    assert screen.case is not None and screen.case.diagnosis is not None
    return screen


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "160x45"])
async def test_case_screen_shows_8_candidates_the_first_evidence_line_and_whole_ids(
    workspace: Workspace, size: tuple[int, int]
) -> None:
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=size) as pilot:
        screen = await _replayed_case(app, pilot, workspace)
        assert screen.case is not None and screen.case.diagnosis is not None
        table = screen.candidate_table
        assert table.row_count >= 8
        assert table.scrollable_content_region.height - 1 >= 8, table.size  # rows under the header

        evidence = screen.case.diagnosis.suggestion.evidence[0]
        panel = screen.query_one(DiagnosisPanel)
        shown = _flat(" ".join(_visible_text(panel, screen.query_one("#diagnosis-scroll", VerticalScroll))))
        assert _flat(evidence) in shown, shown

        # The longest chunk id of the pool, highlighted: its id and its doc id each on one line.
        longest = max((c.chunk_id for c in screen.shown_trace.candidates), key=len)  # type: ignore[union-attr]
        while table.highlighted_chunk_id != longest:
            await pilot.press("j")
        await pilot.pause()
        chunk = screen.case.chunks[longest]
        preview = screen.query_one(ChunkPreview)
        lines = [preview.render_line(y).text for y in range(preview.size.height)]  # scrolled or not
        assert any(f"chunk {longest}" in line or line.strip() == longest for line in lines), lines
        assert any(f"doc {chunk.doc_id}" in line or line.strip() == chunk.doc_id for line in lines), lines
        assert _footer_shows_quit(app)


def _opens(key: str) -> Callable[[TriageApp, Any], Any]:
    async def press(app: TriageApp, pilot: Any) -> None:
        await pilot.press(key)
        await _settle(app, pilot)

    return press


@pytest.mark.parametrize("opener", ["queue", "case", "e", "m", "f1"])
async def test_q_quits_from_every_screen_and_is_in_the_footer(workspace: Workspace, opener: str) -> None:
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(app, pilot)
        if opener == "case":
            await _open(app, pilot, _case_with_gold(workspace))
        elif opener != "queue":
            await _opens(opener)(app, pilot)
        if opener != "f1":  # the help screen is a modal without a footer
            assert _footer_shows_quit(app), opener
        await pilot.press("q")
        await pilot.pause()
        assert app.return_code == 0, opener


async def test_q_types_into_the_filter_input_and_does_not_quit(workspace: Workspace) -> None:
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, QueueScreen)
        await pilot.press("slash", "q")
        await pilot.pause()
        assert app.return_code is None
        assert screen.query_one("#queue-filter", Input).value == "q"
