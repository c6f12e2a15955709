"""Gold as a triage record stores it: chunk ids, or `{chunk_id, grade}` for graded gold."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragtriage.errors import InputError
from ragtriage.wording import quoted

__all__ = ["clean_gold", "gold_ids", "gold_text"]


def clean_gold(items: Sequence[str | Mapping[str, Any]]) -> list[str | dict[str, Any]]:
    """Gold as stored: stripped chunk ids or `{chunk_id, grade}`, first occurrence kept.

    Raises:
        InputError: an empty id, or a graded entry without a chunk id or an integer grade.
    """
    cleaned: list[str | dict[str, Any]] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, Mapping):
            chunk_id = str(item.get("chunk_id") or "").strip()
            grade = item.get("grade", 1)
            if not chunk_id or not isinstance(grade, int) or isinstance(grade, bool):
                raise InputError(
                    f'bad graded gold {quoted(dict(item))}; use {{"chunk_id": "c1", "grade": 2}}'
                )
            entry: str | dict[str, Any] = {"chunk_id": chunk_id, "grade": grade}
        else:
            chunk_id = str(item).strip()
            if not chunk_id:
                raise InputError("empty chunk id given as gold; drop it")
            entry = chunk_id
        if chunk_id not in seen:
            seen.add(chunk_id)
            cleaned.append(entry)
    return cleaned


def gold_ids(items: Iterable[str | Mapping[str, Any]]) -> list[str]:
    """The relevant chunk ids of stored gold, in order: plain ids, and graded entries with a grade
    above 0 reduced to their id (a grade of 0 or less is judged non-relevant, as in the metrics)."""
    found = []
    for item in items:
        if isinstance(item, Mapping):
            grade = item.get("grade", 1)
            judged_irrelevant = isinstance(grade, (int, float)) and grade <= 0
            if item.get("chunk_id") and not judged_irrelevant:
                found.append(str(item["chunk_id"]))
        elif item:
            found.append(str(item))
    return found


def gold_text(items: Iterable[str | Mapping[str, Any]], separator: str) -> str:
    """Stored gold for people: plain ids as they are, graded entries as `CHUNK_ID=GRADE` (the form
    `promote --grade` takes)."""
    return separator.join(
        item if isinstance(item, str) else f"{item.get('chunk_id')}={item.get('grade', 1)}" for item in items
    )
