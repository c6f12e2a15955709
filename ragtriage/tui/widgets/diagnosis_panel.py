"""The diagnosis: suggested root cause, confidence, evidence, alias proposals and counterfactual results."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from ragtriage.triage.diagnose import Diagnosis


def diagnosis_text(diagnosis: Diagnosis | None, gold: Sequence[str] | None = None) -> Text:
    """Literal text of a diagnosis (evidence quotes queries and chunk ids: never markup). With
    `gold` (the case's gold now), a diagnosis made with other gold first says so and how to redo it."""
    if diagnosis is None:
        return Text("no diagnosis yet: press r to replay and diagnose", style="dim")
    suggestion = diagnosis.suggestion
    text = Text()
    if gold is not None and set(gold) != set(diagnosis.gold or ()):
        made_with = ", ".join(diagnosis.gold or ()) or "none"
        text.append(
            f"gold changed since this diagnosis (made with gold: {made_with}): press r to diagnose again\n",
            style="bold yellow",
        )
    if suggestion.unconfirmed:
        # Its own replays did not bring gold back: a lead, never the headline.
        text.append("no confirmed root cause; unconfirmed lead: ", style="bold")
        text.append(suggestion.label or "none", style="magenta")
    else:
        text.append("suggested root cause: ", style="bold")
        text.append(suggestion.label or "none", style="bold magenta")
    text.append(f"  (confidence {suggestion.confidence:.2f}")
    if suggestion.confirmed_by:
        text.append(f", confirmed by the {suggestion.confirmed_by} replay")
    elif suggestion.unconfirmed:
        text.append("; its replays still miss gold")
    text.append(")\n")
    for line in suggestion.evidence:
        text.append(f"  • {line}\n")
    state = "confirmed" if suggestion.confirmed_by == "alias_added" else "unconfirmed"
    for pair in suggestion.alias_pairs:
        text.append(
            f"  alias proposal ({state}): {pair.term} ↔ {pair.synonym} (score {pair.score:.2f}; press a)\n",
            style="cyan" if state == "confirmed" else "",
        )
    if suggestion.alternatives:
        also = ", ".join(f"{f.label} {f.confidence:.2f}" for f in suggestion.alternatives)
        text.append(f"  also fired: {also}\n", style="dim")
    if suggestion.refuted:
        refuted = ", ".join(f"{f.label} {f.confidence:.2f}" for f in suggestion.refuted)
        text.append(f"  fired but not confirmed (replays still miss gold): {refuted}\n", style="dim")
    for result in diagnosis.counterfactuals:
        if not result.available:
            text.append(f"  ○ {result.name}: not run ({result.reason})\n", style="dim")
            continue
        verdict = "brings gold back" if result.improves else "does not bring gold back"
        text.append(
            f"  {'✔' if result.improves else '✘'} {result.name}: {verdict}",
            style="green" if result.improves else "",
        )
        if result.detail:
            text.append(f" — {'; '.join(result.detail)}")
        text.append("\n")
    if diagnosis.needs is not None:
        text.append(diagnosis.needs.message + "\n", style="yellow")
        for likely in diagnosis.needs.likeliest:
            text.append(
                f"  likely gold: {likely.chunk_id} ({likely.title or ''}) {likely.stage} #{likely.rank}\n"
            )
    return text


class DiagnosisPanel(Static):
    """Shows `diagnosis_text`."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", markup=False, id=id)

    def show(self, diagnosis: Diagnosis | None, gold: Sequence[str] | None = None) -> None:
        """Render `diagnosis` (None: not diagnosed yet); `gold`: the case's gold now."""
        self.update(diagnosis_text(diagnosis, gold))
