"""Preview of one chunk: title path, ids (each on its own line), and its literal text with the query
terms highlighted."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from ragtriage.kb.types import ChunkRecord

HIGHLIGHT_STYLE = "bold black on yellow"


def preview_text(
    chunk: ChunkRecord | None, terms: Sequence[str], chunk_id: str | None = None, left_out: Text | None = None
) -> Text:
    """The chunk as literal text; `terms` are highlighted case-insensitively (never parsed as markup).
    `left_out` (the candidate's cells the table could not show) comes first, on its own line."""
    text = Text()
    if left_out is not None:
        text.append_text(left_out)
        text.append("\n")
    if chunk is None:
        text.append(f"{chunk_id or '(no chunk)'}: not in the KB (stale index or another KB)", style="red")
        return text
    text.append(" › ".join([chunk.title, *chunk.heading_path]) + "\n", style="bold")
    # Each id starts its own line after a one-word label: a narrow pane folds before the id, and
    # the pane is as wide as a UUID (app.tcss), so an id is never broken.
    text.append(f"chunk {chunk.chunk_id}\n", style="dim")
    text.append(
        f"doc {chunk.doc_id}  ·  {chunk.status}  ·  updated {chunk.updated_at or '—'}\n\n", style="dim"
    )
    body = Text(chunk.content)
    words = [term for term in dict.fromkeys(terms) if term.strip()]
    if words:
        body.highlight_words(words, style=HIGHLIGHT_STYLE, case_sensitive=False)
    text.append_text(body)
    return text


class ChunkPreview(Static):
    """Shows `preview_text`; markup is off so chunk content prints literally."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", markup=False, id=id)

    def show(
        self,
        chunk: ChunkRecord | None,
        terms: Sequence[str],
        chunk_id: str | None = None,
        left_out: Text | None = None,
    ) -> None:
        """Preview `chunk` with `terms` highlighted, under the table's `left_out` cells if any."""
        self.update(preview_text(chunk, terms, chunk_id, left_out))
