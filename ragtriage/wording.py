"""Small wording helpers for user-facing text: counts with the right plural, page ranges, values
quoted inside a message.

Pure (no Rich): the headless core words its messages with them too."""

from __future__ import annotations

import json
import os
import unicodedata
from typing import Any

__all__ = ["page_range", "plural", "plural_noun", "quoted"]

_ES_ENDINGS = ("s", "x", "z", "ch", "sh")


def plural_noun(noun: str, count: int = 2) -> str:
    """`noun` as it reads after `count`: `chunk` for 1, `chunks` otherwise (`query` → `queries`)."""
    if count == 1:
        return noun
    last_word = noun.rsplit(" ", 1)[-1]
    if last_word.endswith("y") and len(last_word) > 1 and last_word[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if last_word.endswith(_ES_ENDINGS):
        return noun + "es"
    return noun + "s"


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """`1 run`, `2 runs`, `0 runs`, `3 queries` (the count with thousands separators)."""
    if count == 1:
        return f"{count:,} {noun}"
    return f"{count:,} {plural_form or plural_noun(noun)}"


def page_range(offset: int, shown: int, total: int, noun: str) -> str:
    """`21–40 of 137 requests`, `none of 0 requests`, `no requests past 137` for a page of a list."""
    if total == 0:
        return f"no {plural_noun(noun)}"
    if shown == 0:
        return f"no {plural_noun(noun)} past {total:,} (offset {offset:,})"
    return f"{offset + 1:,}–{offset + shown:,} of {plural(total, noun)}"


_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(char: str) -> str:
    # Control characters and line separators would break the message's one line (or hide in it);
    # every other character, CJK and full-width spaces included, is shown as it is.
    if unicodedata.category(char) not in ("Cc", "Zl", "Zp"):
        return char
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _cut(text: str, limit: int | None) -> str:
    return text if limit is None or len(text) <= limit else text[:limit] + "…"


def quoted(value: Any, limit: int | None = None) -> str:
    """`value` as a message shows it, never a Python repr.

    Text and paths: `'text'` in plain single quotes, CJK as is, control characters as `\\n`, `\\t`,
    `\\x07`. Numbers bare (`3`, `0.5`), `true`/`false`/`null` as JSON spells them, bytes as hex
    (`0xC3`), lists and objects as compact JSON; anything else (a URL, a named tuple) as quoted
    text. `limit` cuts the shown text at that many characters and marks the cut with `…`."""
    if isinstance(value, str):
        return "'" + "".join(map(_visible, _cut(value, limit))) + "'"
    if isinstance(value, os.PathLike):
        return quoted(os.fsdecode(value), limit)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return _cut(str(value), limit)
    if isinstance(value, (bytes, bytearray)):
        return _cut(" ".join(f"0x{byte:02X}" for byte in value), limit)
    if isinstance(value, (list, dict)) or (isinstance(value, tuple) and not hasattr(value, "_fields")):
        try:
            shown = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
        except (TypeError, ValueError):  # keys JSON cannot hold, or a cycle
            shown = str(value)
        return "".join(map(_visible, _cut(shown, limit)))
    return quoted(str(value), limit)
