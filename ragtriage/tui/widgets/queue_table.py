"""The queue's table: one page of flagged requests, replaced as a whole (clear + one batch add).

Column widths come from the page's content and the table's width (`render.fit.fit_columns`),
recomputed whenever either changes, so the layout is the same whether the data arrives before or
after the first resize. The time, the request id (whole: a UUID is 36 cells) and the status always
show; headers are never cut. On a narrow terminal the suggested cause, the label and then the flag
reasons are left out and the query (then the reasons) is cut with `…`, counted in cells; the
preview line under the table shows all of them whole. Once production logged a pipeline_version for
a request on the page, a `version` column follows (left out first when the row does not fit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.widgets import DataTable

from ragtriage.logs.queue import QueueItem
from ragtriage.render.fit import Col, cut_cells, fit_columns

#: The query never gets narrower than this (cells: three CJK characters and `…`); below it, it is left out.
QUERY_MIN = 8
#: The flag reasons are cut (with `…`) down to this many cells, then left out.
REASONS_MIN = 14
#: The columns at full width, in order. The time, request id and status are always shown (ids
#: whole). When the row does not fit, the suggested cause, the label, the flag reasons and last
#: the query are left out in that order; the widest text (usually the query) is cut first.
SPEC = (
    Col("time", kind="label"),
    Col("request_id", kind="id"),
    Col("query", kind="clip", min_width=QUERY_MIN, drop_order=4),
    Col("flag reasons", kind="clip", min_width=REASONS_MIN, drop_order=3),
    Col("suggested", kind="label", drop_order=1),
    Col("status", kind="label"),
    Col("label", kind="label", drop_order=2),
)
#: After `SPEC` while a request of the page has a pipeline_version; the first column left out.
VERSION = Col("version", kind="label", drop_order=0)
COLUMNS = tuple(c.header for c in SPEC)
QUERY = COLUMNS.index("query")
REASONS = COLUMNS.index("flag reasons")
#: Cells the table itself takes besides the columns: the vertical scrollbar and a margin.
CHROME = 3
TIME_FORMAT = "%m-%d %H:%M"


def columns_for(items: Sequence[QueueItem]) -> tuple[Col, ...]:
    """`SPEC`, plus `VERSION` when a request of `items` logged a pipeline_version."""
    return (*SPEC, VERSION) if any(item.pipeline_version for item in items) else SPEC


def queue_row(item: QueueItem, *, with_version: bool = False) -> tuple[Text, ...]:
    """Cells of one queue item at full length; every value is literal `Text` (logged queries may
    contain markup). `with_version` adds the pipeline_version cell."""
    when = item.ts.strftime(TIME_FORMAT) if item.ts is not None else "—"
    version = (Text(item.pipeline_version or "—", style="" if item.pipeline_version else "dim"),)
    return (
        Text(when, style="dim"),
        Text(item.request_id),
        Text(" ".join(item.raw_query.split())),
        Text(", ".join(item.reasons)),
        Text(item.suggested_label or "—", style="italic"),
        Text(item.status),
        Text(item.primary_label or "—", style="bold" if item.primary_label else "dim"),
        *(version if with_version else ()),
    )


@dataclass(frozen=True)
class Layout:
    """Column widths (cells, without padding) for one page at one table width; 0 for a column
    left out at this width."""

    widths: tuple[int, ...]

    @property
    def shown(self) -> tuple[int, ...]:
        """Indexes (into `COLUMNS`) of the columns shown."""
        return tuple(i for i, w in enumerate(self.widths) if w)


def plan_widths(
    rows: Sequence[Sequence[Text]], available: int, padding: int, spec: Sequence[Col] = SPEC
) -> Layout:
    """The widths `fit_columns` gives `spec` for these rows in `available` cells (less `CHROME`)."""
    widths = fit_columns(spec, rows, available - CHROME, per_column=2 * padding)
    return Layout(tuple(w or 0 for w in widths))


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
        spec = columns_for(self.items)
        rows = [queue_row(item, with_version=len(spec) > len(SPEC)) for item in self.items]
        layout = plan_widths(rows, width, self.cell_padding, spec)
        self.layout_widths = layout.widths
        keep = self.highlighted_request_id if self.columns else None
        self.clear(columns=True)
        for index in layout.shown:
            self.add_column(spec[index].header, width=layout.widths[index], key=spec[index].header)
        for item, row in zip(self.items, rows, strict=True):
            cells = [cut_cells(row[i], layout.widths[i]) for i in layout.shown]
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
