"""The case screen's candidate table at 80 columns: it never scrolls sideways, chunk ids (UUIDs,
36 cells) and headers show whole, CJK titles are cut in cells (double width), and what the table
leaves out of the highlighted row is shown on the preview."""

from __future__ import annotations

import uuid

import pytest
from rich.cells import cell_len
from textual.app import App, ComposeResult

from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.types import Candidate, RewriteResult, RouteResult, StageRank, Trace
from ragtriage.tui.app import TriageApp
from ragtriage.tui.screens.case_screen import CaseScreen
from ragtriage.tui.widgets.candidate_table import CHROME, CandidateTable
from ragtriage.workspace import Workspace
from tests.tui.test_case_screen import _case_with_gold, _open

CHUNK_IDS = [str(uuid.UUID(int=0xFACE0000 + i, version=4)) for i in range(4)]
TITLE = "报销单被驳回以后重新提交的审批节点说明"
ROUTES = ("bm25_raw", "dense_raw", "bm25_rewritten", "dense_rewritten")


def _foreign_trace() -> Trace:
    """A production-shaped trace: UUID chunk ids, CJK titles, the four default routes, rerank scores."""
    candidates = [
        Candidate(
            chunk_id=chunk_id,
            title=TITLE,
            routes={name: StageRank(rank=i + 1, score=12.3456 - i) for name in ROUTES},
            fused=StageRank(rank=i + 1, score=0.0327 - i / 1000),
            reranked=StageRank(rank=i + 1, score=0.98765 - i / 10),
            final_rank=i + 1 if i < 2 else None,
            is_selected=i < 2,
        )
        for i, chunk_id in enumerate(CHUNK_IDS)
    ]
    hits = [ScoredChunk(chunk_id=c, rank=i + 1, score=1.0) for i, c in enumerate(CHUNK_IDS)]
    return Trace(
        query="报销单驳回",
        rewrite=RewriteResult(
            raw_query="报销单驳回", normalized_query="报销单驳回", rewritten_query="报销单驳回"
        ),
        routes=[
            RouteResult(name=name, kind="bm25" if "bm25" in name else "dense", query="q", hits=hits)
            for name in ROUTES
        ],
        fused=hits,
        reranked=hits,
        final=CHUNK_IDS[:2],
        candidates=candidates,
    )


class _Harness(App[None]):
    def compose(self) -> ComposeResult:
        yield CandidateTable(id="candidate-table")

    def on_mount(self) -> None:
        self.query_one(CandidateTable).show(_foreign_trace(), [CHUNK_IDS[1]])


@pytest.mark.parametrize("width", [80, 100, 150, 200])
async def test_uuid_chunk_ids_show_whole_without_sideways_scrolling(width: int) -> None:
    app = _Harness()
    async with app.run_test(size=(width, 30)) as pilot:
        await pilot.pause()
        table = app.query_one(CandidateTable)
        assert table.max_scroll_x == 0, (width, table.virtual_size)
        headers = [column.label.plain for column in table.ordered_columns]
        for name in ("gold", "chunk_id", "fused", "rerank", "final"):
            assert name in headers, (width, headers)
        shown = [w for w in table.layout_widths if w]
        assert sum(shown) + 2 * table.cell_padding * len(shown) + CHROME <= width
        header_line = table.render_line(0).text
        for name in headers:
            assert name in header_line, (width, header_line)
        for chunk_id in CHUNK_IDS:
            cells = [cell.plain for cell in table.get_row(chunk_id)]
            assert chunk_id in cells and "0.988" in " ".join(cells) or chunk_id != CHUNK_IDS[0]
        drawn = [table.render_line(y).text for y in range(1, 1 + len(CHUNK_IDS))]
        for chunk_id, line in zip(CHUNK_IDS, drawn, strict=True):
            assert chunk_id in line, (width, line)
        if "title" in headers:
            title = table.get_row(CHUNK_IDS[0])[headers.index("title")].plain
            assert cell_len(title) <= table.layout_widths[2]
            assert title == TITLE or (title.endswith("…") and TITLE.startswith(title[:-1]))
        if width == 80:
            # No route column and no title fits beside a whole UUID: they go to the preview.
            assert headers == ["gold", "chunk_id", "fused", "rerank", "final"], headers
            left_out = table.left_out_text(CHUNK_IDS[0])
            assert left_out is not None
            assert left_out.plain == " · ".join([f"title {TITLE}", *(f"{name} 1 12.3" for name in ROUTES)])
        if width == 100:
            # The title is left out first; then the routes, the last first.
            assert headers == ["gold", "chunk_id", "bm25_raw", "dense_raw", "fused", "rerank", "final"], (
                headers
            )
            left_out = table.left_out_text(CHUNK_IDS[0])
            assert left_out is not None
            assert left_out.plain == f"title {TITLE} · bm25_rewritten 1 12.3 · dense_rewritten 1 12.3"
        if width == 150:
            # Every route fits; the CJK title is cut in cells (2 a character) with `…`.
            assert headers == ["gold", "chunk_id", "title", *ROUTES, "fused", "rerank", "final"], headers
            title = table.get_row(CHUNK_IDS[0])[2].plain
            assert title.endswith("…") and TITLE.startswith(title[:-1])
            assert table.layout_widths[2] - 1 <= cell_len(title) <= table.layout_widths[2]
        if width == 200:
            assert headers == ["gold", "chunk_id", "title", *ROUTES, "fused", "rerank", "final"]
            assert table.left_out_text(CHUNK_IDS[0]) is None


async def test_case_screen_at_80_columns_shows_left_out_routes_on_the_preview(workspace: Workspace) -> None:
    request_id = _case_with_gold(workspace)
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=(80, 30)) as pilot:
        screen = await _open(app, pilot, request_id)
        assert isinstance(screen, CaseScreen)
        table = screen.candidate_table
        assert table.row_count > 0
        assert table.max_scroll_x == 0, table.virtual_size
        headers = [column.label.plain for column in table.ordered_columns]
        assert {"gold", "chunk_id", "fused", "final"} <= set(headers), headers
        chunk_id = table.highlighted_chunk_id
        assert chunk_id is not None and chunk_id in table.render_line(1 + table.cursor_row).text
        left_out = table.left_out_text(chunk_id)
        preview = str(screen.query_one("#chunk-preview").render())
        if left_out is not None:
            assert left_out.plain in preview
