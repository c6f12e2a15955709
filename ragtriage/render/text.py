"""Wording helpers for the CLI's output (`ragtriage.wording`, re-exported where the renderers look),
`label: value` lines that wrap under their label, and what a chunk is in words (`chunk_place`)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from ragtriage.wording import page_range, plural, plural_noun

__all__ = [
    "Hanging",
    "PLACE_HEADER",
    "chunk_place",
    "field_text",
    "hanging_text",
    "page_range",
    "plural",
    "plural_noun",
]

PLACE_HEADER = "document › section"
"""Header of the column `chunk_place` fills."""


def field_text(console: Console, label: str, value: str | Text, *, indent: int = 2) -> Text:
    """`label: value` as lines of at most `console.width` cells: wrapped between words (an id is
    never cut; CJK, counted two cells a character, folds between characters), continuation lines
    indented by `indent` spaces so a wrapped list stays under its label. No trailing spaces."""
    line = Text(f"{label}: ", style="bold")
    line.append_text(value if isinstance(value, Text) else Text(value))
    return hanging_text(console, line, indent=indent)


class Hanging:
    """A renderable of `label: value` lines, each wrapped by `hanging_text` at the width it is
    rendered at (a table cell, the screen), continuation lines under the line's text."""

    def __init__(self, text: Text, *, indent: int = 2) -> None:
        self.text = text
        self.indent = indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.text.split("\n", allow_blank=True):
            yield hanging_text(console, line, indent=self.indent, width=options.max_width)


def hanging_text(console: Console, text: str | Text, *, indent: int = 2, width: int | None = None) -> Text:
    """`text` wrapped as `field_text` wraps a value: the first line uses the whole width (the
    console's, or `width` cells),
    continuation lines (and the lines of later paragraphs) are indented by `indent` spaces and
    wrap `indent` cells sooner; leading spaces of the first line kept, no trailing spaces."""
    line = text if isinstance(text, Text) else Text(text)
    available = console.width if width is None else width
    width = max(available, 20)
    narrower = max(available - indent, 20)
    out = Text()
    for number, paragraph in enumerate(line.split("\n", allow_blank=True)):
        parts: list[Text] = []
        paragraph.expand_tabs()  # as `wrap` would, so the first line's length is the paragraph's
        rest = paragraph
        if number == 0:
            first = paragraph.wrap(console, width, overflow="fold")
            if first:
                parts.append(first[0])
                # The wrapped lines partition the paragraph: the rest starts after the first line.
                rest = paragraph[len(first[0].plain) :]
                rest = rest[len(rest.plain) - len(rest.plain.lstrip(" ")) :]
        if rest.plain or not parts:
            parts.extend(rest.wrap(console, narrower, overflow="fold"))
        for part_number, part in enumerate(parts):
            part.rstrip()
            if number or part_number:
                out.append("\n" + " " * indent)
            out.append_text(part)
    return out


def chunk_place(doc_title: str | None, heading_path: Sequence[str], title: str | None = None) -> str:
    """What a chunk is, for a reader its id (e.g. a production UUID) says nothing to: the
    document's title, then the chunk's headings, then its own title when the headings lack it,
    joined with ` › ` (`请假流程说明 › 人事 › 请假 › 代批`); a heading that repeats the part
    before it is left out. Empty when the KB holds none of them."""
    parts: list[str] = [doc_title] if doc_title else []
    for part in [*heading_path, title or ""]:
        part = part.strip()
        if part and part not in parts[-1:] and part != doc_title:
            parts.append(part)
    return " › ".join(parts)
