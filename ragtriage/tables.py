"""Rows of tabular files: JSON Lines, a JSON array, CSV/TSV, plain text lines (each optionally
gzipped) and Parquet; the one reader of `kb import`, table-shaped request logs, eval-set files and
bulk label files.

Text formats stream line by line and Parquet by record batch (a JSON array, one document, is read
whole). Every row carries its position: the line it starts on (text) or its row number (Parquet),
so that each caller's messages name file, line and field. A row that cannot be read is yielded
with its reason, for the caller to quarantine or refuse; a file that cannot be read raises
`InputError`.

CSV is read by the csv module rather than `pyarrow.csv`: pyarrow neither tells the line a row
starts on nor decodes line by line (a GB18030 line in a UTF-8 export, a bad byte named by line).
JSON Lines are read with orjson line by line: pyarrow's JSON reader refuses a whole block for one
bad line, and callers quarantine bad lines one by one.
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import orjson

from ragtriage.errors import InputError

__all__ = ["Row", "TableFile", "json_break", "open_parquet", "parquet_batches", "text_lines"]

BOM = b"\xef\xbb\xbf"
# Vectors, stage lists and long chunks exceed the csv module's 128 KiB cell default.
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclass(slots=True)
class Row:
    """One row and where it starts: a JSON value or `{column: cell}`, or why it cannot be read."""

    line: int
    values: Any = None
    error: str | None = None
    """Set when the row could not be read (`values` is then None)."""
    raw: bytes = b""
    """The row's bytes when it could not be read (for a quarantine)."""
    blank: bool = False
    """A blank line (or a CSV row of empty cells): no values."""


class TableFile:
    """A text table opened for reading bytes (gunzipped when it starts with gzip's magic number)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._raw: IO[bytes] = open(path, "rb")  # noqa: SIM115 (closed by close())
        except OSError as error:
            raise InputError(f"{path}: cannot read ({error.strerror or error}); check the path") from None
        gzipped = self._raw.read(2) == b"\x1f\x8b"
        self._raw.seek(0)
        self.binary: IO[bytes] = cast(IO[bytes], gzip.GzipFile(fileobj=self._raw)) if gzipped else self._raw

    def __enter__(self) -> TableFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._raw.close()

    def position(self) -> int:
        """Bytes of the file (compressed, for a gzip file) read so far."""
        return self._raw.tell()

    def head(self, size: int = 4096) -> bytes:
        """The first `size` bytes without a byte-order mark or leading whitespace (then rewound)."""
        data = self.binary.read(size)
        self.binary.seek(0)
        return data.removeprefix(BOM).lstrip()

    def _lines(self) -> Iterator[tuple[int, bytes]]:
        """Numbered lines as bytes, the byte-order mark of the first dropped."""
        try:
            for line_no, line in enumerate(self.binary, start=1):
                yield line_no, line.removeprefix(BOM) if line_no == 1 else line
        except (OSError, EOFError) as error:
            raise InputError(
                f"{self.path}: cannot read the file ({error}); check that it is complete"
            ) from None

    def jsonl(self, encoding: str | None = None, blanks: bool = False, nan: bool = True) -> Iterator[Row]:
        """One row per line (blank lines only when `blanks`): its JSON value, or why it is not JSON
        (`not UTF-8`, the parser's message). NaN and Infinity are read when `nan` (Python's json
        writes them) so that callers name the field.

        Raises:
            InputError: a line that is not in the given `encoding`.
        """
        for line_no, line in self._lines():
            if not line.strip():
                if blanks:
                    yield Row(line_no, blank=True)
                continue
            if encoding is not None:
                try:
                    line = line.decode(encoding).encode("utf-8")
                except UnicodeDecodeError as error:
                    raise InputError(
                        f"{self.path}:{line_no}: not {encoding} ({error.reason}); fix: pass the file's --encoding"
                    ) from None
            try:
                yield Row(line_no, orjson.loads(line))
            except orjson.JSONDecodeError as error:
                yield _json_fallback(line_no, line, error, nan)

    def json_array(self, hint: str = "") -> Iterator[Row]:
        """The items of a JSON array, each with the line it starts on; `hint` ends the message for
        a file that is JSON but not an array.

        Raises:
            InputError: the text is not a JSON array (its line and the parser's message), or holds
                NaN or Infinity.
        """
        try:
            text = self.binary.read().removeprefix(BOM).decode("utf-8", errors="replace")
        except (OSError, EOFError) as error:
            raise InputError(
                f"{self.path}: cannot read the file ({error}); check that it is complete"
            ) from None
        decoder = json.JSONDecoder(parse_constant=_reject_constant)
        position = len(text) - len(text.lstrip())
        if not text.startswith("[", position):
            try:
                decoder.decode(text)
            except ValueError as error:
                raise _json_error(self.path, text, error) from None
            raise InputError(f"{self.path}:1: expected a JSON array{hint}")
        position += 1
        while True:
            position = _skip_space(text, position)
            if text.startswith("]", position):
                break
            line = text.count("\n", 0, position) + 1
            try:
                item, position = decoder.raw_decode(text, position)
            except ValueError as error:
                raise _json_error(self.path, text, error, line) from None
            yield Row(line, item)
            position = _skip_space(text, position)
            if text.startswith(",", position):
                position += 1
            elif position >= len(text):
                raise _json_error(self.path, text, json.JSONDecodeError("end of data", text, position))
            elif not text.startswith("]", position):
                line = text.count("\n", 0, position) + 1
                raise InputError(f"{self.path}:{line}: expected ',' or ']' after an item; fix the syntax")
        if text[position + 1 :].strip():
            raise InputError(
                f"{self.path}:{text.count(chr(10), 0, position) + 1}: text after the closing ']'; remove it"
            )

    def csv(
        self, delimiter: str = ",", encoding: str = "utf-8", fallback: str | None = "gb18030"
    ) -> tuple[list[str], Iterator[Row]]:
        """The header's column names and the data rows: `{column: cell}`, blank, or the
        reason of a row whose cell count differs from the header's. A line not in `encoding` is read in
        `fallback` when given.

        Raises:
            InputError: the header repeats a column; later, from the rows: a line not in `encoding`
                (no `fallback`), or text that is not CSV.
        """
        lines = _DecodedLines(self, encoding, fallback)
        reader = csv.reader(lines, delimiter=delimiter)
        try:
            columns = [name.strip() for name in next(reader, [])]
        except csv.Error as error:
            raise InputError(f"{self.path}:1: not valid CSV ({error}); fix: repair the file") from None
        repeated = sorted({name for name in columns if columns.count(name) > 1})
        if repeated:
            raise InputError(
                f"{self.path}:1: the header repeats column '{repeated[0]}'; fix: rename one of them"
            )
        return columns, self._csv_rows(reader, lines, columns, delimiter)

    def _csv_rows(
        self, reader: Iterator[list[str]], lines: _DecodedLines, columns: list[str], delimiter: str
    ) -> Iterator[Row]:
        width = len(columns)
        start = lines.line_no + 1
        try:
            for cells in reader:
                row_no, start = start, lines.line_no + 1
                if not any(cell.strip() for cell in cells):
                    yield Row(row_no, blank=True)
                elif len(cells) == width:
                    yield Row(row_no, dict(zip(columns, cells, strict=True)))
                else:
                    reason = f"{len(cells)} cells but the header has {width} columns"
                    yield Row(row_no, None, reason, delimiter.join(cells).encode("utf-8"))
        except csv.Error as error:
            raise InputError(
                f"{self.path}:{lines.line_no}: not valid CSV ({error}); fix: repair the file"
            ) from None


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The non-blank lines of a text file (TSV, TREC), numbered from 1; bad bytes are replaced.

    Raises:
        InputError: the file cannot be read.
    """
    with TableFile(path) as table:
        for line_no, line in table._lines():
            text = line.decode("utf-8", errors="replace").rstrip("\r\n")
            if text.strip():
                yield line_no, text


def open_parquet(path: Path) -> Any:
    """`path` as a `pyarrow.parquet.ParquetFile` (not pre-buffering whole row groups: reading 100k
    chunks then peaks at ~150 MB, not ~400).

    Raises:
        InputError: not a readable Parquet file.
    """
    import pyarrow as pa  # a cold-start cost that only Parquet files pay
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except (pa.ArrowException, OSError) as error:
        raise InputError(f"{path}: not a readable Parquet file ({error}); fix: re-export it") from None


def parquet_batches(path: Path, batch_size: int, parquet: Any = None) -> Iterator[tuple[int, Any]]:
    """`(number of the first row, record batch)` for every batch of `batch_size` rows, rows counted from 1.

    Raises:
        InputError: the file or a row group cannot be read (the rows before it were yielded).
    """
    import pyarrow as pa

    parquet = parquet if parquet is not None else open_parquet(path)
    first = 1
    try:
        for batch in parquet.iter_batches(batch_size=batch_size):
            yield first, batch
            first += batch.num_rows
    except pa.ArrowException as error:
        raise InputError(f"{path}: row {first}: cannot read ({error}); fix: re-export the file") from None


class _DecodedLines:
    """Text lines of a table for the csv module, counted in `line_no`."""

    def __init__(self, table: TableFile, encoding: str, fallback: str | None) -> None:
        self._table, self._encoding, self._fallback = table, encoding, fallback
        self.line_no = 0

    def __iter__(self) -> Iterator[str]:
        for line_no, line in self._table._lines():
            self.line_no = line_no
            try:
                yield line.decode(self._encoding)
            except UnicodeDecodeError as error:
                if self._fallback is not None:
                    yield line.decode(self._fallback, errors="replace")
                    continue
                shown = "UTF-8" if self._encoding.replace("-", "").lower() == "utf8" else self._encoding
                bad = " ".join(f"0x{byte:02X}" for byte in line[error.start : error.start + 1])
                raise InputError(
                    f"{self._table.path}:{self.line_no}: not {shown} (byte {bad}); "
                    "fix: pass the file's --encoding, e.g. --encoding gb18030"
                ) from None


def _json_fallback(line_no: int, line: bytes, error: orjson.JSONDecodeError, nan: bool) -> Row:
    """A line orjson refused: NaN/Infinity read by the json module (refused unless `nan`), else
    why it is not JSON."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return Row(line_no, None, "not UTF-8", line)
    try:
        return Row(line_no, json.loads(line, parse_constant=None if nan else _reject_constant))
    except json.JSONDecodeError:
        return Row(line_no, None, f"not valid JSON ({error})", line)
    except ValueError as constant:
        return Row(line_no, None, str(constant), line)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON; write null or a number")


def _json_error(path: Path, text: str, error: ValueError, line: int = 1) -> InputError:
    if isinstance(error, json.JSONDecodeError):
        _, reason, fix = json_break(text, error)
        return InputError(f"{path}:{error.lineno}: {reason}; {fix}")
    return InputError(f"{path}:{line}: {error}")


def json_break(
    text: bytes | str, error: json.JSONDecodeError, what: str = "JSON document"
) -> tuple[bool, str, str]:
    """`(cut, reason, fix)` for a JSON document (`what` names it) that does not parse: `error` from
    `json` or orjson on `text`, the whole document. Cut short (the parser ran out of text: an
    interrupted download or export, to be fetched again): where the text ends, in bytes and lines.
    Else the byte offset (0-based, in the UTF-8 text without its byte-order mark), line and column
    of the syntax error."""
    decoded = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    position = min(error.pos, len(decoded))
    cut = (
        "end of data" in error.msg
        or error.msg.startswith("Unterminated string")
        or not decoded[position:].strip()
    )
    if cut:
        size = len(text) if isinstance(text, bytes) else len(decoded.encode("utf-8"))
        lines = decoded.count("\n") + (not decoded.endswith("\n"))
        return (
            True,
            f"the {what} is cut short: it breaks off at byte {size:,} (line {lines:,}) in the middle of "
            "a value, its closing brackets missing",
            "the file is incomplete (an interrupted download or export); download or export it again",
        )
    offset = len(decoded[:position].encode("utf-8"))
    return (
        False,
        f"not valid JSON at byte {offset:,} (line {error.lineno:,}, column {error.colno:,}): {error.msg}",
        "fix the syntax there (no trailing commas, double quotes only) or export the file again",
    )


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position
