"""The gold journey as a strip of cells across stages: rank or "—", the stage where gold was lost marked `-lost`."""

from __future__ import annotations

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
        yield Static(f"gold journey ({self.journey.source})", markup=False, classes="journey-title")
        for title, rank, lost in journey_cells(self.journey):
            cell = Static(f"{title}\n{'—' if rank is None else rank}", markup=False, classes="journey-cell")
            cell.set_class(lost, "-lost")
            cell.set_class(isinstance(rank, int), "-present")
            yield cell
