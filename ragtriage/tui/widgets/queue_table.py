"""The queue's table: one page of flagged requests, replaced as a whole (clear + one batch add)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable

from ragtriage.logs.queue import QueueItem

COLUMNS = ("time", "request_id", "query", "flag reasons", "suggested", "status", "label")
QUERY_WIDTH = 48


def queue_row(item: QueueItem) -> tuple[Text, ...]:
    """Cells of one queue item; every value is literal `Text` (logged queries may contain markup)."""
    when = item.ts.strftime("%Y-%m-%d %H:%M") if item.ts is not None else "—"
    query = item.raw_query.replace("\n", " ")
    if len(query) > QUERY_WIDTH:
        query = query[: QUERY_WIDTH - 1] + "…"
    return (
        Text(when, style="dim"),
        Text(item.request_id),
        Text(query),
        Text(", ".join(item.reasons)),
        Text(item.suggested_label or "—", style="italic"),
        Text(item.status),
        Text(item.primary_label or "—", style="bold" if item.primary_label else "dim"),
    )


class QueueTable(DataTable[Text]):
    """Flagged requests of the current page; the row key is the request id."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_columns(*COLUMNS)

    def show_page(self, items: Sequence[QueueItem]) -> None:
        """Replace the rows with `items` (never row-by-row removal: that is slow on big tables)."""
        self.clear()
        self.add_rows_with_keys(items)

    def add_rows_with_keys(self, items: Sequence[QueueItem]) -> None:
        """Add one row per item, keyed by request id, in one batch."""
        for item in items:
            self.add_row(*queue_row(item), key=item.request_id)

    @property
    def highlighted_request_id(self) -> str | None:
        """The request id under the cursor, or None on an empty page."""
        if not self.row_count:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return str(row_key.value)
