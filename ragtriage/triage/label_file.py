"""Rows of a bulk label file: JSON Lines, a JSON array, or CSV, told apart by content.

One row per case: `request_id` (required), `label`, `gold`, `note`, `status`, `primary`,
`revision`. Gold chunk ids are production's ids as given: strings, and integers become strings.
In CSV, `gold` is a JSON array (`["c1", "c2"]`) or ids separated by `;`, `,`, `|` or spaces, an
empty cell means "not given", and `[]` means "no gold: the KB has no answer". A row's number is
its JSONL line, its position in a JSON array, or the CSV line it starts on (the header is line 1).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ragtriage.errors import InputError
from ragtriage.tables import TableFile
from ragtriage.wording import quoted

#: Fields a row may have; other columns are ignored (and reported once).
ROW_FIELDS = ("request_id", "label", "gold", "note", "status", "primary", "revision")
_GOLD_SEPARATORS = re.compile(r"[;,|\s]+")
_TRUE = {"true", "yes", "y", "1"}
_FALSE = {"false", "no", "n", "0", ""}


@dataclass(frozen=True)
class LabelRow:
    """One valid row: what to apply to one case."""

    row_no: int
    request_id: str
    label: str | None = None
    gold: list[str | dict[str, Any]] | None = None
    """None: leave the gold as it is; []: the case has no gold (no answer in the KB)."""
    note: str | None = None
    status: str | None = None
    primary: bool = False
    revision: int | None = None


@dataclass(frozen=True)
class RowError:
    """A row that cannot be applied: where, which field, why, and how to fix it."""

    row_no: int
    field: str
    reason: str
    fix: str

    def describe(self, source: str) -> str:
        """`file:row: field: reason; fix: …` (one line)."""
        return f"{source}:{self.row_no}: {self.field}: {self.reason}; fix: {self.fix}"


@dataclass
class LabelFile:
    """The rows of a label file, read lazily; `ignored_columns` is known once reading started."""

    path: Path
    ignored_columns: list[str] = field(default_factory=list)

    def rows(self) -> Iterator[LabelRow | RowError | None]:
        """Each row as a `LabelRow`, a `RowError`, or None for a blank row.

        Raises:
            InputError: the file cannot be read, is a JSON array with a syntax error, or is CSV
                without a `request_id` column.
        """
        with TableFile(self.path) as table:
            head = table.head()[:1]
            if head == b"[":
                for row_no, row in enumerate(table.json_array("; fix: write [{…}, …]"), start=1):
                    yield self._row(row_no, row.values)
            elif head == b"{":
                for row in table.jsonl(blanks=True):
                    if row.blank:
                        yield None
                    elif row.error is not None:
                        yield RowError(row.line, "-", row.error, "write one JSON object per line")
                    else:
                        yield self._row(row.line, row.values)
            else:
                yield from self._csv(table)

    def _csv(self, table: TableFile) -> Iterator[LabelRow | RowError | None]:
        header, rows = table.csv()
        if "request_id" not in header:
            raise InputError(
                f"{self.path}:1: no request_id column (header {quoted(header)}); fix: name the columns "
                f"in the first row, among {', '.join(ROW_FIELDS)}; or write JSON Lines"
            )
        self._note_ignored(header)
        for row in rows:
            if row.error is not None:
                yield RowError(row.line, "-", row.error, "quote cells that contain a comma or a line break")
            elif row.blank:
                yield None
            else:
                yield self._row(row.line, {k: v for k, v in row.values.items() if v.strip() != ""}, text=True)

    def _note_ignored(self, keys: Any) -> None:
        for key in keys:
            if key not in ROW_FIELDS and key not in self.ignored_columns:
                self.ignored_columns.append(key)

    def _row(self, row_no: int, value: Any, *, text: bool = False) -> LabelRow | RowError:
        if not isinstance(value, dict):
            return RowError(row_no, "-", "not a JSON object", 'write {"request_id": …, "label": …}')
        self._note_ignored(value)
        try:
            return LabelRow(
                row_no=row_no,
                request_id=_request_id(value.get("request_id")),
                label=_text(value, "label"),
                gold=_gold(value.get("gold"), text),
                note=_text(value, "note"),
                status=_text(value, "status"),
                primary=_flag(value.get("primary", False)),
                revision=_revision(value.get("revision")),
            )
        except _FieldError as error:
            return RowError(row_no, error.field, error.reason, error.fix)


class _FieldError(ValueError):
    def __init__(self, field_name: str, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.field, self.reason, self.fix = field_name, reason, fix


def _request_id(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise _FieldError(
            "request_id", f"missing or not an id ({quoted(value)})", "give the logged request_id"
        )
    return str(value).strip()


def _text(values: dict[str, Any], name: str) -> str | None:
    value = values.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _FieldError(name, f"not text ({quoted(value)})", f"write {name} as a string")
    return value.strip() or None


def _gold(value: Any, text: bool) -> list[str | dict[str, Any]] | None:
    if value is None:
        return None
    if text and isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                value = orjson.loads(stripped)
            except orjson.JSONDecodeError as error:
                raise _FieldError("gold", f"not a JSON array ({error})", 'write ["c1", "c2"]') from None
        else:
            return [part for part in _GOLD_SEPARATORS.split(stripped) if part]
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        shown = orjson.dumps(value, default=str).decode()
        raise _FieldError("gold", f"not a list of chunk ids ({shown})", 'write ["c1", "c2"]')
    gold: list[str | dict[str, Any]] = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (str, int, dict)):
            raise _FieldError(
                "gold",
                f"{quoted(item)} is not a chunk id",
                "write chunk ids as strings (integers are read as text)",
            )
        gold.append(item if isinstance(item, dict) else str(item).strip())
    return gold


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _FieldError("primary", f"not true or false ({quoted(value)})", "write true or false")


def _revision(value: Any) -> int | None:
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(value)
    except (TypeError, ValueError):
        raise _FieldError(
            "revision", f"not a whole number ({quoted(value)})", "give the revision you saw"
        ) from None
