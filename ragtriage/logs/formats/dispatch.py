"""What `ingest_files` needs from the trace formats: the format of each file, and the requests of
the trace-format files as the numbered lines the request-log parser takes.

`plan_files` decides each file's format by its content (or takes `--format`); v1 and flat files
keep the request-log path (a whole JSON document of them is read record by record, never as
JSONL); Parquet and CSV exports are read row by row (`table_lines`); OTLP, Phoenix and
Langfuse files are read together by `trace_lines`, which hands over each
assembled request as a schema-v1 line and each rejected trace or record as a `BadLine`, grouped
by the file they name.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from ragtriage.config.settings import OtelSettings
from ragtriage.errors import InputError
from ragtriage.logs.formats.assemble import Assembled
from ragtriage.logs.formats.detect import FORMATS, TABLE_FORMATS, TRACE_FORMATS, detect, open_bytes
from ragtriage.logs.formats.parallel import read_traces_parallel, worth_parallel
from ragtriage.logs.formats.read import read_traces
from ragtriage.logs.formats.tables import csv_columns, iter_csv_rows, iter_parquet_rows
from ragtriage.logs.log_line import BadLine
from ragtriage.wording import quoted

#: `--format` choices.
FORMAT_CHOICES = ("auto", *FORMATS)

NumberedLine = tuple[int, "bytes | BadLine", bool]
"""`(line_no, raw line or an already rejected record, unterminated)`."""


@dataclass(frozen=True, slots=True)
class PlannedFile:
    """One input file and how it is read."""

    path: Path
    format: str
    layout: str
    """`lines` (JSONL), `document` (one JSON value) or `stream` (JSON values one after another)."""

    @property
    def is_table(self) -> bool:
        """A Parquet or CSV export, read row by row."""
        return self.format in TABLE_FORMATS

    @property
    def is_trace(self) -> bool:
        """Read by the trace formats (together with the other trace files of the ingest)."""
        return self.format in TRACE_FORMATS


def plan_files(paths: Sequence[Path], log_format: str = "auto") -> list[PlannedFile]:
    """Each file's format and layout: detected from its content, or `log_format` for all.

    Raises:
        InputError: an unknown `log_format`, or a file whose content matches no format.
    """
    if log_format not in FORMAT_CHOICES:
        raise InputError(f"unknown log format {quoted(log_format)}; use one of {', '.join(FORMAT_CHOICES)}")
    planned = []
    for path in paths:
        path = Path(path)
        detected, layout = detect(path)
        if log_format != "auto" and detected != log_format:
            if "parquet" in (detected, log_format):
                raise InputError(
                    f"{path}: {'a' if detected == 'parquet' else 'not a'} Parquet file, but "
                    f"--format {log_format} was given; fix: drop --format (auto detects it) or give the right one"
                )
            # Forced: keep the detected layout (a document is never read as JSONL).
            detected = log_format
        if detected == "csv":
            csv_columns(path)  # a file without a usable header stops the ingest before anything is stored
        planned.append(PlannedFile(path, detected, layout))
    return planned


def table_lines(plan: PlannedFile) -> Iterator[NumberedLine]:
    """The rows of a Parquet or CSV file as numbered lines (`formats.tables`)."""
    return iter_parquet_rows(plan.path) if plan.format == "parquet" else iter_csv_rows(plan.path)


def document_lines(path: Path) -> Iterator[NumberedLine]:
    """A whole JSON document of request-log records (an object, an array, or a `{"data": [...]}`
    page) as numbered lines: record N is line N.

    Raises:
        InputError: the file cannot be read.
    """
    with open_bytes(path) as handle:
        text = handle.read()
    try:
        document = orjson.loads(text.removeprefix(b"\xef\xbb\xbf"))
    except orjson.JSONDecodeError as error:
        yield (
            1,
            BadLine(1, "invalid_json", f"not valid JSON: {error}", "fix the JSON document", text[:4096]),
            False,
        )
        return
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        document = document["data"]
    records = document if isinstance(document, list) else [document]
    for number, record in enumerate(records, start=1):
        yield number, orjson.dumps(record), False


def trace_lines(
    files: Sequence[PlannedFile],
    otel: OtelSettings,
    *,
    spill_dir: Path | None = None,
    parallel: bool | None = None,
) -> Iterator[tuple[Path, Iterator[NumberedLine]]]:
    """The requests of all trace-format `files`, as runs of numbered lines per file.

    `parallel`: read with forked processes (`formats.parallel`: same results), in this process
    (False), or by the files' size (None).

    A request's line is the line of its root span; a rejected trace's is the line of the span the
    rejection names. Consume each run before asking for the next.

    Raises:
        InputError: a file cannot be read.
    """
    by_display = {str(f.path): f.path for f in files}
    specs = [(f.path, f.format, f.layout) for f in files]
    read = read_traces_parallel if worth_parallel(specs, parallel) else read_traces
    items = read(specs, otel, spill_dir=spill_dir)
    for display, group in itertools.groupby(items, key=lambda item: item.source):
        yield (
            by_display.get(display, Path(display)),
            (
                (item.line_no, item.body, False)
                if isinstance(item, Assembled)
                else (item.line_no, BadLine(item.line_no, item.kind, item.message, item.fix, item.raw), False)
                for item in group
            ),
        )
