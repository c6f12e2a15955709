"""The gold-journey table shared by `diagnose`, `demo --headless` and the case screen.

One row per gold chunk, one column per route and stage; when that is wider than the screen it
turns into one row per stage (see `FitTable`).
"""

from __future__ import annotations

from rich.text import Text

from ragtriage.render.fit import Col, FitTable
from ragtriage.triage.diagnose import Diagnosis
from ragtriage.triage.journey import GoldJourney

MISSING = "—"
"""Shown where the gold chunk is not in a stage's list."""


def journey_table(journey: GoldJourney, title: str) -> FitTable:
    """Rank of each gold chunk at every route and stage, and the stage where it dropped out."""
    stages = [*journey.route_names, "fused", "rerank in", "reranked", "final"]
    columns = [Col("gold", "id"), *(Col(name, "number", justify="right") for name in stages)]
    columns.append(Col("dropped at", "label"))
    table = FitTable(columns, title=Text(title), vertical="transpose")
    for gold in journey.gold:
        ranks = [gold.routes.get(name) for name in journey.route_names]
        ranks += [gold.fused, gold.rerank_input, gold.reranked, gold.final]
        dropped = gold.dropped_at or "reached final"
        table.add_row(
            Text(gold.chunk_id),
            *(MISSING if rank is None else str(rank) for rank in ranks),
            Text(dropped, style="green" if gold.dropped_at is None else "bold red"),
        )
    return table


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
