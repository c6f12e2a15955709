"""The queue at 80 columns on production-shaped traffic: OTLP traces recorded with the real
OpenTelemetry SDK whose request ids and chunk ids are UUIDs and whose queries are long Chinese
text. The time, the whole request id and the status always show, no header is cut and the table
never scrolls sideways; the query is cut with `…` in cells (CJK double) and shows whole, with the
reasons, suggestion and label the table left out, on the preview line."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.app import App
from textual.widgets import DataTable

from ragtriage.logs.ingest import ingest_files
from ragtriage.tui.app import TriageApp
from ragtriage.tui.screens.queue_screen import QueueScreen
from ragtriage.tui.widgets.queue_table import CHROME, COLUMNS
from ragtriage.workspace import Workspace
from tests.trace_producers import make_tracer, otlp_lines, record_request

REQUEST_IDS = [str(uuid.UUID(int=0xC0FFEE00 + i, version=4)) for i in range(3)]
CHUNK_IDS = [str(uuid.UUID(int=0xBEEF0000 + i, version=4)) for i in range(3)]
QUERY = "报销单被驳回以后重新提交需要走哪些审批节点，加签的人还要再审一遍吗"
ALWAYS_SHOWN = ("time", "request_id", "status")


def _ingest_production_traces(workspace: Workspace, folder: Path) -> None:
    tracer, exporter = make_tracer(seed=23, service_version="prod-2.3")
    for index, request_id in enumerate(REQUEST_IDS):
        record_request(
            tracer,
            {
                "request_id": request_id,
                "ts": f"2026-11-30T08:0{index}:00Z",  # newer than the fixture traffic: first on the page
                "raw_query": QUERY if index else "年假怎么请",
                "stages": {
                    "bm25": [{"chunk_id": CHUNK_IDS[index], "score": 4.0}],
                    "dense": [{"chunk_id": CHUNK_IDS[index], "score": 0.7}],
                    "fused": [CHUNK_IDS[index]],
                    "reranked": [CHUNK_IDS[index]],
                    "final_context": [CHUNK_IDS[index]],
                },
                "feedback": {"rating": "thumbs_down", "escalated": index == 2},
            },
        )
    path = folder / "prod.otlp.jsonl"
    path.write_text(otlp_lines(exporter.get_finished_spans()), encoding="utf-8")
    report = ingest_files(
        workspace.engine, [path], flagging=workspace.settings.logs.flagging, otel=workspace.settings.logs.otel
    )
    assert report.flagged >= len(REQUEST_IDS), report


async def _settle(app: App[None], pilot) -> None:  # type: ignore[no-untyped-def]
    await app.workers.wait_for_complete()
    await pilot.pause()


def _header_and_rows(table: DataTable[object]) -> list[str]:
    """The table's lines as drawn (header first), without the scrollbar."""
    return [table.render_line(y).text for y in range(min(table.size.height, table.row_count + 1))]


@pytest.mark.parametrize("width", [80, 100, 160])
async def test_uuid_request_ids_show_whole_without_sideways_scrolling(
    workspace: Workspace, tmp_path: Path, width: int
) -> None:
    _ingest_production_traces(workspace, tmp_path)
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=(width, 24)) as pilot:
        await _settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, QueueScreen)
        table = screen.queue_table
        headers = [str(column.label.plain) for column in table.ordered_columns]
        for name in ALWAYS_SHOWN:
            assert name in headers, (width, headers)
        # Nothing scrolls sideways and every column fits its header and its widest cell.
        assert table.max_scroll_x == 0, (width, table.virtual_size)
        shown = [w for w in table.layout_widths if w]
        assert sum(shown) + 2 * table.cell_padding * len(shown) + CHROME <= width
        for column in table.ordered_columns:
            assert column.width >= cell_len(column.label.plain), (width, column.label)
        lines = _header_and_rows(table)
        header_line = lines[0]
        for name in headers:
            assert name in header_line, (width, header_line)
        # The UUID rows come first (newest) and show the id whole, on one drawn line.
        for request_id, line in zip(REQUEST_IDS[::-1], lines[1:4], strict=True):
            assert request_id in line, (width, line)
            cells = [cell.plain for cell in table.get_row(request_id)]  # type: ignore[attr-defined]
            assert request_id in cells
        index = {name: i for i, name in enumerate(headers)}
        row = table.get_row(REQUEST_IDS[2])
        assert row[index["status"]].plain == "new"  # type: ignore[attr-defined]
        assert row[index["time"]].plain == "11-30 08:02"  # type: ignore[attr-defined]
        if "flag reasons" in index:
            reasons = row[index["flag reasons"]].plain  # type: ignore[attr-defined]
            assert reasons == "bad_rating, escalated" or (
                reasons.endswith("…") and "bad_rating, escalated".startswith(reasons[:-1])
            )
        if "query" in index:
            query_cell = row[index["query"]].plain  # type: ignore[attr-defined]
            query_width = table.layout_widths[COLUMNS.index("query")]
            assert cell_len(query_cell) <= query_width
            if cell_len(QUERY) > query_width:
                assert query_cell.endswith("…") and QUERY.startswith(query_cell[:-1])
        if width == 80:
            # 80 columns: the suggestion, label and reasons make room and the query is cut; the
            # preview line under the table carries them and the whole query.
            assert headers == ["time", "request_id", "query", "status"], headers
            assert table.layout_widths[COLUMNS.index("query")] >= 8
            preview = str(screen.query_one("#queue-preview").render())
            highlighted = table.highlighted_request_id
            assert highlighted == REQUEST_IDS[2] and highlighted in preview and QUERY in preview
            assert "flagged: bad_rating, escalated" in preview and "no label" in preview
        if width == 160:
            # These traces carry production's pipeline_version: its column follows at full width.
            assert headers == [*COLUMNS, "version"]
