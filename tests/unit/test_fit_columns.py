"""`fit_columns`: widths for one-line cells under one-line headers (the TUI's tables). Ids and
headers keep their whole width, optional columns are left out in `drop_order` before a column that
always shows is cut, optional text gives way first, and CJK counts two cells."""

from __future__ import annotations

import uuid

from rich.text import Text

from ragtriage.render.fit import Col, fit_columns

UUID = str(uuid.UUID(int=0xC0FFEE, version=4))
COLUMNS = [
    Col("time", kind="label", drop_order=2),
    Col("request_id", kind="id"),
    Col("query", kind="clip", min_width=12, drop_order=3),
    Col("flag reasons", kind="clip"),
    Col("suggested", kind="label", drop_order=1),
    Col("status", kind="label"),
]
ROW = [
    Text("11-30 08:00"),
    Text(UUID),
    Text("报销单被驳回以后重新提交需要走哪些审批节点"),  # 21 characters, 42 cells
    Text("bad_rating, escalated"),
    Text("rerank_error"),
    Text("new"),
]


def _used(widths: list[int | None], per_column: int) -> int:
    return sum(w + per_column for w in widths if w is not None)


def test_wide_enough_keeps_every_column_at_full_width() -> None:
    widths = fit_columns(COLUMNS, [ROW], 200, per_column=2)
    assert widths == [11, 36, 42, 21, 12, 6]


def test_the_optional_query_is_cut_in_cells_before_the_reasons() -> None:
    widths = fit_columns(COLUMNS, [ROW], 140, per_column=2)
    assert _used(widths, 2) == 140
    assert widths[3] == 21 and widths[1] == 36
    assert widths[2] == 140 - 2 * 6 - (11 + 36 + 21 + 12 + 6)


def test_optional_columns_are_left_out_in_order_before_the_reasons_are_cut() -> None:
    # 77 cells (an 80-column terminal less the scrollbar): only the id, reasons and status stay.
    widths = fit_columns(COLUMNS, [ROW], 77, per_column=2)
    assert widths == [None, 36, None, 21, None, 6]
    widths = fit_columns(COLUMNS, [ROW], 96, per_column=2)
    assert widths == [11, 36, 12, 21, None, 6]  # the suggestion alone makes room
    widths = fit_columns(COLUMNS, [ROW], 95, per_column=2)
    assert widths == [None, 36, 95 - 2 * 4 - (36 + 21 + 6), 21, None, 6]  # then the time


def test_headers_are_never_cut_and_nothing_fitting_returns_the_narrowest() -> None:
    widths = fit_columns(COLUMNS, [ROW], 40, per_column=2)
    assert widths == [None, 36, None, len("flag reasons"), None, 6]  # wider than 40: the caller scrolls
