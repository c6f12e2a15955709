"""The diagnosis: suggested root cause, confidence, evidence, alias proposals and counterfactual results."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ragtriage.triage.diagnose import Diagnosis


def diagnosis_text(diagnosis: Diagnosis | None) -> Text:
    """Literal text of a diagnosis (evidence quotes queries and chunk ids: never markup)."""
    if diagnosis is None:
        return Text("no diagnosis yet: press r to replay and diagnose", style="dim")
    suggestion = diagnosis.suggestion
    text = Text()
    text.append("suggested root cause: ", style="bold")
    text.append(suggestion.label or "none", style="bold magenta")
    text.append(f"  (confidence {suggestion.confidence:.2f}")
    if suggestion.confirmed_by:
        text.append(f", confirmed by {suggestion.confirmed_by}")
    text.append(")\n")
    for line in suggestion.evidence:
        text.append(f"  • {line}\n")
    for pair in suggestion.alias_pairs:
        text.append(
            f"  alias proposal: {pair.term} ↔ {pair.synonym} (score {pair.score:.2f}; press a)\n",
            style="cyan",
        )
    if suggestion.alternatives:
        also = ", ".join(f"{f.label} {f.confidence:.2f}" for f in suggestion.alternatives)
        text.append(f"  also fired: {also}\n", style="dim")
    for result in diagnosis.counterfactuals:
        if not result.available:
            text.append(f"  ○ {result.name}: not run ({result.reason})\n", style="dim")
            continue
        verdict = "fixes it" if result.improves else "no fix"
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

    def show(self, diagnosis: Diagnosis | None) -> None:
        """Render `diagnosis` (None: not diagnosed yet)."""
        self.update(diagnosis_text(diagnosis))
