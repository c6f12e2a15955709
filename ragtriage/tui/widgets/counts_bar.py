"""One line of counts: the true total, the page shown, and records per status and label."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ragtriage.logs.queue import QueueCounts


def counts_text(counts: QueueCounts, total: int, offset: int, shown: int, filters: str) -> Text:
    """`1–50 of 100,000 matching · new 90,000 · confirmed 10 … · labels: …`."""
    text = Text()
    if shown:
        text.append(f"{offset + 1:,}–{offset + shown:,} of {total:,} matching", style="bold")
    elif total:
        text.append(f"no requests past {total:,} matching ([ goes back)", style="bold")
    else:
        text.append("no requests match" + (" (escape clears the filters)" if filters else ""), style="bold")
    text.append(f" ({counts.total:,} flagged)")
    for status, count in sorted(counts.by_status.items()):
        text.append(f" · {status} {count:,}")
    labels = sorted(((k, v) for k, v in counts.by_label.items() if k != "-"), key=lambda kv: -kv[1])
    if labels:
        text.append("  labels: ", style="dim")
        text.append(", ".join(f"{label} {count:,}" for label, count in labels[:6]))
    if filters:
        text.append(f"  filter: {filters}", style="italic")
    return text


class CountsBar(Static):
    """Shows `counts_text`; plain text, never markup."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", markup=False, id=id)

    def show(self, counts: QueueCounts, total: int, offset: int, shown: int, filters: str) -> None:
        """Render the counts of the current page and filters."""
        self.update(counts_text(counts, total, offset, shown, filters))
