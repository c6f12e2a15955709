"""Wording helpers for the CLI's output (`ragtriage.wording`, re-exported where the renderers look),
and `label: value` lines that wrap under their label."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from ragtriage.wording import page_range, plural, plural_noun

__all__ = ["field_text", "hanging_text", "page_range", "plural", "plural_noun"]


def field_text(console: Console, label: str, value: str | Text, *, indent: int = 2) -> Text:
    """`label: value` as lines of at most `console.width` cells: wrapped between words (an id is
    never cut; CJK, counted two cells a character, folds between characters), continuation lines
    indented by `indent` spaces so a wrapped list stays under its label. No trailing spaces."""
    line = Text(f"{label}: ", style="bold")
    line.append_text(value if isinstance(value, Text) else Text(value))
    return hanging_text(console, line, indent=indent)


def hanging_text(console: Console, text: str | Text, *, indent: int = 2) -> Text:
    """`text` wrapped as `field_text` wraps a value: continuation lines indented by `indent`
    spaces, leading spaces of the first line kept, no trailing spaces."""
    line = text if isinstance(text, Text) else Text(text)
    lines = line.wrap(console, max(console.width - indent, 20), overflow="fold")
    out = Text()
    for number, part in enumerate(lines):
        part.rstrip()
        if number:
            out.append("\n" + " " * indent)
        out.append_text(part)
    return out
