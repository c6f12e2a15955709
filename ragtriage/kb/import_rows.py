"""The rows of `kb import`: what a source yields (`SourceRow`), what the mapper makes of it
(`ImportedChunk`), a bad row (`RowError`), and the conversions of a cell into a chunk field's value
(ids, flags, times, heading paths, vectors, metadata as JSON), each naming the row it fails on.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragtriage.errors import InputError
from ragtriage.wording import quoted

# `json.dumps(…, ensure_ascii=False, sort_keys=True, default=str)`, without a new encoder per row.
_SOURCE_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str).encode


@dataclass
class SourceRow:
    """One row as a source read it: where it is (`file:line`, `row N`, `point ID`) and its columns."""

    where: str
    values: dict[str, Any]
    vector: np.ndarray | None = None
    """The vector, when the source decoded it already (Parquet list columns)."""


@dataclass
class ImportedChunk:
    """One mapped, validated row: the chunk fields, its metadata and its vector."""

    where: str
    chunk_id: str
    doc_id: str
    doc_title: str | None
    title: str
    heading_path: list[str]
    anchor: str | None
    ordinal: int
    content: str
    content_hash: str
    doc_version: str | None
    updated_at: dt.datetime | None
    product_line: str | None
    retrievable: bool
    """Passes the status filters (`status`, `published`, `deleted`)."""
    excluded_by: str | None = None
    """The filter that keeps it out (`deleted`, `not published`, `status DRAFT`); None when retrievable."""
    filtered_by: str | None = None
    """`excluded_by` with the source column and value, e.g. `not published (status=DRAFT)` (`kb show`)."""
    meta: dict[str, Any] = field(default_factory=dict)
    compared_meta: dict[str, Any] | None = None
    """The metadata as the change fingerprint compares it (`import_compare.compared_meta`); None:
    `meta` as it is."""
    vector: np.ndarray | None = None
    vector_hash: str | None = None
    index_hash: str | None = None
    """`kb_chunks.index_hash` of the chunk, once it is written (for the indexes)."""
    _source_hash: str | None = field(default=None, repr=False, compare=False)

    def source_hash(self) -> str:
        """sha256 over every mapped field, the metadata and the vector hash (unchanged detection).

        The same values written by another format hash the same: the mapped fields are parsed
        (ids and titles as text, ordinal as int, `updated_at` as a UTC instant, status as
        retrievable or not) and the metadata is compared in `import_compare`'s canonical form,
        which also says what counts as a change.
        """
        if self._source_hash is None:
            self._source_hash = self._compute_source_hash()
        return self._source_hash

    def _compute_source_hash(self) -> str:
        payload = [
            self.chunk_id,
            self.doc_id,
            self.doc_title,
            self.title,
            self.heading_path,
            self.anchor,
            self.ordinal,
            self.content_hash,
            self.doc_version,
            self.updated_at.isoformat() if self.updated_at else None,
            self.product_line,
            self.retrievable,
            self.meta if self.compared_meta is None else self.compared_meta,
            self.vector_hash,
        ]
        text = _SOURCE_JSON(payload)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RowError(InputError):
    """One row that cannot be imported: `where: reason; fix: …`."""

    def __init__(self, where: str, reason: str, fix: str) -> None:
        self.where = where
        self.reason = reason
        self.fix = fix
        super().__init__(f"{where}: {reason}; fix: {fix}")


_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0", ""}
_EPOCH = re.compile(r"[0-9]+(?:\.[0-9]+)?\Z")


def heading_path(value: Any, where: str, separator: str) -> list[str]:
    """A heading path from a list, a JSON list string, or one string split at `separator`."""
    if value is None:
        return []
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                value = None
            if not isinstance(value, list):
                raise RowError(
                    where,
                    f"heading_path {quoted(text, 40)} starts like a JSON list but is not one",
                    "export it as a JSON list of strings or as one string with "
                    "[kb.import] heading_separator between the headings",
                )
        else:
            return [part.strip() for part in text.split(separator.strip() or separator) if part.strip()]
    if isinstance(value, (list, tuple)):
        return [str(part).strip() for part in value if part is not None and str(part).strip()]
    raise RowError(
        where,
        f"heading_path is a {type_name(value)}",
        "export it as a list of strings or one string with [kb.import] heading_separator",
    )


def timestamp(where: str, value: Any) -> dt.datetime | None:
    """An aware UTC time from a datetime, a date, ISO-8601 text or epoch seconds (milliseconds)."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        stamp = value
    elif isinstance(value, dt.date):
        stamp = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        # Epoch seconds, or milliseconds when the number is too large to be seconds.
        seconds = value / 1000 if value > 1e11 else value
        stamp = dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc)
    else:
        text = str(value).strip()
        try:
            stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            if _EPOCH.match(text):  # epoch seconds written as text (a CSV of an integer column)
                return timestamp(where, float(text))
            raise RowError(
                where,
                f"updated_at {quoted(str(value), 40)} is not an ISO-8601 time or epoch seconds",
                "export it as 2024-05-01T08:00:00+00:00 (or drop the updated_at mapping)",
            ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.timezone.utc)
    return stamp.astimezone(dt.timezone.utc)


def decode_vector(where: str, value: Any, field: str | None) -> np.ndarray | None:
    """A float32 vector from a list, JSON or space-separated text, or little-endian float32 bytes."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            value = (
                json.loads(text)
                if text.startswith("[")
                else [float(x) for x in text.replace(",", " ").split()]
            )
        except ValueError:
            raise RowError(
                where,
                f"vector field {field} is not a list of numbers (starts {quoted(text, 30)})",
                "export vectors as a JSON list of numbers",
            ) from None
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) % 4:
            raise RowError(
                where,
                f"vector field {field} holds {len(raw)} bytes, not float32 values",
                "export vectors as a JSON list or as little-endian float32 bytes",
            )
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    try:
        return np.asarray(value, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError):
        raise RowError(
            where,
            f"vector field {field} is not a list of numbers",
            "export vectors as a JSON list of numbers",
        ) from None


def checked_vector(where: str, chunk_id: str, vector: np.ndarray, dim: int, dim_owner: str) -> np.ndarray:
    """`vector` (float32, one dimension) when it has `dim` values, all finite and not all zero.

    Raises:
        RowError: another dimension (`dim_owner` is who set `dim`), NaN or infinity, or all zeros.
    """
    if vector.shape[0] != dim:
        raise RowError(
            where,
            f"chunk {chunk_id}: the vector has {vector.shape[0]} dimensions but {dim_owner} has {dim}",
            "export vectors from one model only, and configure [embedder] as the model that made them",
        )
    # One dot product screens the row (NaN/inf propagate, an all-zero vector gives 0); the two
    # full scans that name the fault run only for a vector that fails it.
    norm2 = float(np.dot(vector, vector))
    if math.isfinite(norm2) and norm2 != 0.0:
        return vector
    if not np.isfinite(vector).all():
        raise RowError(
            where,
            f"chunk {chunk_id}: the vector contains NaN or infinity",
            "re-embed this chunk in production",
        )
    if not vector.any():
        raise RowError(
            where,
            f"chunk {chunk_id}: the vector is all zeros (cosine similarity is undefined)",
            "re-embed this chunk in production",
        )
    return vector


def id_text(value: Any) -> str | None:
    """Ids are kept verbatim as text: 42 → "42", a UUID object → its canonical string."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="replace")
    text = str(value)
    return text if text.strip() else None


def text_value(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def whole_number(where: str, name: str, value: Any) -> int:
    """An int from a number or its text; `3.0` and `"3.0"` are 3 (pandas writes an integer column
    holding nulls as floats)."""
    try:
        if isinstance(value, (bool, np.bool_)):
            raise ValueError
        parsed = value
        if isinstance(value, str):
            text = value.strip()
            parsed = int(text) if text.lstrip("-").isdigit() else float(text)
        number = int(parsed)
        if isinstance(parsed, float) and not parsed.is_integer():
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise RowError(
            where,
            f"{name} {quoted(value, 20)} is not a whole number",
            f"map {name} to the chunk's position column",
        ) from None
    return number


def flag(where: str, name: str, value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0
    text = str(value).strip().casefold()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise RowError(
        where,
        f"{name} {quoted(str(value), 20)} is not true/false",
        f"export {name} as true/false or 1/0",
    )


def type_name(value: Any) -> str:
    return {dict: "JSON object", list: "list", int: "number", float: "number", bool: "boolean"}.get(
        type(value), type(value).__name__
    )


def json_safe(value: Any) -> Any:
    """A metadata value as JSON: times → ISO text, decimals → numbers, bytes → base64, NaN → None."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, np.ndarray):
        return [json_safe(item) for item in value.tolist()]
    if isinstance(value, np.generic):
        return json_safe(value.item())
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_safe(item) for item in value]
    return str(value)
