"""What counts as a change when a chunk row is imported again: values compared in one canonical form.

A team may export the same table as JSONL one day, as CSV (every value text) the next and as
Parquet (typed columns) after that. Re-importing unchanged data in another format must find every
chunk unchanged, so the change fingerprint (`ImportedChunk.source_hash`) compares values, not the
way a format wrote them.

A change is a different content, chunk or document id, title, document title, heading path,
anchor, ordinal, version, `updated_at` instant, product line, status (`status` as text,
`published`/`deleted` as true/false), vector, or metadata value.

Not a change, only another way of writing the same value:
- a number and its shortest text: `7` = `7.0` = `"7"` = `"7.0"`, `0.5` = `"0.5"` (but `"007"`,
  `"1.10"` and `" 7"` stay text, so a change to them still counts); a float32 column compares at
  float32 precision (Parquet `0.1f` = CSV `"0.1"`);
- `true`/`false` and their text in any case (`"True"`, `"false"`);
- null, empty text and an absent column (JSONL writers omit nulls, CSV has empty cells);
- a list or object and its JSON text, whatever the key order or spacing;
- a time and its ISO-8601 text in any offset (`2024-05-01 08:00:00+00` = `2024-05-01T08:00:00Z`;
  a time without offset is UTC), and a time's epoch seconds as text where a time field is mapped.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import re
import struct
import uuid
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from ragtriage.kb.import_rows import RowError, flag

__all__ = ["canonical", "compared_meta"]

# The shortest written forms of a number: no leading zeros, no `+`, no spaces, no `_`.
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z")
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}")
_EXACT_INT = 2**53
_FLOAT32_MAX = 3.4e38
_FLOAT32 = struct.Struct("<f")


def canonical(value: Any) -> Any:
    """`value` in the form the change fingerprint compares (see the module docstring).

    Scalars become text (None for null and empty text); lists stay lists, objects stay objects
    without their null members. Never raises.
    """
    kind = type(value)
    # The types JSON, CSV and pyarrow's to_pylist give, first: this runs for every cell of every row.
    if kind is str:
        return _text(value)
    if value is None:
        return None
    if kind is int:
        return str(value)
    if kind is float:
        return _float(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is list:
        return [canonical(item) for item in value]
    if kind is dict:
        members = {str(key): canonical(item) for key, item in value.items()}
        return {key: item for key, item in members.items() if item is not None}
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, np.floating):
        # numpy prints a float32 as its shortest float32 text ("0.1", not 0.10000000149011612).
        return _float(float(str(value))) if isinstance(value, np.float32) else _float(float(value))
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dt.datetime):
        return _time(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return _float(float(value)) if value.is_finite() else None
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, np.ndarray):
        return [canonical(item) for item in value.tolist()]
    if isinstance(value, Mapping):
        members = {str(key): canonical(item) for key, item in value.items()}
        return {key: item for key, item in members.items() if item is not None}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    return str(value)


def compared_meta(
    values: Mapping[str, Any], skip: Collection[str], flag_columns: Mapping[str, str]
) -> dict[str, Any]:
    """The metadata of a row as the change fingerprint compares it: `canonical` values of the
    columns not in `skip`, null ones left out; a column in `flag_columns` (column → `published` or
    `deleted`) as the true/false its status filter reads, so `t`, `1` and `true` are the same."""
    compared: dict[str, Any] = {}
    for key, value in values.items():
        if key in skip:
            continue
        name = flag_columns.get(key)
        if name is not None and value is not None:
            try:
                value = flag(key, name, value)
            except RowError:
                pass  # not a flag: compared as written (the status filter reports it when it reads it)
        item = canonical(value)
        if item is not None:
            compared[key] = item
    return compared


def _text(text: str) -> Any:
    if not text:
        return None
    first = text[0]
    if first in "{[":
        try:
            parsed = json.loads(text)
        except ValueError:
            return text
        return canonical(parsed) if isinstance(parsed, (dict, list)) else text
    if first in "tTfF" and text.casefold() in ("true", "false"):
        return text.casefold()
    if (first.isascii() and first.isdigit()) or first == "-":
        if _TIME.match(text):
            try:
                return _time(dt.datetime.fromisoformat(text))
            except ValueError:
                return text
        if _NUMBER.match(text):
            return _number_text(text)
    return text


def _number_text(text: str) -> str:
    """The canonical text of a number literal, when `text` is the number's shortest form; else `text`."""
    if text.isdigit() or (text[0] == "-" and text[1:].isdigit()):
        return str(int(text))  # the regex left no leading zeros: the int's own text
    number = float(text)
    if not math.isfinite(number) or str(number) != text:
        return text  # "1.10", "1e5": a writer chose this form, compare it as written
    return _float(number) or text


def _float(number: float) -> str | None:
    if not math.isfinite(number):
        return None
    if number.is_integer() and abs(number) < _EXACT_INT:
        return str(int(number))
    text = str(number)  # a float's shortest round-trip text (Python 3: str is repr)
    # A float32 value read into a Python float (pyarrow's to_pylist) prints long (0.10000000149011612):
    # compare its float32 text. A short text is already the shortest for both widths.
    if len(text) > 9 and abs(number) < _FLOAT32_MAX and _FLOAT32.unpack(_FLOAT32.pack(number))[0] == number:
        text = str(float(str(np.float32(number))))
    return text


def _time(stamp: dt.datetime) -> str:
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.timezone.utc)
    return stamp.astimezone(dt.timezone.utc).isoformat()
