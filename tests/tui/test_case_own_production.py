"""The case screen on a team's own production (`tests.sectioned_production`: UUID chunk ids, OTLP
traces from the real OpenTelemetry SDK with three retrievers, pipeline version 2.4.0 mapped to its
own profile): gold marked after a diagnosis, and the journey strip at 140 and 80 columns."""

from __future__ import annotations

import shutil
from pathlib import Path

from ragtriage.tui.app import TriageApp
from ragtriage.tui.screens.case_screen import CaseScreen
from ragtriage.tui.widgets.diagnosis_panel import DiagnosisPanel
from ragtriage.workspace import Workspace
from tests.conftest import RunCli
from tests.sectioned_production import HOLD_0, load_production, write_production
from tests.tui.test_case_screen import _open, _settle


def _panel_text(screen: CaseScreen) -> str:
    return str(screen.query_one(DiagnosisPanel).render())


async def test_marking_gold_after_a_diagnosis_says_the_diagnosis_is_out_of_date(
    tmp_path: Path, run_cli: RunCli
) -> None:
    request_id, _ = write_production(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(tmp_path / "config.toml", home / "config.toml")
    load_production(tmp_path, run_cli, ["--home", str(home)])
    workspace = Workspace.open(home)
    try:
        app = TriageApp(workspace, warm_up=False)
        async with app.run_test(size=(80, 30)) as pilot:
            screen = await _open(app, pilot, request_id)
            await pilot.press("r")
            await _settle(app, pilot)
            assert screen.case is not None and screen.case.diagnosis is not None
            assert "gold changed" not in _panel_text(screen)
            await pilot.press("t")  # the logged lists: production's title-vector route found HOLD_0
            screen.candidate_table.focus()
            while screen.candidate_table.highlighted_chunk_id != HOLD_0:
                await pilot.press("j")
            await pilot.press("g")
            await _settle(app, pilot)
            assert screen.case.gold == [HOLD_0]
            text = _panel_text(screen)
            assert text.startswith(
                "gold changed since this diagnosis (made with gold: none): press r to diagnose again"
            ), text
            await pilot.press("r")
            await _settle(app, pilot)
            assert screen.case.diagnosis.gold == [HOLD_0]
            assert "gold changed" not in _panel_text(screen)
    finally:
        workspace.close()


async def test_the_journey_strip_shows_each_rank_and_keeps_the_final_stage_on_an_80_column_screen(
    tmp_path: Path, run_cli: RunCli
) -> None:
    request_id, _ = write_production(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(tmp_path / "config.toml", home / "config.toml")
    load_production(
        tmp_path, run_cli, ["--home", str(home)], ["label", request_id, "rerank_error", "--gold", HOLD_0]
    )
    workspace = Workspace.open(home)
    try:
        app = TriageApp(workspace, warm_up=False)
        async with app.run_test(size=(140, 30)) as pilot:
            screen = await _open(app, pilot, request_id)

            def cells() -> list[tuple[str, int]]:
                return [
                    (str(cell.render()), cell.region.right)
                    for cell in screen.journey_strip.query(".journey-cell")
                ]

            # Three logged retrievers: one cell each, with gold's rank (the title-vector route's 1).
            assert [text for text, _ in cells()] == [
                "bm25_raw —",
                "dense_raw —",
                "dense_2 1",
                "fused 4",
                "rerank in 4",
                "reranked 3",
                "final —",
            ]
            await pilot.resize_terminal(80, 30)
            await _settle(app, pilot)
            # Too narrow for a cell per route: the routes fold, and the stage gold was lost at stays.
            assert [text for text, _ in cells()] == [
                "routes 1",
                "fused 4",
                "rerank in 4",
                "reranked 3",
                "final —",
            ]
            assert all(right <= 80 for _, right in cells())
            assert screen.journey_strip.query(".journey-cell.-lost").first().render() == "final —"
    finally:
        workspace.close()
