"""`kb import FILE`: chunk rows of a JSONL, CSV/TSV (both optionally gzipped) or Parquet export,
read by `ragtriage.tables` in batches (constant memory), or of a JSON document: an array of chunk
objects, or a LlamaIndex docstore persist file (`docstore.json`, one row per node), read whole.

CSV cells are text in the given `--encoding` (UTF-8 by default), an empty cell is null; a Parquet
vector column is decoded straight into float32 rows. Progress is in bytes for text files and in
rows for Parquet.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ragtriage.errors import InputError
from ragtriage.kb.import_rows import SourceRow
from ragtriage.tables import Row, TableFile, open_parquet, parquet_batches
from ragtriage.wording import quoted

__all__ = ["FileSource", "file_format", "release_reader_memory"]

ProgressCallback = Callable[[int, int], None]
_FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def file_format(path: Path) -> str:
    """`jsonl`, `json`, `csv` or `parquet` from the file name (a `.gz` suffix is looked through).

    Raises:
        InputError: the suffix is none of these.
    """
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    fmt = _FORMATS.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise InputError(
            f"{path}: kb import reads .jsonl, .json, .csv, .tsv or .parquet files (optionally .gz); "
            "rename the file or convert it"
        )
    if fmt == "parquet" and path.suffix.lower() == ".gz":
        raise InputError(f"{path}: Parquet compresses itself; import the .parquet file without gzip")
    return fmt


class FileSource:
    """Rows of one chunk export file. `schemaless` sources (JSONL) name their columns per row."""

    def __init__(
        self,
        path: Path,
        *,
        encoding: str | None = None,
        vector_field: str | None = None,
        batch_size: int = 2000,
    ) -> None:
        if not path.is_file():
            raise InputError(f"{path}: no such file; check the path")
        self.path = path
        self.name = str(path)
        self.format = file_format(path)
        self.encoding = encoding
        self.vector_field = vector_field
        self.batch_size = batch_size
        self.schemaless = self.format in ("jsonl", "json")
        self.columns: list[str] | None = None
        """Known before the first row for CSV and Parquet."""
        if encoding is not None:
            try:
                "".encode(encoding)
            except LookupError:
                raise InputError(
                    f"--encoding: unknown encoding {quoted(encoding)}; e.g. gb18030, utf-16, latin-1"
                ) from None

    def batches(self, on_progress: ProgressCallback | None = None) -> Iterator[list[SourceRow]]:
        """The rows in batches of `batch_size`.

        Raises:
            InputError: unreadable file, a line that is not a JSON object, bytes that are not in the
                encoding (with the line and `--encoding` as the fix).
        """
        if self.format == "parquet":
            yield from self._parquet(on_progress)
            return
        with TableFile(self.path) as table:
            if self.format == "csv":
                rows = self._csv_rows(table)
            elif self.format == "json":
                rows = self._json_rows(table)
            else:
                rows = (self._jsonl_row(row) for row in table.jsonl(self.encoding))
            total = self.path.stat().st_size
            batch: list[SourceRow] = []
            for row in rows:
                batch.append(row)
                if len(batch) >= self.batch_size:
                    yield batch
                    batch = []
                    if on_progress is not None:
                        on_progress(table.position(), total)
            if batch:
                yield batch
            if on_progress is not None:
                on_progress(total, total)

    def _jsonl_row(self, row: Row) -> SourceRow:
        where = f"{self.name}:{row.line}"
        if row.error == "not UTF-8":
            raise InputError(
                f"{where}: not UTF-8; fix: pass --encoding (e.g. --encoding gb18030) or re-export as UTF-8"
            )
        if row.error is not None:
            raise InputError(f"{where}: {row.error}; fix: repair or remove this line")
        if not isinstance(row.values, dict):
            raise InputError(
                f"{where}: a JSONL row must be a JSON object (got {type(row.values).__name__}); "
                'fix: write one {"chunk_id": …, "content": …} object per line'
            )
        return SourceRow(where, row.values)

    def _json_rows(self, table: TableFile) -> Iterable[SourceRow]:
        """The objects of a JSON array, or the nodes of a LlamaIndex docstore (`docstore/data` →
        node id → `__data__`), each named by its line or its node id."""
        if table.head().startswith(b"["):
            for row in table.json_array(hint="; fix: write a JSON array of chunk objects, or JSONL"):
                yield self._jsonl_row(row)
            return
        try:
            text = table.binary.read().decode(self.encoding or "utf-8-sig")
            document = json.loads(text)
        except UnicodeDecodeError:
            raise InputError(
                f"{self.name}: not {self.encoding or 'UTF-8'}; fix: pass --encoding or re-export as UTF-8"
            ) from None
        except json.JSONDecodeError as error:
            raise InputError(
                f"{self.name}:{error.lineno}: not valid JSON ({error.msg} at column {error.colno}, "
                f"character {error.pos}); fix: repair the file or export it again"
            ) from None
        nodes = document.get("docstore/data") if isinstance(document, dict) else None
        if not isinstance(nodes, dict):
            raise InputError(
                f"{self.name}: a JSON file must be an array of chunk objects or a LlamaIndex docstore "
                "(docstore.json, with 'docstore/data'); fix: export one of them, or JSONL (one chunk per line)"
            )
        for node_id, entry in nodes.items():
            node = entry.get("__data__") if isinstance(entry, dict) else None
            where = f"{self.name}: docstore/data {node_id}"
            if not isinstance(node, dict):
                raise InputError(f"{where}: no node object under '__data__'; fix: persist the docstore again")
            yield SourceRow(where, node)

    def _csv_rows(self, table: TableFile) -> Iterable[SourceRow]:
        delimiter = "\t" if ".tsv" in [s.lower() for s in self.path.suffixes] else ","
        self.columns, rows = table.csv(delimiter, self.encoding or "utf-8", fallback=None)
        if not self.columns:
            raise InputError(f"{self.name}: the file is empty; fix: export a header row and the chunks")
        for row in rows:
            where = f"{self.name}:{row.line}"
            if row.error is not None:
                raise InputError(
                    f"{where}: {row.error}; fix: quote cells that contain the delimiter or a line break"
                )
            if not row.blank:
                yield SourceRow(where, {k: (v if v != "" else None) for k, v in row.values.items()})

    def _parquet(self, on_progress: ProgressCallback | None) -> Iterator[list[SourceRow]]:
        parquet = open_parquet(self.path)
        self.columns = list(parquet.schema_arrow.names)
        total = parquet.metadata.num_rows
        for first, record_batch in parquet_batches(self.path, self.batch_size, parquet):
            vectors: list[np.ndarray | None] | None = None
            if self.vector_field is not None and self.vector_field in record_batch.schema.names:
                vectors = _vector_column(record_batch.column(self.vector_field))
                if vectors is not None:
                    record_batch = record_batch.drop_columns([self.vector_field])
            yield [
                SourceRow(
                    f"{self.name}: row {first + n}", values, vectors[n] if vectors is not None else None
                )
                for n, values in enumerate(record_batch.to_pylist())
            ]
            if on_progress is not None:
                on_progress(first - 1 + record_batch.num_rows, total)


def release_reader_memory() -> None:
    """Hand Arrow's cached free pages back to the system.

    Arrow's allocator keeps freed pages for reuse: after a Parquet import about 85 MB per 30k
    chunks stayed resident into the index sync.
    """
    pa.default_memory_pool().release_unused()


def _vector_column(column: Any) -> list[np.ndarray | None] | None:
    """A list column of numbers as float32 rows without a Python float per value (None for nulls).

    None when the column is not a list (JSON text or float32 bytes): the mapper decodes those.
    """
    kind = column.type
    if pa.types.is_fixed_size_list(kind):
        lengths = np.full(len(column), kind.list_size, dtype=np.int64)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        lengths = np.diff(_numbers(column.offsets))
    else:
        return None
    values = column.flatten()
    numeric = pa.types.is_integer(values.type) or pa.types.is_floating(values.type)
    if column.null_count == 0 and len(lengths) and (lengths == lengths[0]).all() and numeric:
        flat = _numbers(values).astype(np.float32, copy=False)
        return list(flat.reshape(len(column), int(lengths[0])))
    return [None if value is None else np.asarray(value, dtype=np.float32) for value in column.to_pylist()]


def _numbers(array: Any) -> np.ndarray:
    """A numeric Arrow array as numpy, read from its data buffer (nulls become NaN).

    Not Arrow's `to_numpy`: its first call imports pandas from C++, which clears any Python error
    raised meanwhile, so a Ctrl-C during that import (a second or two) was lost and the import went on.
    """
    if array.null_count:
        array = pc.fill_null(array.cast("float64"), float("nan"))
    dtype = np.dtype(array.type.to_pandas_dtype())
    data = np.frombuffer(array.buffers()[1], dtype=dtype, count=array.offset + len(array))
    return data[array.offset :]
