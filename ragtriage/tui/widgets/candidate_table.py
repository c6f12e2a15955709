"""The candidate pool of a trace: per-route ranks and scores, fused, rerank and final, gold marked.

Column widths come from the candidates and the table's width (`render.fit.fit_columns`), recomputed
whenever either changes, so the table never scrolls sideways. The gold mark, the chunk id (whole:
a UUID is 36 cells), the fused, rerank and final ranks always show; headers are never cut. On a
narrow terminal the title is cut with `…` (in cells, CJK counting double), then left out, then
the route columns, the last route first; `left_out_text` gives the highlighted candidate's left-out cells
for the preview.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import DataTable

from ragtriage.pipeline.types import StageRank, Trace
from ragtriage.render.fit import Col, cut_cells, fit_columns

GOLD_MARK = "★"
#: The title never gets narrower than this (cells: two CJK characters and `…`); below it, it is left out.
TITLE_MIN = 6
#: Cells the table itself takes besides the columns: the vertical scrollbar and a margin.
CHROME = 3


def _rank_cell(stage: StageRank | None) -> Text:
    if stage is None or stage.rank is None:
        return Text("—", style="dim")
    score = "" if stage.score is None else f" {stage.score:.3g}"
    return Text(f"{stage.rank}{score}")


def candidate_spec(route_names: Sequence[str]) -> tuple[Col, ...]:
    """The columns for these routes. The title (also on the preview) is left out first, then the
    routes, the last first: the first routes say most about why a candidate was recalled."""
    routes = len(route_names)
    return (
        Col("gold", kind="label"),
        Col("chunk_id", kind="id"),
        Col("title", kind="clip", min_width=TITLE_MIN, drop_order=1),
        *(Col(name, kind="label", drop_order=1 + routes - i) for i, name in enumerate(route_names)),
        Col("fused", kind="label"),
        Col("rerank", kind="label"),
        Col("final", kind="label"),
    )


def candidate_rows(trace: Trace, gold: Sequence[str]) -> tuple[list[str], list[tuple[str, list[Text]]]]:
    """Column titles and `(chunk_id, cells)` rows at full length, in fused order (the trace's
    candidate order); every value is literal `Text`."""
    route_names = [route.name for route in trace.routes]
    columns = [col.header for col in candidate_spec(route_names)]
    gold_set = set(gold)
    rows = []
    for candidate in trace.candidates:
        is_gold = candidate.chunk_id in gold_set
        cells = [
            Text(GOLD_MARK if is_gold else "", style="bold green"),
            Text(
                candidate.chunk_id, style="bold green" if is_gold else ("red" if not candidate.known else "")
            ),
            Text(" ".join((candidate.title or "?").split())),
            *(_rank_cell(candidate.routes.get(name)) for name in route_names),
            _rank_cell(candidate.fused),
            _rank_cell(candidate.reranked),
            Text(
                "—" if candidate.final_rank is None else str(candidate.final_rank),
                style="bold" if candidate.is_selected else "dim",
            ),
        ]
        rows.append((candidate.chunk_id, cells))
    return columns, rows


class CandidateTable(DataTable[Text]):
    """Rows keyed by chunk id; posts `CandidateHighlighted` when the cursor moves."""

    @dataclass
    class CandidateHighlighted(Message):
        """The cursor is on another candidate."""

        table: CandidateTable
        chunk_id: str

        @property
        def control(self) -> CandidateTable:
            return self.table

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns_full: list[str] = []
        self.rows_full: list[tuple[str, list[Text]]] = []
        self.layout_widths: tuple[int, ...] = ()
        """Width (cells) of every column of `columns_full`, 0 when left out (for tests)."""
        self._spec: tuple[Col, ...] = ()
        self._laid_out_for: tuple[int, int] | None = None

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True

    def on_resize(self, event: events.Resize) -> None:
        self._rebuild()

    def show(self, trace: Trace, gold: Sequence[str]) -> None:
        """Replace columns and rows with the candidates of `trace`, keeping the cursor row if possible."""
        self._spec = candidate_spec([route.name for route in trace.routes])
        self.columns_full, self.rows_full = candidate_rows(trace, gold)
        self._laid_out_for = None
        self._rebuild()

    def _rebuild(self) -> None:
        """Columns sized for the current rows and width, then the rows (cursor row kept)."""
        width = self.size.width or self.app.size.width
        key = (width, id(self.rows_full))
        if not self._spec or self._laid_out_for == key:
            return
        self._laid_out_for = key
        cells = [row for _, row in self.rows_full]
        widths = fit_columns(self._spec, cells, width - CHROME, per_column=2 * self.cell_padding)
        self.layout_widths = tuple(w or 0 for w in widths)
        shown = [i for i, w in enumerate(self.layout_widths) if w]
        row = self.cursor_row
        self.clear(columns=True)
        for index in shown:
            self.add_column(self.columns_full[index], width=self.layout_widths[index])
        for chunk_id, full in self.rows_full:
            self.add_row(*(cut_cells(full[i], self.layout_widths[i]) for i in shown), key=chunk_id)
        if self.rows_full:
            self.move_cursor(row=min(row, len(self.rows_full) - 1))
            # The preview shows what this layout left out: tell it again after every layout.
            highlighted = self.highlighted_chunk_id
            if highlighted is not None:
                self.post_message(self.CandidateHighlighted(self, highlighted))

    def left_out_text(self, chunk_id: str) -> Text | None:
        """The candidate's cells the table left out or cut at this width, as `header value` pairs
        joined by ` · `; None when every cell shows whole."""
        full = next((cells for key, cells in self.rows_full if key == chunk_id), None)
        if full is None or not self.layout_widths:
            return None
        parts = [
            f"{header} {cell.plain}"
            for header, cell, width in zip(self.columns_full, full, self.layout_widths, strict=True)
            if cell_len(cell.plain) > width
        ]
        return Text(" · ".join(parts), style="dim") if parts else None

    @property
    def highlighted_chunk_id(self) -> str | None:
        """The chunk id under the cursor, or None when the table is empty."""
        if not self.row_count:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return str(row_key.value)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.post_message(self.CandidateHighlighted(self, str(event.row_key.value)))
