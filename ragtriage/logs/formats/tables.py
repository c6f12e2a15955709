"""Rows of a table export (Parquet, CSV) as the items the JSONL reader yields.

A row becomes one JSON object: empty CSV cells and nulls are left out, at every depth (a Parquet
struct has every member in every row and cannot tell an absent member from a null one; JSONL
producers mostly leave absent ones out, and a null schema field means the same). A nested field
(`rewrite`, `stages`, `feedback`, `citations` and the flat form's lists) given as text is parsed
as JSON, and so is a cell of another column that holds a JSON object or array; numbers given
as text become numbers. The result then takes the same parse, validation,
flagging and quarantine as a JSONL line. A row that cannot become a JSON object is a `BadLine`
naming the row and the field.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Union

import orjson

from ragtriage.logs.log_line import BadLine
from ragtriage.logs.schema import FLAT_STAGE_KEYS

RawItem = tuple[int, Union[bytes, BadLine], bool]
"""`(row number, one JSON object as UTF-8 bytes or the row's `BadLine`, False)`: what
`parse_batches` takes (`formats.dispatch.NumberedLine`)."""

#: Fields whose value is an object or a list: a CSV cell (or a Parquet text column) holds their JSON.
NESTED_FIELDS = frozenset(
    ("rewrite", "stages", "citations", "feedback", "rewritten_queries", "user_feedback", *FLAT_STAGE_KEYS)
)
#: `user_feedback` may also be a bare rating (`down`, `1`), which is not JSON text.
_BARE_ALLOWED = frozenset(("user_feedback",))
#: Text fields of the schema: a cell is their value as is, even when it looks like JSON.
_TEXT_FIELDS = frozenset(
    ("request_id", "ts", "kb", "session", "user", "raw_query", "answer", "pipeline_version", "config_hash")
)
_INT_FIELDS = frozenset(("schema_version",))
_FLOAT_FIELDS = frozenset(("latency_ms", "confidence"))


def row_item(
    row_no: int, values: dict[str, Any], *, text_cells: bool, with_nulls: Collection[str] | None = None
) -> RawItem:
    """One table row as an item for `parse_batches`. `text_cells`: every value is a string (CSV),
    so numbers are converted too; otherwise (Parquet) values keep their types. `with_nulls`: the
    columns that may hold nulls inside a struct or list (None: any); the others need no walk."""
    record: dict[str, Any] = {}
    try:
        for key, value in values.items():
            if value is None or (text_cells and value == ""):
                continue
            if type(value) is str:
                value = _text_value(key, value, text_cells)
            elif (type(value) is dict or type(value) is list) and (with_nulls is None or key in with_nulls):
                value = _without_nulls(value)
            elif type(value) is float and not math.isfinite(value):
                raise _CellError(
                    "nan", key, f"{value} is not a finite number", "write null (or a finite number) instead"
                )
            record[key] = value
    except _CellError as error:
        return _bad(row_no, values, error.kind, error.field, error.reason, error.fix)
    if not record:
        return (row_no, b"", False)  # counted as blank, like an empty line
    try:
        return (row_no, orjson.dumps(record, default=_json_value), False)
    except TypeError as error:
        field = _unserializable_field(record)
        return _bad(
            row_no,
            values,
            "invalid_field",
            field,
            str(error),
            "export the column as text, a number, a list or a struct",
        )


class _CellError(ValueError):
    def __init__(self, kind: str, field: str, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.kind, self.field, self.reason, self.fix = kind, field, reason, fix


def _text_value(key: str, text: str, text_cells: bool) -> Any:
    """A text cell's value: JSON for a nested field (or another column's JSON object or array),
    a number for a numeric field of a CSV; the text itself otherwise.

    Raises:
        _CellError: a nested field that is not JSON, or a numeric cell that is NaN or infinite.
    """
    if key in NESTED_FIELDS:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as error:
            if key in _BARE_ALLOWED:
                return text
            raise _CellError(
                "invalid_json",
                key,
                f"the cell is not valid JSON ({error})",
                'write the cell as JSON, e.g. ["c1", "c2"] or {"chunk_id": "c1", "score": 0.5}',
            ) from None
    if not text_cells:
        return text
    if key not in _TEXT_FIELDS and text[:1] in ("{", "["):
        return _json_or_text(text)
    if key in _INT_FIELDS or key in _FLOAT_FIELDS:
        number = _number(text, key in _INT_FIELDS)
        if type(number) is float and not math.isfinite(number):
            raise _CellError(
                "nan",
                key,
                f"{text} is not a finite number",
                "leave the cell empty (or write a finite number)",
            )
        return number
    return text


def non_finite_path(value: Any, path: str) -> str | None:
    """The dotted path of the first NaN or infinite float inside `value`, or None."""
    if type(value) is float:
        return None if math.isfinite(value) else path
    if type(value) is dict:
        items: Any = value.items()
    elif type(value) is list:
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = non_finite_path(item, f"{path}.{key}")
        if found is not None:
            return found
    return None


def bad_non_finite(row_no: int, values: dict[str, Any], path: str) -> RawItem:
    """The quarantine entry of a row with a NaN or infinite number at `path`."""
    return _bad(
        row_no,
        values,
        "nan",
        path,
        "NaN or an infinite number, which JSON cannot carry",
        "write null (or a finite number) instead",
    )


def _bad(row_no: int, values: dict[str, Any], kind: str, field: str, reason: str, fix: str) -> RawItem:
    raw = orjson.dumps(values, default=_json_value) if values else b""
    return (row_no, BadLine(row_no, kind, f"field '{field}': {reason}", fix, raw), False)


def _json_or_text(text: str) -> Any:
    """A cell of a column the schema does not define: the object or array it holds as JSON, else the text."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _number(text: str, integer: bool) -> Any:
    """`text` as an int or float; unchanged when it is not a number (validation then names the field)."""
    try:
        return int(text) if integer else float(text)
    except ValueError:
        return text


def _without_nulls(value: Any) -> Any:
    """`value` with null members of objects left out, at every depth (a struct column's absent
    fields come as None; JSONL producers leave them out)."""
    if type(value) is dict:
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if type(value) is list:
        return [_without_nulls(item) for item in value]
    return value


def _json_value(value: Any) -> Any:
    """JSON for the values pyarrow gives that orjson does not write itself."""
    if isinstance(value, datetime):  # e.g. pandas' Timestamp for nanosecond columns
        return value.isoformat(timespec="microseconds")
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"a {type(value).__name__} value, which JSON cannot carry")


def _unserializable_field(record: dict[str, Any]) -> str:
    for key, value in record.items():
        try:
            orjson.dumps(value, default=_json_value)
        except TypeError:
            return key
    return "?"
