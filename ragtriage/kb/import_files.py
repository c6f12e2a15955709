"""`kb import FILE`: chunk rows from JSONL, CSV or Parquet, streamed in batches (constant memory).

JSONL (`.jsonl`, `.ndjson`, also gzipped) is read line by line with orjson; CSV (`.csv`, `.tsv`,
also gzipped) with the csv module in the given encoding (UTF-8 by default, a byte-order mark is
skipped, empty cells are null); Parquet (`.parquet`, `.pq`) by record batches with pyarrow, the
vector column decoded straight into a float32 matrix. Each source reports progress in its own unit
(bytes for text files, rows for Parquet).
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
import orjson

from ragtriage.errors import InputError
from ragtriage.kb.import_rows import SourceRow
from ragtriage.wording import quoted

__all__ = ["FileSource", "file_format"]

ProgressCallback = Callable[[int, int], None]
_FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def file_format(path: Path) -> str:
    """`jsonl`, `csv` or `parquet` from the file name (a `.gz` suffix is looked through).

    Raises:
        InputError: the suffix is none of these.
    """
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    fmt = _FORMATS.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise InputError(
            f"{path}: kb import reads .jsonl, .csv, .tsv or .parquet files (optionally .gz); "
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
        self.schemaless = self.format == "jsonl"
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
        elif self.format == "csv":
            yield from self._csv(on_progress)
        else:
            yield from self._jsonl(on_progress)

    # ------------------------------------------------------------ JSONL

    def _open_binary(self) -> tuple[IO[bytes], IO[bytes]]:
        raw: IO[bytes] = open(self.path, "rb")  # noqa: SIM115  (closed by the caller)
        if self.path.suffix.lower() == ".gz":
            return raw, cast(IO[bytes], gzip.GzipFile(fileobj=raw))
        return raw, raw

    def _in_batches(
        self, rows: Iterator[SourceRow], raw: IO[bytes], on_progress: ProgressCallback | None
    ) -> Iterator[list[SourceRow]]:
        """`rows` of a text file in lists of `batch_size`; after each full list, progress in bytes
        (`raw.tell()` of the file's size), and the whole size once the rows are done."""
        total = self.path.stat().st_size
        batch: list[SourceRow] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= self.batch_size:
                yield batch
                batch = []
                if on_progress is not None:
                    on_progress(raw.tell(), total)
        if batch:
            yield batch
        if on_progress is not None:
            on_progress(total, total)

    def _jsonl(self, on_progress: ProgressCallback | None) -> Iterator[list[SourceRow]]:
        raw, handle = self._open_binary()
        try:
            yield from self._in_batches(self._jsonl_rows(handle), raw, on_progress)
        except (OSError, EOFError) as error:
            raise InputError(
                f"{self.name}: cannot read the file ({error}); check that it is complete"
            ) from None
        finally:
            raw.close()

    def _jsonl_rows(self, handle: IO[bytes]) -> Iterator[SourceRow]:
        """One row per non-blank line (a leading byte-order mark dropped)."""
        for line_no, line in enumerate(handle, start=1):
            if line_no == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if line.strip():
                yield SourceRow(f"{self.name}:{line_no}", self._json_line(line, line_no))

    def _json_line(self, line: bytes, line_no: int) -> dict[str, Any]:
        where = f"{self.name}:{line_no}"
        if self.encoding is not None:
            try:
                line = line.decode(self.encoding).encode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(
                    f"{where}: not {self.encoding} ({error.reason}); fix: pass the file's --encoding"
                ) from None
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as error:
            if _not_utf8(line):
                raise InputError(
                    f"{where}: not UTF-8; fix: pass --encoding (e.g. --encoding gb18030) or re-export as UTF-8"
                ) from None
            try:
                # Python's json.dumps writes NaN/Infinity, which orjson refuses: read them so that
                # the row checks name the field (a NaN in a vector, a NaN ordinal) instead of the JSON.
                value = json.loads(line)
            except ValueError:
                raise InputError(
                    f"{where}: not valid JSON ({error}); fix: repair or remove this line"
                ) from None
        if not isinstance(value, dict):
            raise InputError(
                f"{where}: a JSONL row must be a JSON object (got {type(value).__name__}); "
                'fix: write one {"chunk_id": …, "content": …} object per line'
            )
        return value

    # ------------------------------------------------------------ CSV

    def _csv(self, on_progress: ProgressCallback | None) -> Iterator[list[SourceRow]]:
        raw, binary = self._open_binary()
        lines = _DecodedLines(binary, self.encoding, self.name)
        delimiter = "\t" if ".tsv" in [s.lower() for s in self.path.suffixes] else ","
        csv.field_size_limit(
            min(sys.maxsize, 2**31 - 1)
        )  # vectors and long chunks exceed the 128 KiB default
        reader = csv.reader(lines, delimiter=delimiter)
        try:
            try:
                header = next(reader)
            except StopIteration:
                raise InputError(
                    f"{self.name}: the file is empty; fix: export a header row and the chunks"
                ) from None
            self.columns = [name.strip() for name in header]
            duplicated = sorted({name for name in self.columns if self.columns.count(name) > 1})
            if duplicated:
                raise InputError(
                    f"{self.name}:1: the header repeats column {quoted(duplicated[0])}; fix: rename one of them"
                )
            yield from self._in_batches(self._csv_rows(reader, lines, self.columns), raw, on_progress)
        except csv.Error as error:
            raise InputError(
                f"{self.name}:{lines.line_no}: not valid CSV ({error}); fix: repair the file"
            ) from None
        finally:
            raw.close()

    def _csv_rows(
        self, reader: Iterator[list[str]], lines: _DecodedLines, columns: list[str]
    ) -> Iterator[SourceRow]:
        """The data rows after the header (blank rows skipped, empty cells null)."""
        width = len(columns)
        for cells in reader:
            if not any(cells):
                continue
            where = f"{self.name}:{lines.line_no}"
            if len(cells) != width:
                raise InputError(
                    f"{where}: {len(cells)} cells but the header has {width} columns; "
                    "fix: quote cells that contain the delimiter or a line break"
                )
            values = {k: (v if v != "" else None) for k, v in zip(columns, cells, strict=True)}
            yield SourceRow(where, values)

    # ------------------------------------------------------------ Parquet

    def _parquet(self, on_progress: ProgressCallback | None) -> Iterator[list[SourceRow]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            # No pre-buffering of whole row groups: reading 100k chunks then peaks at ~150 MB, not ~400.
            parquet = pq.ParquetFile(self.path, pre_buffer=False, buffer_size=1 << 20)
        except (pa.ArrowException, OSError) as error:
            raise InputError(
                f"{self.name}: not a readable Parquet file ({error}); fix: re-export it"
            ) from None
        self.columns = list(parquet.schema_arrow.names)
        total = parquet.metadata.num_rows
        done = 0
        try:
            for record_batch in parquet.iter_batches(batch_size=self.batch_size):
                vectors: list[np.ndarray | None] | None = None
                names = record_batch.schema.names
                if self.vector_field is not None and self.vector_field in names:
                    vectors = _vector_column(record_batch.column(names.index(self.vector_field)))
                    if vectors is not None:
                        record_batch = record_batch.drop_columns([self.vector_field])
                rows = record_batch.to_pylist()
                yield [
                    SourceRow(
                        f"{self.name}: row {done + n + 1}",
                        values,
                        vectors[n] if vectors is not None else None,
                    )
                    for n, values in enumerate(rows)
                ]
                done += len(rows)
                if on_progress is not None:
                    on_progress(done, total)
        except pa.ArrowException as error:
            raise InputError(
                f"{self.name}: row {done + 1}: cannot read ({error}); fix: re-export the file"
            ) from None


def release_reader_memory() -> None:
    """Hand Arrow's cached free pages back to the system (a no-op when pyarrow was never imported).

    Arrow's allocator keeps freed pages for reuse: after a Parquet import about 85 MB per 30k
    chunks stayed resident into the index sync.
    """
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()


def _vector_column(column: Any) -> list[np.ndarray | None] | None:
    """A list column of numbers as float32 rows without a Python float per value (None for nulls).

    None when the column is not a list (JSON text or float32 bytes): the mapper decodes those.
    """
    import pyarrow as pa

    kind = column.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)):
        return None
    if pa.types.is_fixed_size_list(kind):
        lengths = np.full(len(column), kind.list_size, dtype=np.int64)
    else:
        lengths = np.diff(_numbers(column.offsets))
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
        import pyarrow.compute as pc

        array = pc.fill_null(array.cast("float64"), float("nan"))
    dtype = np.dtype(array.type.to_pandas_dtype())
    data = np.frombuffer(array.buffers()[1], dtype=dtype, count=array.offset + len(array))
    return data[array.offset :]


class _DecodedLines:
    """Text lines of a binary file, decoded one by one so that a bad byte is reported with its line."""

    def __init__(self, binary: IO[bytes], encoding: str | None, name: str) -> None:
        self._binary = binary
        self._encoding = encoding or "utf-8"
        self._name = name
        self.line_no = 0

    def __iter__(self) -> Iterator[str]:
        for line in self._binary:
            self.line_no += 1
            if self.line_no == 1 and self._encoding == "utf-8" and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            try:
                yield line.decode(self._encoding)
            except UnicodeDecodeError as error:
                shown = "UTF-8" if self._encoding == "utf-8" else self._encoding
                bad = line[error.start : error.start + 1]
                raise InputError(
                    f"{self._name}:{self.line_no}: not {shown} (byte {quoted(bad)}); "
                    "fix: pass the file's --encoding, e.g. --encoding gb18030"
                ) from None


def _not_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False
