"""`kb import` field mapping: a source row (column → value) becomes a validated `ImportedChunk`.

Every source module (`import_files`, `import_sql`, `import_qdrant`) yields `SourceRow`s; the
`FieldMapper` resolves which column feeds each chunk field (`[kb.import] map`, then `--map`, then a
known framework shape's path (`import_presets`), then a column of the same name), checks each row
and keeps every column it did not map as chunk metadata. A bad row raises `RowError` naming the
source, the row, the field and the fix.

A mapped column may be a path into a column's value: `metadata.source` steps into an object,
`payload._node_content.text` into a JSON string holding one (LlamaIndex's node), `tags.0` into a
list. A JSON string is parsed once per row.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ragtriage.config.settings import IMPORT_FIELDS, KBImportSettings
from ragtriage.errors import InputError
from ragtriage.kb.chunking import content_hash
from ragtriage.kb.import_compare import compared_meta
from ragtriage.kb.import_presets import Preset, recognise
from ragtriage.kb.import_rows import (
    ImportedChunk,
    RowError,
    SourceRow,
    checked_vector,
    decode_vector,
    flag,
    heading_path,
    id_text,
    json_safe,
    text_value,
    timestamp,
    type_name,
    whole_number,
)
from ragtriage.wording import quoted

__all__ = ["FieldMapper", "check_field_name", "parse_map_option", "split_path"]

REQUIRED_FIELDS = ("chunk_id", "content")
#: Share of the rows read whose content equals their title from which the mapping is suspect.
CONTENT_AS_TITLE_SHARE = 0.5
_STATUS_FIELDS = ("status", "published", "deleted")
_NOTHING = object()
"""A path whose key is not in the row's value (as against a key holding null)."""

#: Column names production chunk tables commonly use for each field (compared without case, `-`,
#: `_` or spaces), suggested when the field has no column: names from LlamaIndex, LangChain,
#: Dify/RAGFlow exports and `document_chunks`-style tables.
LIKELY_COLUMNS: dict[str, tuple[str, ...]] = {
    "chunk_id": ("id", "uuid", "chunk_uuid", "node_id", "segment_id", "point_id", "_id"),
    "content": ("text", "chunk_text", "page_content", "body", "chunk", "passage", "content_text"),
    "doc_id": ("document_id", "doc_uuid", "document_uuid", "ref_doc_id", "file_id", "source_id"),
    "doc_title": ("document_title", "document_name", "doc_name", "file_name", "filename"),
    "title": ("section_title", "chunk_title", "section", "heading", "header"),
    "heading_path": ("headings", "section_path", "breadcrumbs", "breadcrumb", "header_path"),
    "anchor": ("section_anchor", "anchor_id", "fragment"),
    "ordinal": ("chunk_index", "position", "chunk_no", "chunk_number", "seq", "idx"),
    "updated_at": ("modified_at", "last_modified", "updated", "update_time", "updated_time"),
    "version": ("doc_version", "document_version", "revision"),
}


def _squeezed(name: str) -> str:
    return "".join(ch for ch in name.casefold() if ch not in "-_ .")


def parse_map_option(values: Iterable[str]) -> dict[str, str]:
    """`["chunk_id=id,doc_id=document_id", …]` → {"chunk_id": "id", "doc_id": "document_id"}.

    Raises:
        InputError: a pair is not `field=column`, names a field `kb import` does not know, or maps a
            field already mapped to another column.
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
                    f"--map: {quoted(pair.strip())} is not field=column; e.g. --map chunk_id=id,content=text"
                )
            check_field_name(name, "--map")
            if mapping.get(name, column) != column:
                # Last-one-wins would import the other column without a word.
                raise InputError(
                    f"--map: field {quoted(name)} is mapped twice ({quoted(mapping[name])} and {quoted(column)}); "
                    "fix: keep one column for it"
                )
            mapping[name] = column
    return mapping


def check_field_name(name: str, where: str) -> None:
    """Raise `InputError` (with the nearest known field) when `name` is not a chunk field."""
    if name not in IMPORT_FIELDS:
        close = difflib.get_close_matches(name, IMPORT_FIELDS, n=1, cutoff=0.5)
        hint = f"; did you mean {quoted(close[0])}?" if close else ";"
        raise InputError(
            f"{where}: unknown chunk field {quoted(name)}{hint} fix: map one of {', '.join(IMPORT_FIELDS)}"
        )


class ColumnPath(NamedTuple):
    """A mapped path on rows of one shape: the column it starts at and the keys below it."""

    path: str
    column: str
    keys: tuple[str, ...] = ()


def split_path(path: str, columns: Collection[str]) -> ColumnPath | None:
    """Where `path` starts among `columns`: the column itself, else the longest column it goes
    into (`payload._node_content.text` → column `payload._node_content`, keys `("text",)`); None
    when no column starts it. Column names may hold dots (Qdrant's `payload.metadata.source`)."""
    if path in columns:
        return ColumnPath(path, path)
    parts = path.split(".")
    for end in range(len(parts) - 1, 0, -1):
        column = ".".join(parts[:end])
        if column in columns:
            return ColumnPath(path, column, tuple(parts[end:]))
    return None


@dataclass(frozen=True)
class _Shape:
    """What rows with one set of columns read: the paths of each field (tried in order), the
    columns the metadata leaves out, and the status columns read as true/false."""

    used: dict[str, tuple[ColumnPath, ...]]
    skip: frozenset[str]
    flags: dict[str, str]
    direct: dict[str, str]
    """Fields read from one column as it is (most of them): field → column, read without `_read`."""
    dropped_inside: dict[str, frozenset[str]]
    """A recognised shape's bookkeeping keys inside an object column (a JSON dump of Qdrant points:
    `payload` → `_node_content`, …), left out of its metadata."""


class FieldMapper:
    """Turns `SourceRow`s of one source into `ImportedChunk`s.

    `explicit` is the merged mapping (settings, then `--map`); a field it does not name is read
    from the paths of the framework shape the first row shows (`import_presets`, reported in
    `recognised`), else from a column of the same name when the source has one (for Qdrant also
    `payload.<field>`, and `id` for `chunk_id`).
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
        self._shapes: dict[tuple[str, ...], _Shape] = {}
        self.preset: Preset | None = None
        """The framework shape recognised on the first row (None: none, or not looked yet)."""
        self._preset_paths: dict[str, list[str]] = {}
        self._preset_dropped: frozenset[str] = frozenset()
        self._looked = False
        self.recognised: dict[str, str] = {}
        """With a `preset`: field → the path its first value was read from (the import report's line)."""
        self._vector_rows = 0
        self.absent_rows = 0
        """Rows that lack the column of an explicitly mapped optional field (read as null, as CSV's
        empty cell; JSONL writers often omit null keys)."""
        self.first_absent: str | None = None
        """The first such row and field: `chunks.jsonl:3: no column 'section_title' for title`."""
        self.mapped_rows = 0
        self.content_as_title = 0
        """Rows mapped whose content equals their title (`mapping_warnings`)."""
        self.dim: int | None = expected_dim[0] if expected_dim else None
        self._dim_owner = f"the configured embedder {expected_dim[1]}" if expected_dim else "earlier rows"

    # ------------------------------------------------------------ columns

    def column_for(self, name: str, columns: Iterable[str]) -> str | None:
        """The column (or path) that feeds chunk field `name` among `columns` (None: unmapped)."""
        paths = self._paths(name, set(columns))
        return paths[0].path if paths else None

    def _paths(self, name: str, present: Collection[str]) -> tuple[ColumnPath, ...]:
        """The paths field `name` is read from on rows with these columns, tried in order: the
        explicit one, else the recognised shape's that start at a column, else the first default
        column there is."""
        if name in self.explicit:
            found = split_path(self.explicit[name], present)
            return (found,) if found is not None else ()
        if name in self._preset_paths:
            paths = tuple(
                found for path in self._preset_paths[name] if (found := split_path(path, present)) is not None
            )
            if paths:
                return paths
        return next(((ColumnPath(c, c),) for c in self._defaults[name] if c in present), ())

    def recognise(self, columns: Collection[str], row: Mapping[str, Any] | None = None) -> None:
        """Look once, on the first row (or a file's header), for a known framework shape."""
        if self._looked:
            return
        self._looked = True
        found = recognise(columns, row)
        if found is not None:
            self.preset, root = found
            self._preset_paths = self.preset.paths(root)
            self._preset_dropped = self.preset.dropped_columns(root)

    def check_columns(self, columns: Sequence[str]) -> None:
        """For a source with a fixed schema: every mapped column exists and the required fields are there.

        Raises:
            InputError: names the missing column, the field it was mapped to, and the columns there are.
        """
        present = set(columns)
        self.recognise(present)
        listed = ", ".join(columns[:30]) + (" …" if len(columns) > 30 else "")
        for name, column in self.explicit.items():
            if split_path(column, present) is None:
                raise InputError(
                    f"{self.source_name}: column {quoted(column)} (mapped to {name}) is not in the source; "
                    f"fix: --map {name}=<one of: {listed}>"
                )
        if self.vector_field is not None and self.vector_field not in present:
            raise InputError(
                f"{self.source_name}: vector column {quoted(self.vector_field)} is not in the source; "
                f"fix: --vector-field <one of: {listed}>"
            )
        missing = [name for name in REQUIRED_FIELDS if self.column_for(name, present) is None]
        if missing:
            pairs = [
                f"{name}={self.likely_column(name, columns) or '<one of the columns>'}" for name in missing
            ]
            raise InputError(
                f"{self.source_name}: no column for the required "
                f"{'field' if len(missing) == 1 else 'fields'} {', '.join(missing)}; "
                f"fix: --map {','.join(pairs)} (columns: {listed})"
            )

    def likely_column(self, name: str, columns: Iterable[str]) -> str | None:
        """A column whose name production tables commonly use for field `name` (`LIKELY_COLUMNS`),
        not already feeding another field or the vectors; None when there is none."""
        taken = {self.column_for(other, columns) for other in IMPORT_FIELDS if other != name}
        taken |= {self.vector_field}
        by_name = {_squeezed(column): column for column in columns if column not in taken}
        return next(
            (by_name[_squeezed(c)] for c in LIKELY_COLUMNS.get(name, ()) if _squeezed(c) in by_name), None
        )

    def suggested_map(self, columns: Iterable[str]) -> dict[str, str]:
        """Optional fields with no column whose likely column is there, kept as metadata instead:
        field → column (what `--map` would add)."""
        columns = list(columns)
        present = set(columns)
        suggested: dict[str, str] = {}
        for name in IMPORT_FIELDS:
            if name in REQUIRED_FIELDS or self.column_for(name, present) is not None:
                continue
            column = self.likely_column(name, columns)
            if column is not None and column not in suggested.values():
                suggested[name] = column
        return suggested

    def check_seen(self) -> None:
        """For a schemaless source, after the last row: every mapped column occurred at least once."""
        seen = sorted(self.seen_columns)
        listed = ", ".join(seen[:30]) + (" …" if len(seen) > 30 else "")
        for name, column in self.explicit.items():
            if split_path(column, self.seen_columns) is None:
                raise InputError(
                    f"{self.source_name}: column {quoted(column)} (mapped to {name}) occurs in no row; "
                    f"fix: --map {name}=<one of: {listed}>"
                )
        if (
            self.vector_field is not None
            and self.vector_field not in self.seen_columns
            and not self._vector_rows
        ):
            raise InputError(
                f"{self.source_name}: vector column {quoted(self.vector_field)} occurs in no row; "
                "fix: --vector-field <the column holding the vectors>"
            )

    # ------------------------------------------------------------ rows

    def map_row(self, row: SourceRow) -> ImportedChunk:
        """Validate and map one row.

        Raises:
            RowError: a required field is missing or empty, or a value or the vector is unusable.
        """
        values = row.values
        where = row.where
        shape = self._shapes.get(tuple(values)) or self._shape(values)
        used, direct = shape.used, shape.direct
        parsed: dict[str, Any] = {}
        nothing_at: list[str] = []

        def get(name: str) -> Any:
            column = direct.get(name)
            if column is not None:
                return values[column]
            paths = used.get(name)
            if paths is None:
                return None
            value, path = self._read(where, values, paths, parsed)
            if path is None:
                if name in self.explicit and name in used and used[name][0].keys:
                    nothing_at.append(name)  # a path into a value that does not hold it
            elif name in self._preset_paths and name not in self.explicit and name not in self.recognised:
                self.recognised[name] = path.path
            return value

        chunk_id = id_text(get("chunk_id"))
        if chunk_id is None:
            raise self._missing(where, "chunk_id", used)
        content = get("content")
        if content is None and ("content" not in used or used["content"][0].keys):
            raise self._missing(where, "content", used, f"chunk {chunk_id}: ")
        if content is None or (isinstance(content, str) and not content.strip()):
            raise RowError(
                where,
                f"chunk {chunk_id}: field content ({self._label('content', used)}) is empty",
                "drop the row from the export or fill its text (empty chunks cannot be retrieved)",
            )
        if not isinstance(content, str):
            raise RowError(
                where,
                f"chunk {chunk_id}: field content ({self._label('content', used)}) is not text "
                f"(got {type_name(content)})",
                "map content to the column holding the chunk text",
            )
        doc_id = id_text(get("doc_id")) or chunk_id
        headings = heading_path(get("heading_path"), where, self.settings.heading_separator)
        doc_title = text_value(get("doc_title"))
        title = text_value(get("title")) or (headings[-1] if headings else None) or doc_title or ""
        excluded_by = self._excluded_by(where, get("status"), get("published"), get("deleted"))
        retrievable = excluded_by is None
        filtered_by = None if excluded_by is None else self._filter_detail(excluded_by, used, get)
        ordinal = self._ordinal(where, get("ordinal"), doc_id)
        vector = row.vector
        self._vector_rows += vector is not None
        if vector is None and self.vector_field is not None:
            vector = decode_vector(where, values.get(self.vector_field), self.vector_field)
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
        meta = {key: json_safe(value) for key, value in values.items() if key not in shape.skip}
        for column, keys in shape.dropped_inside.items():
            if isinstance(meta.get(column), dict):
                meta[column] = {key: value for key, value in meta[column].items() if key not in keys}
        chunk = ImportedChunk(
            where=where,
            chunk_id=chunk_id,
            doc_id=doc_id,
            doc_title=doc_title,
            title=title,
            heading_path=headings,
            anchor=text_value(get("anchor")),
            ordinal=ordinal,
            content=content,
            content_hash=content_hash(content),
            doc_version=text_value(get("version")),
            updated_at=timestamp(where, get("updated_at")),
            product_line=text_value(get("product_line")),
            retrievable=retrievable,
            excluded_by=excluded_by,
            filtered_by=filtered_by,
            meta=meta,
            compared_meta=compared_meta(values, shape.skip, shape.flags),
            vector=vector,
            vector_hash=vector_hash,
        )
        if self.explicit:
            self._note_absent(where, used, nothing_at)
        self.mapped_rows += 1
        self.content_as_title += bool(title) and content.strip() == title.strip()
        return chunk

    def mapping_warnings(self, columns: Sequence[str]) -> list[str]:
        """What makes the mapping look wrong though every row is valid, each with its fix: content
        read from the same column as another field, from a column named like a title while one
        named like the text is left as metadata, or equal to the title on at least
        `CONTENT_AS_TITLE_SHARE` of the rows mapped (`--map content=section_title` imports the titles
        as the text). Call after the last row; `columns`: the source's columns (seen columns for a
        schemaless source)."""
        source = self.column_for("content", columns)
        if source is None:
            return []
        fix = self._content_fix(columns, source)
        mapping = (
            f"--map content={source}" if "content" in self.explicit else f"content (column {quoted(source)})"
        )
        warnings = []
        shared = [
            name for name in IMPORT_FIELDS if name != "content" and self.column_for(name, columns) == source
        ]
        if shared:
            warnings.append(
                f"{mapping} reads the same column as {' and '.join(shared)}: each chunk's text is its "
                f"{shared[0]}; fix: {fix}"
            )
        named = next(
            (
                name
                for name in ("title", "doc_title", "heading_path")
                if _squeezed(source) in {_squeezed(c) for c in (name, *LIKELY_COLUMNS[name])}
            ),
            None,
        )
        text_column = self.likely_column("content", [c for c in columns if c != source])
        if not shared and named is not None and text_column is not None:
            warnings.append(
                f"{mapping} reads a column named like a {named} while {quoted(text_column)}, named like "
                f"the chunk text, is kept as metadata; fix: {fix}"
            )
        rows, same = self.mapped_rows, self.content_as_title
        if not shared and rows and same >= CONTENT_AS_TITLE_SHARE * rows:
            warnings.append(
                f"{mapping}: the content equals the chunk's title on {same:,} of {rows:,} rows, so the "
                f"text imported may be the titles; fix: {fix}"
            )
        return warnings

    def _content_fix(self, columns: Sequence[str], source: str) -> str:
        likely = self.likely_column("content", [c for c in columns if c != source])
        if likely is not None:
            return f"--map content={likely} (or the column that holds the chunk text)"
        return "--map content=COLUMN naming the column that holds the chunk text"

    def _note_absent(self, where: str, used: Mapping[str, object], nothing_at: list[str]) -> None:
        absent = [name for name in self.explicit if name not in used or name in nothing_at]
        if absent:
            self.absent_rows += 1
            if self.first_absent is None:
                name = absent[0]
                what = "column" if name not in used else "value at"
                self.first_absent = f"{where}: no {what} {quoted(self.explicit[name])} for {name}"

    def _read(
        self, where: str, values: Mapping[str, Any], paths: Sequence[ColumnPath], parsed: dict[str, Any]
    ) -> tuple[Any, ColumnPath | None]:
        """The first value (not null) the paths find in the row, and its path; (None, None) when
        none finds one. A JSON string on the way is parsed (once per row: `parsed`).

        Raises:
            RowError: a value on the way starts like a JSON object or list but is not one.
        """
        for path in paths:
            value = values[path.column]
            for depth, key in enumerate(path.keys):
                if isinstance(value, str):
                    if depth == 0 and path.column in parsed:
                        value = parsed[path.column]
                    else:
                        value = self._parsed(where, path, depth, value)
                        if depth == 0:
                            parsed[path.column] = value
                if isinstance(value, Mapping):
                    value = value.get(key, _NOTHING)
                elif isinstance(value, (list, tuple)) and key.isdigit() and int(key) < len(value):
                    value = value[int(key)]
                else:
                    value = _NOTHING
                if value is None or value is _NOTHING:
                    break
            if value is not None and value is not _NOTHING:
                return value, path
        return None, None

    @staticmethod
    def _parsed(where: str, path: ColumnPath, depth: int, text: str) -> Any:
        """A string a path steps into, parsed as JSON (text that is not JSON stays text)."""
        if text.lstrip()[:1] not in ("{", "["):
            return text
        try:
            return json.loads(text)
        except ValueError:
            inside = ".".join((path.column, *path.keys[:depth]))
            raise RowError(
                where,
                f"{quoted(inside)} starts like JSON but is not valid JSON, so {quoted(path.path)} cannot be read",
                "repair that value in the export, or map the field to another column",
            ) from None

    def _shape(self, values: Mapping[str, Any]) -> _Shape:
        """For rows with these columns: the paths of each mapped field, the columns the metadata
        leaves out (columns mapped whole but the status ones, the vector, a recognised shape's
        bookkeeping), and the status columns read as true/false (column → `published`/`deleted`).
        Rows of one source nearly always share their columns: this runs once per shape."""
        self.recognise(values.keys(), values)
        self.seen_columns.update(values)
        used = {name: paths for name in IMPORT_FIELDS if (paths := self._paths(name, values))}
        # Status columns stay in the metadata too: the stored status (published/deleted) drops their
        # values. A column a path steps into stays: only part of it is a field.
        skip = {
            paths[0].column
            for name, paths in used.items()
            if name not in _STATUS_FIELDS and not paths[0].keys
        }
        flags: dict[str, str] = {
            used[name][0].column: name
            for name in ("published", "deleted")
            if name in used and not used[name][0].keys
        }
        dropped_inside: dict[str, frozenset[str]] = {}
        for dropped in self._preset_dropped:
            found = split_path(dropped, values)
            if found is not None and len(found.keys) == 1:
                dropped_inside[found.column] = dropped_inside.get(found.column, frozenset()) | {found.keys[0]}
        skip |= self._preset_dropped
        direct = {
            name: paths[0].column
            for name, paths in used.items()
            if len(paths) == 1 and not paths[0].keys and name not in self._preset_paths
        }
        skip |= {self.vector_field} if self.vector_field else set()
        shape = _Shape(used, frozenset(skip), flags, direct, dropped_inside)
        if len(self._shapes) < 64:
            self._shapes[tuple(values)] = shape
        return shape

    def chunk_id_of(self, row: SourceRow) -> str | None:
        """The row's chunk id if it has a usable one (to keep a rejected row's chunk as it was)."""
        shape = self._shapes.get(tuple(row.values)) or self._shape(row.values)
        try:
            value, _ = self._read(row.where, row.values, shape.used.get("chunk_id", ()), {})
        except RowError:
            return None
        return id_text(value)

    def _label(self, name: str, used: Mapping[str, Sequence[ColumnPath]]) -> str:
        """`column 'text'`, or `path 'payload._node_content.text'` for a path into a column's value."""
        paths = used.get(name)
        if paths:
            return f"{'path' if paths[0].keys else 'column'} {quoted(paths[0].path)}"
        return f"column {quoted(self.explicit.get(name, name))}"

    def _missing(
        self, where: str, name: str, used: Mapping[str, Sequence[ColumnPath]], prefix: str = ""
    ) -> RowError:
        how = f"(--map {name}=COLUMN, or a path into one: COLUMN.KEY)"
        if self.preset is not None and name in self._preset_paths and name not in self.explicit:
            paths = ", ".join(quoted(path) for path in self._preset_paths[name])
            return RowError(
                where,
                f"{prefix}the required field {name} (read as {self.preset.name}: {paths}) is missing or null",
                f"map {name} to the column or path that holds it {how}",
            )
        label = self._label(name, used)
        return RowError(
            where,
            f"{prefix}the required field {name} ({label}) is missing or null",
            f"give every row a value in {label} or map {name} to another column {how}",
        )

    def _ordinal(self, where: str, value: Any, doc_id: str) -> int:
        if value is None:
            # Unmapped: the chunk's position among its document's rows, in source order.
            ordinal = self._ordinals.get(doc_id, -1) + 1
            self._ordinals[doc_id] = ordinal
            return ordinal
        return whole_number(where, "ordinal", value)

    def _excluded_by(self, where: str, status: Any, published: Any, deleted: Any) -> str | None:
        """Which status filter keeps the row out of retrieval (`deleted`, `not published`,
        `status DRAFT`), None when it is retrievable."""
        if deleted is not None and flag(where, "deleted", deleted):
            return "deleted"
        if published is not None and not flag(where, "published", published):
            return "not published"
        if status is not None and str(status).strip().casefold() not in self._retrievable:
            return f"status {str(status).strip()}"
        return None

    @staticmethod
    def _filter_detail(
        excluded_by: str, used: Mapping[str, Sequence[ColumnPath]], get: Callable[[str], Any]
    ) -> str:
        """`excluded_by` in words with the source column and its value, as `kb show` says it:
        `not published (status=DRAFT)`, `deleted at the source (is_deleted=1)`."""
        if excluded_by == "deleted":
            return f"deleted at the source ({used['deleted'][0].path}={get('deleted')})"
        field_name = "published" if excluded_by == "not published" else "status"
        return f"not published ({used[field_name][0].path}={str(get(field_name)).strip()})"

    def _check_vector(self, where: str, chunk_id: str, vector: np.ndarray) -> np.ndarray:
        vector = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
        if self.dim is None:
            self.dim = int(vector.shape[0])
        return checked_vector(where, chunk_id, vector, self.dim, self._dim_owner)
