"""Ingest request-log files into the triage store: streaming, idempotent, flagged, reconciled.

Lines are parsed one by one and written in batches (`settings.logs.batch_size` lines per short
`BEGIN IMMEDIATE` transaction), so memory stays constant and a triager can write in between. A
big file is ingested by two worker processes that parse and write in file order
(`ingest_workers`); a small one in this process, with the writes in a background thread. Both
give the same stored rows. Every line read is counted exactly once:

    read = ingested + duplicates + conflicts + quarantined + blank

A request_id seen again with the same body is a duplicate (nothing changes); with a different
body it is a conflict (the stored request is kept, the new body goes to `log_conflict`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import inspect
from sqlalchemy.engine import Engine

from ragtriage.config.settings import FlaggingSettings, OtelSettings
from ragtriage.errors import InputError, LogFormatError
from ragtriage.logs.batch_writer import BatchWriter
from ragtriage.logs.batches import ParsedBatch, parse_batches
from ragtriage.logs.flagging import LineRules
from ragtriage.logs.formats.dispatch import (
    NumberedLine,
    PlannedFile,
    document_lines,
    plan_files,
    table_lines,
    trace_lines,
)
from ragtriage.logs.formats.parallel import worth_parallel
from ragtriage.logs.ingest_workers import can_use_workers, ingest_file_in_workers
from ragtriage.logs.line_files import iter_raw_lines
from ragtriage.logs.pipelined_writer import PipelinedWriter
from ragtriage.logs.report import IngestReport, ProgressCallback
from ragtriage.logs.trace_child import parsed_traces, remove_stale_spill_dirs
from ragtriage.store.db import write_session
from ragtriage.store.log_tables import OLD_REQUEST_LOG_SESSION_INDEX, REQUEST_LOG_TS_INDEX

#: Lines per parsed batch (the unit handed to the writer); transactions group several.
PARSE_BATCH_LINES = 5000
#: The same for batches parsed in a child process (`trace_child`) and sent through a pipe.
PIPED_BATCH_LINES = 1000

#: Files at least this big are ingested by worker processes (`ingest_workers`) when `fork` is
#: available and the store is not in memory: two cores parse and write. Smaller files are not
#: worth the processes.
PARALLEL_MIN_BYTES = 8 << 20


def ingest_files(
    engine: Engine,
    paths: Sequence[Path],
    *,
    flagging: FlaggingSettings | None = None,
    strict: bool = False,
    batch_size: int = 10_000,
    on_progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
    use_workers: bool | None = None,
    log_format: str = "auto",
    otel: OtelSettings | None = None,
) -> IngestReport:
    """Ingest request logs and traces. `on_progress(lines_read, None)` is called after every batch.

    `log_format`: `auto` tells each file's format by its content (`formats.detect`), anything
    else names the format of every file. Schema v1 and the flat form are JSONL / JSONL.gz (or one
    JSON document of records), or Parquet / CSV exports read row by row (`formats.tables`); OTLP,
    Phoenix and Langfuse files are read together, mapped with `otel` (a trace's spans may be in
    several of them), and count one trace as one line. Every file is planned before anything is
    stored. A non-empty file that held no readable request is listed in
    `report.files_without_requests` (the CLI exits non-zero).

    `batch_size`: lines per write transaction (in this process, parsing hands over batches of at
    most `PARSE_BATCH_LINES`; with workers, each worker parses and writes pieces of `batch_size`).

    `use_workers`: parse and write in forked worker processes (True), in this process (False),
    or decide by file size (None: files of `PARALLEL_MIN_BYTES` or more). Workers need `fork` and a
    store other processes can open; without them this process does the work. Both give identical
    results (see `ingest_workers`). Trace files are read and assembled by forked processes on the
    same terms (`formats.parallel`, 8 MB of trace files or more; they need only `fork`).

    Raises:
        LogFormatError: strict mode and a bad line; the lines before it are stored.
        InputError: a file is missing, its gzip stream is corrupt, or its content matches no format.
    """
    flagging = flagging or FlaggingSettings()
    planned = plan_files(paths, log_format)
    report = IngestReport(files=[str(p) for p in paths], formats={str(p.path): p.format for p in planned})
    started = time.perf_counter()
    ensure_ingest_indexes(engine)
    read = _Reading(engine, flagging, strict, batch_size, use_workers, on_progress, should_stop)
    try:
        with PipelinedWriter(BatchWriter(engine, flagging, report, transaction_lines=batch_size)) as writer:
            trace_files = [p for p in planned if p.is_trace]
            stopped, trace_requests = read.traces(writer, trace_files, otel or OtelSettings())
            if stopped:
                report.stopped = True
                return report
            if trace_requests == 0:
                # One trace's spans and scores may sit in different files: judged together.
                report.files_without_requests.extend(str(p.path) for p in trace_files if _non_empty(p.path))
            for plan in planned:
                if plan.is_trace:
                    continue
                stopped, requests = read.file(writer, plan)
                if stopped:
                    report.stopped = True
                    break
                if requests == 0 and _non_empty(plan.path):
                    report.files_without_requests.append(str(plan.path))
    finally:
        report.seconds = round(time.perf_counter() - started, 3)
    return report


@dataclass(frozen=True)
class _Reading:
    """How the files of one ingest are read and handed to the writer."""

    engine: Engine
    flagging: FlaggingSettings
    strict: bool
    batch_size: int
    use_workers: bool | None
    on_progress: ProgressCallback | None
    should_stop: Callable[[], bool] | None

    def file(self, writer: PipelinedWriter, plan: PlannedFile) -> tuple[bool, int]:
        """Ingest one request-log or table file: `(stopped on request, valid requests read)`. The
        one place that picks how a file is read."""
        path = plan.path
        if plan.is_table:
            return self.lines(writer, path, table_lines(plan))
        if plan.layout == "document":
            return self.lines(writer, path, document_lines(path))
        if not _use_workers(self.engine, path, self.use_workers):
            return self.lines(writer, path, iter_raw_lines(path))
        writer.finish()  # commit what earlier files wrote: the workers write next
        report = writer.report
        before = report.ingested + report.duplicates + report.conflicts
        stopped = ingest_file_in_workers(
            self.engine,
            path,
            source=str(path.resolve()),
            display_name=str(path),
            flagging=self.flagging,
            strict=self.strict,
            batch_size=self.batch_size,
            report=report,
            on_progress=self.on_progress,
            should_stop=self.should_stop,
        )
        return stopped, report.ingested + report.duplicates + report.conflicts - before

    def traces(
        self, writer: PipelinedWriter, files: list[PlannedFile], otel: OtelSettings
    ) -> tuple[bool, int]:
        """Ingest the trace-format files together: `(stopped on request, valid requests read)`.
        Big inputs are read and parsed in a child process while this one stores (`trace_child`)."""
        if not files:
            return False, 0
        remove_stale_spill_dirs()
        requests = 0
        specs = [(f.path, f.format, f.layout) for f in files]
        if not worth_parallel(specs, self.use_workers):
            for path, numbered in trace_lines(files, otel, parallel=False):
                stopped, count = self.lines(writer, path, numbered)
                requests += count
                if stopped:
                    return True, requests
            return False, requests
        rules = LineRules(self.flagging)
        # Smaller batches through the pipe: less in flight in both processes.
        parse_lines = min(self.batch_size, PIPED_BATCH_LINES)
        with contextlib.closing(parsed_traces(files, otel, rules, self.strict, parse_lines)) as parsed:
            for path, batches in parsed:
                source = str(path.resolve())
                stopped, count = _consume(
                    writer, batches, source, str(path), self.on_progress, self.should_stop
                )
                requests += count
                if stopped:
                    return True, requests
        return False, requests

    def lines(
        self, writer: PipelinedWriter, path: Path, numbered: Iterable[NumberedLine]
    ) -> tuple[bool, int]:
        """Parse numbered lines in this process and hand them to the writer."""
        source = str(path.resolve())
        parse_lines = min(self.batch_size, PARSE_BATCH_LINES)
        batches = parse_batches(numbered, LineRules(self.flagging), self.strict, parse_lines, source)
        return _consume(writer, batches, source, str(path), self.on_progress, self.should_stop)


def _non_empty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def ensure_ingest_indexes(engine: Engine) -> None:
    """Give a store created by an earlier version the follow-up index ingest reads (and drop the
    one it replaced, which only slowed inserts). Idempotent; instant when already done."""
    with write_session(engine) as session:
        connection = session.connection()
        names = {index["name"] for index in inspect(connection).get_indexes("request_log")}
        if REQUEST_LOG_TS_INDEX in names and OLD_REQUEST_LOG_SESSION_INDEX not in names:
            return
        if OLD_REQUEST_LOG_SESSION_INDEX in names:
            connection.exec_driver_sql(f"DROP INDEX {OLD_REQUEST_LOG_SESSION_INDEX}")
        if REQUEST_LOG_TS_INDEX not in names:
            connection.exec_driver_sql(
                f"CREATE INDEX {REQUEST_LOG_TS_INDEX} ON request_log (ts, session_hash, request_id)"
            )


def _use_workers(engine: Engine, path: Path, use_workers: bool | None) -> bool:
    if not can_use_workers(engine):
        return False
    if use_workers is not None:
        return use_workers
    try:
        return path.stat().st_size >= PARALLEL_MIN_BYTES
    except OSError:
        return False  # the in-process reader reports the missing file


def ingest_lines(
    engine: Engine,
    lines: Iterable[bytes | str],
    *,
    source: str = "<memory>",
    flagging: FlaggingSettings | None = None,
    strict: bool = False,
    batch_size: int = 10_000,
) -> IngestReport:
    """Ingest log lines given in memory (tests, generators); `source` names them in messages."""
    flagging = flagging or FlaggingSettings()
    report = IngestReport(files=[source])
    ensure_ingest_indexes(engine)
    started = time.perf_counter()

    def numbered() -> Iterator[tuple[int, bytes, bool]]:
        for line_no, line in enumerate(lines, start=1):
            yield line_no, line.encode("utf-8") if isinstance(line, str) else line, False

    with PipelinedWriter(BatchWriter(engine, flagging, report, transaction_lines=batch_size)) as writer:
        parse_lines = min(batch_size, PARSE_BATCH_LINES)
        batches = parse_batches(numbered(), LineRules(flagging), strict, parse_lines, source)
        _consume(writer, batches, source, source, None, None)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _consume(
    writer: PipelinedWriter,
    batches: Iterable[ParsedBatch],
    source: str,
    display_name: str,
    on_progress: ProgressCallback | None,
    should_stop: Callable[[], bool] | None,
) -> tuple[bool, int]:
    """Hand parsed batches to the writer in order: `(True when should_stop asked to stop, valid
    requests read)`.

    Raises:
        LogFormatError: a batch ends at a bad line in strict mode (the lines before it are stored).
        InputError: a batch ends at an unreadable gzip tail (the lines before it are stored).
    """
    report = writer.report
    requests = 0
    for batch in batches:
        requests += len(batch.rows)
        report.read += batch.read
        report.blank += batch.blank
        writer.submit(source, batch)
        if batch.strict_error is not None:
            writer.finish()
            good = batch.rows
            lines = "line" if len(good) == 1 else "lines"
            stored = f" ({len(good)} valid {lines} before it in this batch were stored;" if good else " ("
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
            return True, requests
    return False, requests
