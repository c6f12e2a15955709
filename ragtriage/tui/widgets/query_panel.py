"""The raw query, the rewrite (normalized, rewritten, aliases, sub-queries) and the triage record's state."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ragtriage.pipeline.types import Trace
from ragtriage.store.triage_repo import TriageRecord


def query_text(
    request_id: str, trace: Trace, record: TriageRecord | None, source: str, fidelity: str | None = None
) -> Text:
    """Literal text: logged queries may contain anything, including `[bold]` or `[link=…]`.
    `fidelity` is the replay's fidelity line, shown when known."""
    rewrite = trace.rewrite
    text = Text()
    text.append(f"{request_id}  ", style="bold")
    text.append(f"[{source}]", style="reverse")
    if record is not None:
        label = record.primary_label or "unlabelled"
        text.append(f"  status {record.status} · label {label} · rev {record.revision}")
        if record.reasons:
            text.append(f" · flagged: {', '.join(record.reasons)}", style="dim")
    text.append("\nquery      ", style="dim")
    text.append(trace.query)
    if rewrite.rewritten_query != trace.query:
        text.append("\nrewritten  ", style="dim")
        text.append(rewrite.rewritten_query)
    aliases = {term: syns for term, syns in rewrite.aliases.items() if syns}
    if aliases:
        text.append("\naliases    ", style="dim")
        text.append("; ".join(f"{term} → {', '.join(syns)}" for term, syns in aliases.items()))
    for number, sub_query in enumerate(rewrite.sub_queries, start=1):
        text.append(f"\nsub {number}      ", style="dim")
        text.append(sub_query)
    if trace.refused:
        text.append("\nrefused    ", style="dim")
        text.append(trace.refusal_reason or "yes")
    support = trace.refusal_support()
    if support is not None:
        text.append("\nsupport    ", style="dim")
        text.append(support.explain())
    if fidelity is not None:
        text.append("\nfidelity   ", style="dim")
        text.append(fidelity)
    if record is not None and record.notes:
        last = record.notes[-1]
        text.append(f"\nnote       {last.user}: ", style="dim")
        text.append(last.text)
    return text


class QueryPanel(Static):
    """Shows `query_text`."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", markup=False, id=id)

    def show(
        self,
        request_id: str,
        trace: Trace,
        record: TriageRecord | None,
        source: str,
        fidelity: str | None = None,
    ) -> None:
        """Render the query and rewrite of `trace` (and the replay's fidelity line when known)."""
        self.update(query_text(request_id, trace, record, source, fidelity))
