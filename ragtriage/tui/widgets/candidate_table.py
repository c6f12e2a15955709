"""The candidate pool of a trace: per-route ranks and scores, fused, rerank and final, gold marked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from ragtriage.pipeline.types import StageRank, Trace

GOLD_MARK = "★"
TITLE_WIDTH = 12


def _rank_cell(stage: StageRank | None) -> Text:
    if stage is None or stage.rank is None:
        return Text("—", style="dim")
    score = "" if stage.score is None else f" {stage.score:.3g}"
    return Text(f"{stage.rank}{score}")


def candidate_rows(trace: Trace, gold: Sequence[str]) -> tuple[list[str], list[tuple[str, list[Text]]]]:
    """Column titles and `(chunk_id, cells)` rows, in fused order (the trace's candidate order)."""
    route_names = [route.name for route in trace.routes]
    columns = ["gold", "chunk_id", "title", *route_names, "fused", "rerank", "final"]
    gold_set = set(gold)
    rows = []
    for candidate in trace.candidates:
        is_gold = candidate.chunk_id in gold_set
        cells = [
            Text(GOLD_MARK if is_gold else "", style="bold green"),
            Text(
                candidate.chunk_id, style="bold green" if is_gold else ("red" if not candidate.known else "")
            ),
            Text((candidate.title or "?")[:TITLE_WIDTH]),
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

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True

    def show(self, trace: Trace, gold: Sequence[str]) -> None:
        """Replace columns and rows with the candidates of `trace`, keeping the cursor row if possible."""
        row = self.cursor_row
        columns, rows = candidate_rows(trace, gold)
        self.clear(columns=True)
        self.add_columns(*columns)
        for chunk_id, cells in rows:
            self.add_row(*cells, key=chunk_id)
        if rows:
            self.move_cursor(row=min(row, len(rows) - 1))

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
