"""Small wording helpers for user-facing text: counts with the right plural, page ranges.

Pure (no Rich): the headless core words its messages with them too."""

from __future__ import annotations

__all__ = ["page_range", "plural", "plural_noun"]

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
