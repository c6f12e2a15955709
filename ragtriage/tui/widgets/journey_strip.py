"""The gold journey as a strip of cells across stages: rank or "—", the stage where gold was lost marked `-lost`.

When one cell per route does not fit the width (80 columns), the routes fold into one `routes` cell
(the best rank any route gave gold) and the title is left out (the case header says logged or
replayed), so the later stages, where gold is lost, stay on screen.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import Static

from ragtriage.triage.journey import GoldJourney, Stage

STAGE_TITLES: dict[str, str] = {
    "fused": "fused",
    "rerank_input": "rerank in",
    "reranked": "reranked",
    "final": "final",
}


NOT_LOGGED = "not logged"
"""Shown for a stage production did not log (no reranker or context span): not a drop."""


def best_rank(ranks: list[int | None]) -> int | None:
    """The best (lowest) rank among gold chunks, None when none is present."""
    present = [rank for rank in ranks if rank is not None]
    return min(present) if present else None


def journey_cells(journey: GoldJourney) -> list[tuple[str, int | str | None, bool]]:
    """(title, best gold rank, lost here) per route and stage of the journey; a final context
    production did not log is a last cell saying so (rank `NOT_LOGGED`)."""
    lost: Stage | None = journey.first_drop
    cells: list[tuple[str, int | str | None, bool]] = [
        (name, best_rank([g.routes.get(name) for g in journey.gold]), lost == "routes")
        for name in journey.route_names
    ]
    for stage in journey.stages:
        if stage == "routes":
            continue
        ranks = [g.stage_rank(stage) for g in journey.gold]
        cells.append((STAGE_TITLES.get(stage, stage), best_rank(ranks), lost == stage))
    if not journey.final_logged:
        cells.append(("final", NOT_LOGGED, False))
    return cells


#: Widths of the layout in app.tcss: `.journey-title` width, `.journey-cell` min-width, border +
#: padding, and margin.
TITLE_WIDTH, CELL_MIN_WIDTH, CELL_FRAME, CELL_MARGIN = 18, 12, 4, 1


def cell_text(title: str, rank: int | str | None) -> str:
    """A cell's one line: the route or stage, then gold's best rank there (`fused 8`, `final —`)."""
    return f"{title} {'—' if rank is None else rank}"


def strip_width(cells: list[tuple[str, int | str | None, bool]]) -> int:
    """Columns the full strip's content takes: the title, then each cell as wide as its text needs."""
    widths = [max(CELL_MIN_WIDTH, cell_len(cell_text(title, rank)) + CELL_FRAME) for title, rank, _ in cells]
    return TITLE_WIDTH + sum(w + CELL_MARGIN for w in widths)


def folded_cells(journey: GoldJourney) -> list[tuple[str, int | str | None, bool]]:
    """`journey_cells` with the route cells folded into one `routes` cell: the best rank any route
    gave gold, or "—"."""
    cells = journey_cells(journey)
    routes, stages = cells[: len(journey.route_names)], cells[len(journey.route_names) :]
    best = best_rank([rank for _, rank, _ in routes if isinstance(rank, int)])
    return [("routes", best, any(lost for _, _, lost in routes)), *stages]


class JourneyStrip(Horizontal):
    """One cell per route and stage; `journey = None` shows that gold is unknown."""

    journey: reactive[GoldJourney | None] = reactive(None, recompose=True)
    """The journey shown (logged or replayed)."""

    def compose(self) -> ComposeResult:
        if self.journey is None or not self.journey.gold:
            yield Static(
                "gold unknown: mark gold with g (candidate) or G (search the KB)",
                markup=False,
                classes="journey-empty",
            )
            return
        cells = journey_cells(self.journey)
        self._compact = 0 < self.size.width < strip_width(cells)
        self.set_class(self._compact, "-compact")
        if self._compact:
            cells = folded_cells(self.journey)
        if not self._compact:
            yield Static(f"gold journey ({self.journey.source})", markup=False, classes="journey-title")
        for title, rank, lost in cells:
            # One line: the cell's border leaves one row, and a second line (the rank) was never shown.
            cell = Static(cell_text(title, rank), markup=False, classes="journey-cell")
            cell.set_class(lost, "-lost")
            cell.set_class(isinstance(rank, int), "-present")
            yield cell

    def on_resize(self, event: events.Resize) -> None:
        if self.journey is None or not self.journey.gold:
            return
        compact = 0 < event.size.width < strip_width(journey_cells(self.journey))
        if compact != getattr(self, "_compact", False):
            self.refresh(recompose=True)
