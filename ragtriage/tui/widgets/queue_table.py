"""The queue's table: one page of flagged requests, replaced as a whole (clear + one batch add).

Column widths come from the page's content and the table's width, recomputed whenever either
changes, so the layout is the same whether the data arrives before or after the first resize:
time, request id, status, label and suggested cause keep their full width; the reasons are cut
last-but-one and the query takes the rest (its full text is on the preview line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.widgets import DataTable

from ragtriage.logs.queue import QueueItem

COLUMNS = ("time", "request_id", "query", "flag reasons", "suggested", "status", "label")
QUERY = COLUMNS.index("query")
REASONS = COLUMNS.index("flag reasons")
#: The query and the reasons never get narrower than this (cells), whatever the width.
QUERY_MIN = 12
REASONS_MIN = 10
#: Cells the table itself takes besides the columns: the vertical scrollbar and a margin.
CHROME = 3
TIME_FORMAT = "%m-%d %H:%M"


def queue_row(item: QueueItem) -> tuple[Text, ...]:
    """Cells of one queue item at full length; every value is literal `Text` (logged queries may
    contain markup)."""
    when = item.ts.strftime(TIME_FORMAT) if item.ts is not None else "—"
    return (
        Text(when, style="dim"),
        Text(item.request_id),
        Text(" ".join(item.raw_query.split())),
        Text(", ".join(item.reasons)),
        Text(item.suggested_label or "—", style="italic"),
        Text(item.status),
        Text(item.primary_label or "—", style="bold" if item.primary_label else "dim"),
    )


@dataclass(frozen=True)
class Layout:
    """Column widths (cells, without padding) for one page at one table width."""

    widths: tuple[int, ...]


def plan_widths(rows: Sequence[Sequence[Text]], available: int, padding: int) -> Layout:
    """Natural widths for every column but the query and the reasons; the reasons keep theirs
    unless that leaves the query under `QUERY_MIN`; the query gets what is left."""
    natural = [
        max([cell_len(header), *(cell_len(row[index].plain) for row in rows)])
        for index, header in enumerate(COLUMNS)
    ]
    fixed = sum(w for i, w in enumerate(natural) if i not in (QUERY, REASONS))
    room = available - CHROME - 2 * padding * len(COLUMNS) - fixed
    reasons = natural[REASONS]
    if room - reasons < QUERY_MIN:
        reasons = max(min(natural[REASONS], REASONS_MIN), room - QUERY_MIN)
    query = max(QUERY_MIN, min(natural[QUERY], room - reasons)) if rows else max(QUERY_MIN, room - reasons)
    widths = list(natural)
    widths[QUERY], widths[REASONS] = query, reasons
    return Layout(tuple(widths))


def _cut(text: Text, width: int) -> Text:
    if cell_len(text.plain) <= width:
        return text
    cut = text.copy()
    cut.truncate(width, overflow="ellipsis")
    return cut


class QueueTable(DataTable[Text]):
    """Flagged requests of the current page; the row key is the request id."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.items: list[QueueItem] = []
        self.layout_widths: tuple[int, ...] = ()
        """The column widths in use (for tests and the snapshot)."""
        self._laid_out_for: tuple[int, int] | None = None

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self._rebuild()

    def on_resize(self, event: events.Resize) -> None:
        self._rebuild()

    def show_page(self, items: Sequence[QueueItem]) -> None:
        """Replace the rows with `items` (never row-by-row removal: that is slow on big tables)."""
        self.items = list(items)
        self._laid_out_for = None
        self._rebuild()

    def item(self, request_id: str) -> QueueItem | None:
        """The item of the page with this request id."""
        return next((i for i in self.items if i.request_id == request_id), None)

    def _rebuild(self) -> None:
        """Columns sized for the current items and width, then the rows (cursor row kept)."""
        width = self.size.width or self.app.size.width
        key = (width, id(self.items))
        if self._laid_out_for == key and self.columns:
            return
        self._laid_out_for = key
        rows = [queue_row(item) for item in self.items]
        layout = plan_widths(rows, width, self.cell_padding)
        self.layout_widths = layout.widths
        keep = self.highlighted_request_id if self.columns else None
        self.clear(columns=True)
        for header, column_width in zip(COLUMNS, layout.widths, strict=True):
            self.add_column(header, width=column_width, key=header)
        for item, row in zip(self.items, rows, strict=True):
            cells = [_cut(cell, w) for cell, w in zip(row, layout.widths, strict=True)]
            self.add_row(*cells, key=item.request_id)
        if keep is not None and keep in {i.request_id for i in self.items}:
            self.move_cursor(row=self.get_row_index(keep))

    @property
    def highlighted_request_id(self) -> str | None:
        """The request id under the cursor, or None on an empty page."""
        if not self.row_count:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return str(row_key.value)
