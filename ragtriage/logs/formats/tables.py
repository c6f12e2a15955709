"""Request logs exported as tables (CSV, Parquet; schema v1 or the flat form), read by
`ragtriage.tables`, each row as the item the JSONL reader yields.

A CSV's header names the fields (`request_id` is required) and gives the delimiter (comma, tab,
semicolon or bar); text is UTF-8, a line that is not is read as GB18030; a row's number is the
line it starts on, the header being line 1. A Parquet row's number counts from 1; nested fields
may be structs and lists or JSON text, timestamps timestamp columns (zone-less ones are UTC).

A row becomes one JSON object: empty CSV cells and nulls are left out, at every depth (a Parquet
struct has every member in every row and cannot tell an absent member from a null one; JSONL
producers mostly leave absent ones out, and a null schema field means the same). A nested field
(`rewrite`, `stages`, `feedback`, `citations` and the flat form's lists) given as text is parsed
as JSON, and so is a cell of another column that holds a JSON object or array; numbers given
as text become numbers. The result then takes the same parse, validation, flagging and
quarantine as a JSONL line. A row that cannot become a JSON object is a `BadLine` naming the row
and the field.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Iterator
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Union

import orjson

from ragtriage.errors import InputError
from ragtriage.logs.log_line import BadLine
from ragtriage.logs.schema import FLAT_STAGE_KEYS
from ragtriage.tables import TableFile, parquet_batches
from ragtriage.wording import quoted

RawItem = tuple[int, Union[bytes, BadLine], bool]
"""`(row number, one JSON object as UTF-8 bytes or the row's `BadLine`, False)`: what
`parse_batches` takes (`formats.dispatch.NumberedLine`)."""

#: Delimiters a CSV export of request logs may use, in the order they are tried.
CSV_DELIMITERS = (",", "\t", ";", "|")
#: Rows per Parquet record batch: memory stays bounded whatever the file's row groups.
PARQUET_BATCH_ROWS = 1000
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


def csv_header(first_line: bytes) -> tuple[str, list[str]] | None:
    """`(delimiter, column names)` when `first_line` is a CSV header with a `request_id` column."""
    try:
        text = first_line.decode("utf-8")
    except UnicodeDecodeError:
        text = first_line.decode("gb18030", errors="replace")
    text = text.removeprefix("\ufeff").rstrip("\r\n")
    for delimiter in CSV_DELIMITERS:
        if delimiter not in text:
            continue
        try:
            names = next(csv.reader([text], delimiter=delimiter))
        except csv.Error:
            continue
        if "request_id" in (name.strip().lower() for name in names):
            return delimiter, [name.strip() for name in names]
    return None


def csv_columns(path: Path) -> tuple[str, list[str]]:
    """`(delimiter, column names)` of a CSV request log.

    Raises:
        InputError: the first line is not a header with a `request_id` column, or repeats a column.
    """
    with TableFile(path) as table:
        first_line = table.binary.readline(1 << 20)
        found = csv_header(first_line)
        if found is None:
            shown = first_line[:120].decode("utf-8", errors="replace").strip()
            raise InputError(
                f"{path}:1: not a CSV header with a request_id column (got {quoted(shown)}); "
                "fix: export the column names as the first row, request_id among them"
            )
        table.binary.seek(0)
        return found[0], table.csv(found[0])[0]


def iter_csv_rows(path: Path) -> Iterator[RawItem]:
    """Yield one item per data row of a CSV request log.

    Raises:
        InputError: no usable header, or the file is not valid CSV from some line on (the rows
            before it were yielded).
    """
    delimiter, _ = csv_columns(path)
    with TableFile(path) as table:
        _, rows = table.csv(delimiter)
        for row in rows:
            if row.error is not None:
                fix = "quote cells that contain the delimiter or a line break"
                yield (row.line, BadLine(row.line, "bad_row", row.error, fix, row.raw), False)
            elif row.blank:
                yield (row.line, b"", False)
            else:
                yield row_item(row.line, row.values, text_cells=True)


def iter_parquet_rows(path: Path) -> Iterator[RawItem]:
    """Yield one item per row of a Parquet request log.

    Raises:
        InputError: the file is not readable Parquet, or a row group cannot be decoded (the rows
            before it were yielded).
    """
    for first, batch in parquet_batches(path, PARQUET_BATCH_ROWS):
        # The row walks that find NaN and drop nulls are only needed where the batch has them.
        check_floats, with_nulls = _scan(batch)
        for row_no, values in enumerate(batch.to_pylist(), start=first):
            found = _first_non_finite(values) if check_floats else None
            if found is not None:
                yield bad_non_finite(row_no, values, found)
            else:
                yield row_item(row_no, values, text_cells=False, with_nulls=with_nulls)


def _first_non_finite(values: dict[str, Any]) -> str | None:
    for key, value in values.items():
        found = non_finite_path(value, key)
        if found is not None:
            return found
    return None


def _scan(batch: Any) -> tuple[bool, set[str]]:
    """Whether a float anywhere in `batch` (in structs and lists too) is NaN or infinite, and the
    columns that have a null at any depth."""
    import pyarrow as pa  # loaded already by the Parquet reader
    import pyarrow.compute as pc

    def walk(array: Any) -> tuple[bool, bool]:
        kind = array.type
        if pa.types.is_floating(kind):
            floats = array.cast(pa.float32()) if pa.types.is_float16(kind) else array
            return bool(pc.any(pc.invert(pc.is_finite(floats))).as_py()), bool(array.null_count)
        if pa.types.is_struct(kind):
            children = [array.field(index) for index in range(kind.num_fields)]
        elif pa.types.is_map(kind):
            children = [array.keys, array.items]
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
            children = [array.flatten()]
        else:
            children = []
        found = [walk(child) for child in children]
        return any(f for f, _ in found), bool(array.null_count) or any(n for _, n in found)

    scanned = {name: walk(column) for name, column in zip(batch.schema.names, batch.columns, strict=True)}
    return any(f for f, _ in scanned.values()), {name for name, (_, n) in scanned.items() if n}
