"""Ingest request-log files into the triage store: streaming, idempotent, flagged, reconciled.

Lines are parsed one by one and written in batches (`settings.logs.batch_size` lines per short
`BEGIN IMMEDIATE` transaction), so memory stays constant and a triager can write in between.
Every line read is counted exactly once:

    read = ingested + duplicates + conflicts + quarantined + blank

A request_id seen again with the same body is a duplicate (nothing changes); with a different
body it is a conflict (the stored request is kept, the new body goes to `log_conflict`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from ragtriage.config import FlaggingSettings
from ragtriage.errors import InputError, LogFormatError
from ragtriage.logs.batch_writer import BatchWriter
from ragtriage.logs.flagging import LineRules
from ragtriage.logs.parse_worker import FORK_AVAILABLE, ParsedBatch, parse_batches, parse_in_process
from ragtriage.logs.reader import iter_raw_lines


class IngestReport(BaseModel):
    """What one ingest did. `read` always equals the sum of the five outcomes."""

    files: list[str] = Field(default_factory=list)
    read: int = 0
    ingested: int = 0
    flagged: int = 0
    """Requests that entered the triage queue (new records, incl. earlier requests flagged as followed up)."""
    duplicates: int = 0
    conflicts: int = 0
    quarantined: int = 0
    blank: int = 0
    recovered: int = 0
    """Ingested lines that were not UTF-8 and were decoded as GB18030."""
    quarantined_by_kind: dict[str, int] = Field(default_factory=dict)
    stopped: bool = False
    seconds: float = 0.0

    def reconciles(self) -> bool:
        """True when every line read is accounted for exactly once."""
        return self.read == self.ingested + self.duplicates + self.conflicts + self.quarantined + self.blank


ProgressCallback = Callable[[int, int | None], None]

#: Files at least this big are parsed in a second process (when `fork` is available): parsing
#: then overlaps the SQLite writes on another core. Smaller files are not worth the process.
PARALLEL_MIN_BYTES = 8 << 20


def ingest_files(
    engine: Engine,
    paths: Sequence[Path],
    *,
    flagging: FlaggingSettings | None = None,
    strict: bool = False,
    batch_size: int = 5000,
    on_progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
    parse_process: bool | None = None,
) -> IngestReport:
    """Ingest JSONL / JSONL.gz files. `on_progress(lines_read, None)` is called after every batch.

    `parse_process`: parse in a forked worker process (True), in this process (False), or
    decide by file size (None: files of `PARALLEL_MIN_BYTES` or more, where `fork` exists).
    Both give identical results; the worker only reads and parses, this process writes.

    Raises:
        LogFormatError: strict mode and a bad line; the lines before it are stored.
        InputError: a file is missing or its gzip stream is corrupt.
    """
    flagging = flagging or FlaggingSettings()
    rules = LineRules(flagging)
    report = IngestReport(files=[str(p) for p in paths])
    started = time.perf_counter()
    try:
        with _PipelinedWriter(BatchWriter(engine, flagging, report)) as writer:
            for path in paths:
                path = Path(path)
                source = str(path.resolve())
                if _use_process(path, parse_process):
                    with parse_in_process(path, rules, strict, batch_size, source) as batches:
                        stopped = _consume(writer, batches, source, str(path), on_progress, should_stop)
                else:
                    batches = parse_batches(iter_raw_lines(path), rules, strict, batch_size, source)
                    stopped = _consume(writer, batches, source, str(path), on_progress, should_stop)
                if stopped:
                    report.stopped = True
                    break
    finally:
        report.seconds = round(time.perf_counter() - started, 3)
    return report


def _use_process(path: Path, parse_process: bool | None) -> bool:
    if parse_process is not None:
        return parse_process and FORK_AVAILABLE
    try:
        return FORK_AVAILABLE and path.stat().st_size >= PARALLEL_MIN_BYTES
    except OSError:
        return False  # the in-process reader reports the missing file


def ingest_lines(
    engine: Engine,
    lines: Iterable[bytes | str],
    *,
    source: str = "<memory>",
    flagging: FlaggingSettings | None = None,
    strict: bool = False,
    batch_size: int = 5000,
) -> IngestReport:
    """Ingest log lines given in memory (tests, generators); `source` names them in messages."""
    flagging = flagging or FlaggingSettings()
    report = IngestReport(files=[source])
    started = time.perf_counter()

    def numbered() -> Iterator[tuple[int, bytes, bool]]:
        for line_no, line in enumerate(lines, start=1):
            yield line_no, line.encode("utf-8") if isinstance(line, str) else line, False

    with _PipelinedWriter(BatchWriter(engine, flagging, report)) as writer:
        batches = parse_batches(numbered(), LineRules(flagging), strict, batch_size, source)
        _consume(writer, batches, source, source, None, None)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _consume(
    writer: _PipelinedWriter,
    batches: Iterable[ParsedBatch],
    source: str,
    display_name: str,
    on_progress: ProgressCallback | None,
    should_stop: Callable[[], bool] | None,
) -> bool:
    """Hand parsed batches to the writer in order; True when `should_stop` asked to stop.

    Raises:
        LogFormatError: a batch ends at a bad line in strict mode (the lines before it are stored).
        InputError: a batch ends at an unreadable gzip tail (the lines before it are stored).
    """
    report = writer.report
    for batch in batches:
        report.read += batch.read
        report.blank += batch.blank
        writer.submit(source, batch)
        if batch.strict_error is not None:
            writer.finish()
            good = batch.rows
            stored = f" ({len(good)} valid line(s) before it in this batch were stored;" if good else " ("
            raise LogFormatError(
                batch.strict_error.describe(display_name)
                + stored
                + " ingest is idempotent: fix the line and re-run)"
            )
        if batch.input_error is not None:
            writer.finish()
            raise InputError(batch.input_error)
        if on_progress is not None:
            on_progress(report.read, None)
        if not batch.final and should_stop is not None and should_stop():
            return True
    return False


class _PipelinedWriter:
    """Runs `BatchWriter.write` in one background thread so that SQLite's work (which releases
    the GIL) overlaps parsing. At most two batches wait, so memory stays bounded; a write error
    is re-raised in the caller's thread at the next `submit` or at `finish`."""

    def __init__(self, writer: BatchWriter) -> None:
        self.writer = writer
        self.report = writer.report
        self._queue: queue.Queue[tuple[str, ParsedBatch] | None] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="ragtriage-ingest-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                if self._error is None:
                    self.writer.write(*item)
            except BaseException as error:  # noqa: B036 (re-raised in the submitting thread)
                self._error = error
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _raise_pending(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def submit(self, source: str, batch: ParsedBatch) -> None:
        """Queue one batch (blocks while two are waiting)."""
        self._raise_pending()
        if batch.rows or batch.bad:
            self._queue.put((source, batch))

    def finish(self) -> None:
        """Wait until every queued batch is written; re-raise a write error."""
        self._queue.join()
        self._raise_pending()

    def __enter__(self) -> _PipelinedWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc_type is None:
                self.finish()
        finally:
            self._queue.put(None)
            self._thread.join()
