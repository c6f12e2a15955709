"""Preview of one chunk: title path, ids, and its literal text with the query terms highlighted."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from ragtriage.pipeline.types import ChunkRecord

HIGHLIGHT_STYLE = "bold black on yellow"


def preview_text(chunk: ChunkRecord | None, terms: Sequence[str], chunk_id: str | None = None) -> Text:
    """The chunk as literal text; `terms` are highlighted case-insensitively (never parsed as markup)."""
    if chunk is None:
        return Text(f"{chunk_id or '(no chunk)'}: not in the KB (stale index or another KB)", style="red")
    text = Text()
    text.append(" › ".join([chunk.title, *chunk.heading_path]) + "\n", style="bold")
    text.append(
        f"{chunk.chunk_id}  ·  {chunk.doc_id}  ·  {chunk.status}  ·  {chunk.updated_at or '—'}\n\n",
        style="dim",
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

    def show(self, chunk: ChunkRecord | None, terms: Sequence[str], chunk_id: str | None = None) -> None:
        """Preview `chunk` with `terms` highlighted."""
        self.update(preview_text(chunk, terms, chunk_id))
