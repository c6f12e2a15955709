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
from ragtriage.logs.reader import BadLine, LogLine, iter_raw_lines, parse_line


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


def ingest_files(
    engine: Engine,
    paths: Sequence[Path],
    *,
    flagging: FlaggingSettings | None = None,
    strict: bool = False,
    batch_size: int = 5000,
    on_progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> IngestReport:
    """Ingest JSONL / JSONL.gz files. `on_progress(lines_read, None)` is called after every batch.

    Raises:
        LogFormatError: strict mode and a bad line; the lines before it are stored.
        InputError: a file is missing or its gzip stream is corrupt.
    """
    report = IngestReport(files=[str(p) for p in paths])
    started = time.perf_counter()
    try:
        with _PipelinedWriter(BatchWriter(engine, flagging or FlaggingSettings(), report)) as writer:
            for path in paths:
                source = str(Path(path).resolve())
                stream = iter_raw_lines(Path(path))
                if _ingest_stream(
                    writer, stream, source, str(path), strict, batch_size, on_progress, should_stop
                ):
                    report.stopped = True
                    break
    finally:
        report.seconds = round(time.perf_counter() - started, 3)
    return report


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
    report = IngestReport(files=[source])
    started = time.perf_counter()

    def numbered() -> Iterator[tuple[int, bytes, bool]]:
        for line_no, line in enumerate(lines, start=1):
            yield line_no, line.encode("utf-8") if isinstance(line, str) else line, False

    with _PipelinedWriter(BatchWriter(engine, flagging or FlaggingSettings(), report)) as writer:
        _ingest_stream(writer, numbered(), source, source, strict, batch_size, None, None)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _ingest_stream(
    writer: _PipelinedWriter,
    raw_lines: Iterator[tuple[int, bytes, bool]],
    source: str,
    display_name: str,
    strict: bool,
    batch_size: int,
    on_progress: ProgressCallback | None,
    should_stop: Callable[[], bool] | None,
) -> bool:
    """Parse one stream and hand batches to the writer; True when `should_stop` asked to stop."""
    report = writer.report
    good: list[LogLine] = []
    bad: list[BadLine] = []
    read = blank = 0
    lines = iter(raw_lines)
    try:
        while True:
            try:
                line_no, raw, unterminated = next(lines)
            except StopIteration:
                break
            except InputError:
                # A corrupt gzip tail must not lose the lines parsed before it.
                writer.submit(source, good, bad)
                writer.finish()
                raise
            read += 1
            parsed = parse_line(raw, line_no, unterminated=unterminated)
            if parsed is None:
                blank += 1
            elif type(parsed) is LogLine:
                good.append(parsed)
            elif strict:
                writer.submit(source, good, [])
                writer.finish()
                stored = f" ({len(good)} valid line(s) before it in this batch were stored;" if good else " ("
                raise LogFormatError(
                    parsed.describe(display_name) + stored + " ingest is idempotent: fix the line and re-run)"
                )
            else:
                bad.append(parsed)  # type: ignore[arg-type]
            if len(good) + len(bad) >= batch_size:
                writer.submit(source, good, bad)
                good, bad = [], []
                if on_progress is not None:
                    on_progress(report.read + read, None)
                if should_stop is not None and should_stop():
                    return True
        writer.submit(source, good, bad)
        if on_progress is not None:
            on_progress(report.read + read, None)
        return False
    finally:
        report.read += read
        report.blank += blank


class _PipelinedWriter:
    """Runs `BatchWriter.write` in one background thread so that SQLite's work (which releases
    the GIL) overlaps parsing. At most two batches wait, so memory stays bounded; a write error
    is re-raised in the caller's thread at the next `submit` or at `finish`."""

    def __init__(self, writer: BatchWriter) -> None:
        self.writer = writer
        self.report = writer.report
        self._queue: queue.Queue[tuple[str, list[LogLine], list[BadLine]] | None] = queue.Queue(maxsize=2)
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

    def submit(self, source: str, good: list[LogLine], bad: list[BadLine]) -> None:
        """Queue one batch (blocks while two are waiting)."""
        self._raise_pending()
        if good or bad:
            self._queue.put((source, good, bad))

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
