"""Rich rendering of KB chunks for `kb chunks` (a table fitted to the screen) and `kb show` (one
chunk's fields and its text), at the console's width: ids whole, text wrapped and never cut, East
Asian wide characters counted two cells."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.text import Text

from ragtriage.kb.types import ChunkRecord
from ragtriage.render.fit import Col, FitTable
from ragtriage.render.text import PLACE_HEADER, chunk_place, hanging_text

FIELD_WIDTH = 14
"""Cells of the `name:` column of `kb show`."""


def chunk_table(chunks: Sequence[ChunkRecord]) -> FitTable:
    """One row per chunk: the whole chunk id, status, anchor, title and heading path; on a narrow
    screen the anchor, then the status make room, then one `name: value` block per chunk."""
    table = FitTable(
        [
            Col("chunk_id", "id"),
            Col("status", "label", drop_order=2),
            Col("anchor", "id", drop_order=1),
            Col("title", "text"),
            Col("heading_path", "text"),
        ]
    )
    for chunk in chunks:
        table.add_row(
            chunk.chunk_id,
            chunk.status,
            chunk.anchor or "-",
            chunk.title or "-",
            " › ".join(chunk.heading_path) or "-",
        )
    return table


def print_chunk_table(console: Console, chunks: Sequence[ChunkRecord], *, with_content: bool = False) -> None:
    """The chunk table; with `with_content`, each chunk's id and text after it, the text wrapped
    to the width under a 4-space indent."""
    console.print(chunk_table(chunks))
    if not with_content:
        return
    for chunk in chunks:
        console.print("")
        console.print(Text(chunk.chunk_id, style="bold"))
        console.print(hanging_text(console, Text("    " + chunk.content), indent=4))


def print_chunk(console: Console, fields: Mapping[str, object], content: str) -> None:
    """`kb show`: `name: value` lines (a long value wraps between words under its value column, so
    an id stays whole), a blank line, then the text wrapped to the width, never cut."""
    for name, value in fields.items():
        parts = Text(str(value)).wrap(console, max(console.width - FIELD_WIDTH, 20), overflow="fold")
        line = Text(f"{name + ':':<{FIELD_WIDTH}}")
        for number, part in enumerate(parts):
            part.rstrip()
            line.append_text(Text("\n" + " " * FIELD_WIDTH) if number else Text(""))
            line.append_text(part)
        console.print(line)
    console.print("")
    console.print(hanging_text(console, Text(content), indent=0))


def place_table(
    title: str, chunk_ids: Sequence[str], known: Mapping[str, ChunkRecord], doc_titles: Mapping[str, str]
) -> FitTable:
    """What each chunk is: its whole id next to its document's title and headings
    (`chunk_place`; `known`: the KB's chunks by id, `doc_titles`: doc_id → title)."""
    table = FitTable([Col("chunk_id", "id"), Col(PLACE_HEADER, "text")], title=title)
    for chunk_id in dict.fromkeys(chunk_ids):
        chunk = known.get(chunk_id)
        if chunk is None:
            place = "unknown to the KB"
        else:
            place = chunk_place(doc_titles.get(chunk.doc_id), chunk.heading_path, chunk.title) or "—"
            if chunk.status == "deleted":
                place += " (deleted)"
        table.add_row(chunk_id, place)
    return table
