"""Request logs exported as CSV (schema v1 or the flat form), streamed with the csv module.

The header names the fields (`request_id` is required); nested fields are JSON text in their
cell (`stages` = `{"bm25": ["c1", "c2"], …}`, `bm25_results` = `["c1", "c2"]`); an empty cell is
a missing value. The delimiter is found in the header (comma, tab, semicolon or bar). Text is
UTF-8 (a byte-order mark is dropped); a line that is not UTF-8 is read as GB18030. A row's
number is the file line it starts on, the header being line 1, as a spreadsheet shows it.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from pathlib import Path

from ragtriage.errors import InputError
from ragtriage.logs.formats.tables import RawItem, row_item
from ragtriage.logs.line_files import DecodedLines, open_binary
from ragtriage.logs.log_line import BadLine
from ragtriage.wording import quoted

#: Delimiters a CSV export of request logs may use, in the order they are tried.
CSV_DELIMITERS = (",", "\t", ";", "|")


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
        InputError: the first line is not a header with a `request_id` column.
    """
    try:
        with open_binary(path) as handle:
            first_line = handle.readline(1 << 20)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    found = csv_header(first_line)
    if found is None:
        shown = first_line[:120].decode("utf-8", errors="replace").strip()
        raise InputError(
            f"{path}:1: not a CSV header with a request_id column (got {quoted(shown)}); "
            "fix: export the column names as the first row, request_id among them"
        )
    delimiter, names = found
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise InputError(
            f"{path}:1: the header repeats column {quoted(duplicated[0])}; fix: rename one of them"
        )
    return delimiter, names


def iter_csv_rows(path: Path) -> Iterator[RawItem]:
    """Yield one item per data row of a CSV request log (see `formats.tables`).

    Raises:
        InputError: no usable header, or the file is not valid CSV from some line on (the rows
            before it were yielded).
    """
    delimiter, names = csv_columns(path)
    width = len(names)
    # Stage lists and answers can exceed the csv module's 128 KiB cell default.
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        handle = open_binary(path)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    with handle:
        lines = DecodedLines(handle)
        reader = csv.reader(lines, delimiter=delimiter)
        try:
            next(reader, None)  # the header, read above
            start = lines.line_no + 1
            for cells in reader:
                row_no, start = start, lines.line_no + 1
                if len(cells) == width:
                    yield row_item(row_no, dict(zip(names, cells, strict=True)), text_cells=True)
                elif not any(cells):
                    yield (row_no, b"", False)
                else:
                    bad = BadLine(
                        row_no,
                        "bad_row",
                        f"{len(cells)} cells but the header has {width} columns",
                        "quote cells that contain the delimiter or a line break",
                        delimiter.join(cells).encode("utf-8"),
                    )
                    yield (row_no, bad, False)
        except csv.Error as error:
            raise InputError(
                f"{path}:{lines.line_no}: not valid CSV ({error}); fix: repair the file "
                "(the rows before it were read)"
            ) from None
