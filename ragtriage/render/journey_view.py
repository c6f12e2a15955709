"""The gold-journey table shared by `diagnose`, `demo --headless` and the case screen.

One row per gold chunk, one column per route and stage; when that is wider than the screen it
turns into one row per stage (see `FitTable`).
"""

from __future__ import annotations

from rich.text import Text

from ragtriage.render.fit import Col, FitTable
from ragtriage.triage.diagnose import Diagnosis
from ragtriage.triage.journey import GoldJourney, Stage

MISSING = "—"
"""Shown where the gold chunk is not in a stage's list."""
NOT_LOGGED = "not logged"
"""Shown for a stage production did not log at all (unlike a stage logged empty)."""
#: Journey stages by column title (routes have their own columns).
STAGE_COLUMNS: dict[str, Stage] = {
    "fused": "fused",
    "rerank in": "rerank_input",
    "reranked": "reranked",
    "final": "final",
}


def journey_table(journey: GoldJourney, title: str) -> FitTable:
    """Rank of each gold chunk at every route and stage, and the stage where it dropped out."""
    stages = [*journey.route_names, *STAGE_COLUMNS]
    columns = [Col("gold", "id"), *(Col(name, "number", justify="right") for name in stages)]
    columns.append(Col("dropped at", "label"))
    table = FitTable(columns, title=Text(title), vertical="transpose")
    unlogged = [title for title, stage in STAGE_COLUMNS.items() if stage in journey.not_logged]
    for gold in journey.gold:
        cells = [
            MISSING if gold.routes.get(name) is None else str(gold.routes[name])
            for name in journey.route_names
        ]
        for column, stage in STAGE_COLUMNS.items():
            rank = gold.stage_rank(stage)
            cells.append(NOT_LOGGED if column in unlogged else MISSING if rank is None else str(rank))
        if gold.dropped_at is not None:
            dropped = Text(gold.dropped_at, style="bold red")
        elif gold.final is None:
            dropped = Text(f"final {NOT_LOGGED}", style="yellow")
        else:
            dropped = Text("reached final", style="green")
        table.add_row(Text(gold.chunk_id), *cells, dropped)
    return table


def journey_notes(journey: GoldJourney) -> list[str]:
    """Lines under a journey table for what production did not log (empty for a replay)."""
    if journey.final_logged:
        return []
    where = ", ".join(
        f"{g.chunk_id} last seen at {g.last_seen}" for g in journey.gold if g.dropped_at is None
    )
    return [
        f"final context: {NOT_LOGGED} by production (no reranker/context span)"
        + (f"; {where}, where it went next is unknown" if where else "")
    ]


def suggestion_lines(diagnosis: Diagnosis) -> list[str]:
    """The suggested root cause in words: confirmed labels first, an unconfirmed one said as such,
    labels whose own replays failed last."""
    suggestion = diagnosis.suggestion
    if suggestion.label is None:
        if diagnosis.gold == []:
            return ["no retrieval cause: the case has no gold (the KB has no answer)"]
        return [] if diagnosis.gold is None else ["no rule fired: no retrieval cause suggested"]
    if suggestion.confirmed_by:
        head = (
            f"suggested root cause: {suggestion.label} (confidence {suggestion.confidence:.2f}, "
            f"confirmed by the {suggestion.confirmed_by} replay)"
        )
    elif suggestion.unconfirmed:
        head = (
            f"no confirmed root cause. Unconfirmed lead: {suggestion.label} "
            f"(confidence {suggestion.confidence:.2f}; its own replays did not bring gold back)"
        )
    else:
        head = (
            f"suggested root cause: {suggestion.label} (confidence {suggestion.confidence:.2f}, not tested)"
        )
    lines = [head, *(f"  - {line}" for line in suggestion.evidence)]
    if suggestion.alternatives:
        lines.append(
            "also fired: " + ", ".join(f"{f.label} ({f.confidence:.2f})" for f in suggestion.alternatives)
        )
    if suggestion.refuted:
        lines.append(
            "fired but not confirmed (their replays still miss gold): "
            + ", ".join(f"{f.label} ({f.confidence:.2f})" for f in suggestion.refuted)
        )
    return lines
