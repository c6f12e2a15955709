"""`kb import` field mapping: a source row (column → value) becomes a validated `ImportedChunk`.

Every source module (`import_files`, `import_sql`, `import_qdrant`) yields `SourceRow`s; the
`FieldMapper` resolves which column feeds each chunk field (`[kb.import] map`, then `--map`, then a
column of the same name), checks each row and keeps every column it did not map as chunk metadata.
A bad row raises `RowError` naming the source, the row, the field and the fix.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import difflib
import hashlib
import json
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragtriage.config import IMPORT_FIELDS, KBImportSettings
from ragtriage.errors import InputError
from ragtriage.kb.chunking import content_hash

__all__ = [
    "FieldMapper",
    "ImportedChunk",
    "RowError",
    "SourceRow",
    "parse_map_option",
]

REQUIRED_FIELDS = ("chunk_id", "content")
_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0", ""}


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
    meta: dict[str, Any] = field(default_factory=dict)
    vector: np.ndarray | None = None
    vector_hash: str | None = None

    def source_hash(self) -> str:
        """sha256 over every mapped field, the metadata and the vector hash (unchanged detection)."""
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
            self.meta,
            self.vector_hash,
        ]
        text = json.dumps(payload, ensure_ascii=False, sort_keys=True, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RowError(InputError):
    """One row that cannot be imported: `where: reason; fix: …`."""

    def __init__(self, where: str, reason: str, fix: str) -> None:
        self.where = where
        self.reason = reason
        self.fix = fix
        super().__init__(f"{where}: {reason}; fix: {fix}")


def parse_map_option(values: Iterable[str]) -> dict[str, str]:
    """`["chunk_id=id,doc_id=document_id", …]` → {"chunk_id": "id", "doc_id": "document_id"}.

    Raises:
        InputError: a pair is not `field=column`, or names a field `kb import` does not know.
    """
    mapping: dict[str, str] = {}
    for value in values:
        for pair in value.split(","):
            if not pair.strip():
                continue
            name, sep, column = pair.partition("=")
            name, column = name.strip(), column.strip()
            if not sep or not name or not column:
                raise InputError(
                    f"--map: {pair.strip()!r} is not field=column; e.g. --map chunk_id=id,content=text"
                )
            check_field_name(name, "--map")
            mapping[name] = column
    return mapping


def check_field_name(name: str, where: str) -> None:
    """Raise `InputError` (with the nearest known field) when `name` is not a chunk field."""
    if name not in IMPORT_FIELDS:
        close = difflib.get_close_matches(name, IMPORT_FIELDS, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ";"
        raise InputError(
            f"{where}: unknown chunk field {name!r}{hint} fix: map one of {', '.join(IMPORT_FIELDS)}"
        )


class FieldMapper:
    """Turns `SourceRow`s of one source into `ImportedChunk`s.

    `explicit` is the merged mapping (settings, then `--map`); a field it does not name is read from
    a column of the same name when the source has one (for Qdrant also `payload.<field>`, and `id`
    for `chunk_id`).
    """

    def __init__(
        self,
        settings: KBImportSettings,
        explicit: Mapping[str, str],
        *,
        source_name: str,
        vector_field: str | None,
        defaults: Mapping[str, Sequence[str]] | None = None,
        expected_dim: tuple[int, str] | None = None,
    ) -> None:
        for name in explicit:
            check_field_name(name, "--map")
        self.settings = settings
        self.explicit = dict(explicit)
        self.source_name = source_name
        self.vector_field = vector_field
        self._defaults = {name: [name, *(defaults or {}).get(name, [])] for name in IMPORT_FIELDS}
        self._retrievable = {status.casefold() for status in settings.retrievable_statuses}
        self._ordinals: dict[str, int] = {}
        self.seen_columns: set[str] = set()
        self._vector_rows = 0
        self.dim: int | None = expected_dim[0] if expected_dim else None
        self._dim_owner = f"the configured embedder {expected_dim[1]}" if expected_dim else "earlier rows"

    # ------------------------------------------------------------ columns

    def column_for(self, name: str, columns: Iterable[str]) -> str | None:
        """The column that feeds chunk field `name` among `columns` (None: the field is unmapped)."""
        present = set(columns)
        if name in self.explicit:
            return self.explicit[name] if self.explicit[name] in present else None
        return next((column for column in self._defaults[name] if column in present), None)

    def check_columns(self, columns: Sequence[str]) -> None:
        """For a source with a fixed schema: every mapped column exists and the required fields are there.

        Raises:
            InputError: names the missing column, the field it was mapped to, and the columns there are.
        """
        present = set(columns)
        listed = ", ".join(columns[:30]) + (" …" if len(columns) > 30 else "")
        for name, column in self.explicit.items():
            if column not in present:
                raise InputError(
                    f"{self.source_name}: column {column!r} (mapped to {name}) is not in the source; "
                    f"fix: --map {name}=<one of: {listed}>"
                )
        if self.vector_field is not None and self.vector_field not in present:
            raise InputError(
                f"{self.source_name}: vector column {self.vector_field!r} is not in the source; "
                f"fix: --vector-field <one of: {listed}>"
            )
        for name in REQUIRED_FIELDS:
            if self.column_for(name, present) is None:
                raise InputError(
                    f"{self.source_name}: no column for the required field {name}; "
                    f"fix: --map {name}=<one of: {listed}>"
                )

    def check_seen(self) -> None:
        """For a schemaless source, after the last row: every mapped column occurred at least once."""
        for name, column in self.explicit.items():
            if column not in self.seen_columns:
                raise InputError(
                    f"{self.source_name}: column {column!r} (mapped to {name}) occurs in no row; "
                    f"fix: --map {name}=<a column the rows have>"
                )
        if (
            self.vector_field is not None
            and self.vector_field not in self.seen_columns
            and not self._vector_rows
        ):
            raise InputError(
                f"{self.source_name}: vector column {self.vector_field!r} occurs in no row; "
                "fix: --vector-field <the column holding the vectors>"
            )

    # ------------------------------------------------------------ rows

    def map_row(self, row: SourceRow) -> ImportedChunk:
        """Validate and map one row.

        Raises:
            RowError: a required field is missing or empty, or a value or the vector is unusable.
        """
        values = row.values
        self.seen_columns.update(values)
        used: dict[str, str] = {}
        for name in IMPORT_FIELDS:
            column = self.column_for(name, values)
            if column is not None:
                used[name] = column

        def get(name: str) -> Any:
            column = used.get(name)
            return None if column is None else values[column]

        where = row.where
        chunk_id = _id_text(get("chunk_id"))
        if chunk_id is None:
            raise self._missing(where, "chunk_id", used)
        content = get("content")
        if content is None or (isinstance(content, str) and not content.strip()):
            raise RowError(
                where,
                f"chunk {chunk_id}: field content ({self._column_label('content', used)}) is empty",
                "drop the row from the export or fill its text (empty chunks cannot be retrieved)",
            )
        if not isinstance(content, str):
            raise RowError(
                where,
                f"chunk {chunk_id}: field content ({self._column_label('content', used)}) is not text "
                f"(got {_type_name(content)})",
                "map content to the column holding the chunk text",
            )
        doc_id = _id_text(get("doc_id")) or chunk_id
        heading_path = self._heading_path(get("heading_path"), where)
        doc_title = _text(get("doc_title"))
        title = _text(get("title")) or (heading_path[-1] if heading_path else None) or doc_title or ""
        retrievable = self._retrievable_row(where, get("status"), get("published"), get("deleted"))
        ordinal = self._ordinal(where, get("ordinal"), doc_id)
        vector = row.vector
        self._vector_rows += vector is not None
        if vector is None and self.vector_field is not None:
            vector = self._vector(where, values.get(self.vector_field))
        vector_hash = None
        if vector is not None:
            vector = self._check_vector(where, chunk_id, vector)
            vector_hash = hashlib.sha256(vector.tobytes()).hexdigest()
        elif self.vector_field is not None and retrievable:
            raise RowError(
                where,
                f"chunk {chunk_id}: vector field {self.vector_field} is empty",
                "export a vector for every retrievable chunk, or import without --vector-field "
                "to embed them all with the configured embedder",
            )
        # Status columns stay in the metadata too: the stored status (published/deleted) drops their values.
        skip = {column for name, column in used.items() if name not in ("status", "published", "deleted")}
        skip |= {self.vector_field} if self.vector_field else set()
        meta = {key: _json_safe(value) for key, value in values.items() if key not in skip}
        return ImportedChunk(
            where=where,
            chunk_id=chunk_id,
            doc_id=doc_id,
            doc_title=doc_title,
            title=title,
            heading_path=heading_path,
            anchor=_text(get("anchor")),
            ordinal=ordinal,
            content=content,
            content_hash=content_hash(content),
            doc_version=_text(get("version")),
            updated_at=self._timestamp(where, get("updated_at")),
            product_line=_text(get("product_line")),
            retrievable=retrievable,
            meta=meta,
            vector=vector,
            vector_hash=vector_hash,
        )

    def chunk_id_of(self, row: SourceRow) -> str | None:
        """The row's chunk id if it has a usable one (to keep a rejected row's chunk as it was)."""
        column = self.column_for("chunk_id", row.values)
        return None if column is None else _id_text(row.values[column])

    def _column_label(self, name: str, used: Mapping[str, str]) -> str:
        return f"column {used.get(name, self.explicit.get(name, name))!r}"

    def _missing(self, where: str, name: str, used: Mapping[str, str]) -> RowError:
        column = used.get(name) or self.explicit.get(name) or name
        return RowError(
            where,
            f"the required field {name} (column {column!r}) is missing or null",
            f"give every row a {column} or map {name} to another column (--map {name}=COLUMN)",
        )

    def _heading_path(self, value: Any, where: str) -> list[str]:
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
                        f"heading_path {text[:40]!r} starts like a JSON list but is not one",
                        "export it as a JSON list of strings or as one string with "
                        "[kb.import] heading_separator between the headings",
                    )
            else:
                return [part.strip() for part in text.split(self.settings.heading_separator) if part.strip()]
        if isinstance(value, (list, tuple)):
            return [str(part).strip() for part in value if part is not None and str(part).strip()]
        raise RowError(
            where,
            f"heading_path is a {_type_name(value)}",
            "export it as a list of strings or one string with [kb.import] heading_separator",
        )

    def _ordinal(self, where: str, value: Any, doc_id: str) -> int:
        if value is None:
            # Unmapped: the chunk's position among its document's rows, in source order.
            ordinal = self._ordinals.get(doc_id, -1) + 1
            self._ordinals[doc_id] = ordinal
            return ordinal
        try:
            if isinstance(value, bool):
                raise ValueError
            ordinal = int(value)
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
        except (TypeError, ValueError):
            raise RowError(
                where,
                f"ordinal {value!r} is not a whole number",
                "map ordinal to the chunk's position column",
            ) from None
        return ordinal

    def _retrievable_row(self, where: str, status: Any, published: Any, deleted: Any) -> bool:
        if deleted is not None and _flag(where, "deleted", deleted):
            return False
        if published is not None and not _flag(where, "published", published):
            return False
        if status is not None and str(status).strip().casefold() not in self._retrievable:
            return False
        return True

    def _timestamp(self, where: str, value: Any) -> dt.datetime | None:
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
            try:
                stamp = dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
            except ValueError:
                raise RowError(
                    where,
                    f"updated_at {str(value)[:40]!r} is not an ISO-8601 time or epoch seconds",
                    "export it as 2024-05-01T08:00:00+00:00 (or drop the updated_at mapping)",
                ) from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.timezone.utc)
        return stamp.astimezone(dt.timezone.utc)

    def _vector(self, where: str, value: Any) -> np.ndarray | None:
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
                    f"vector field {self.vector_field} is not a list of numbers ({text[:30]!r}…)",
                    "export vectors as a JSON list of numbers",
                ) from None
        if isinstance(value, (bytes, bytearray, memoryview)):
            raw = bytes(value)
            if len(raw) % 4:
                raise RowError(
                    where,
                    f"vector field {self.vector_field} holds {len(raw)} bytes, not float32 values",
                    "export vectors as a JSON list or as little-endian float32 bytes",
                )
            return np.frombuffer(raw, dtype="<f4").astype(np.float32)
        try:
            return np.asarray(value, dtype=np.float32).reshape(-1)
        except (TypeError, ValueError):
            raise RowError(
                where,
                f"vector field {self.vector_field} is not a list of numbers",
                "export vectors as a JSON list of numbers",
            ) from None

    def _check_vector(self, where: str, chunk_id: str, vector: np.ndarray) -> np.ndarray:
        vector = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
        if self.dim is None:
            self.dim = int(vector.shape[0])
        if vector.shape[0] != self.dim:
            raise RowError(
                where,
                f"chunk {chunk_id}: the vector has {vector.shape[0]} dimensions but {self._dim_owner} "
                f"has {self.dim}",
                "export vectors from one model only, and configure [embedder] as the model that made them",
            )
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


def _id_text(value: Any) -> str | None:
    """Ids are kept verbatim as text: 42 → "42", a UUID object → its canonical string."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="replace")
    text = str(value)
    return text if text.strip() else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _flag(where: str, name: str, value: Any) -> bool:
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
        where, f"{name} {str(value)[:20]!r} is not true/false", f"export {name} as true/false or 1/0"
    )


def _type_name(value: Any) -> str:
    return {dict: "JSON object", list: "list", int: "number", float: "number", bool: "boolean"}.get(
        type(value), type(value).__name__
    )


def _json_safe(value: Any) -> Any:
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
        return [_json_safe(item) for item in value.tolist()]
    if isinstance(value, np.generic):
        return _json_safe(value.item())
    if isinstance(value, Mapping):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_json_safe(item) for item in value]
    return str(value)
