"""Ingest one big file with forked worker processes that each parse and write, in file order.

This process finds the file's pieces of `batch_size` whole lines (one transaction each) and
hands them round-robin to the workers: a byte range that the worker `pread`s itself, or for
gzip the decompressed bytes through a pipe. A worker parses its piece (pure Python, so it needs
a core of its own) and sorts and indexes it (`prepare_batch`), then waits for its turn and
writes it with its own connection. Turns follow the file: this process grants piece k+1 only
after piece k is committed and reported, so duplicates, conflicts, follow-ups, a strict-mode
stop and a stop request all come out exactly as when one process ingests the file line by line;
parsing of the next pieces overlaps each write, which is what limits the rate. A thread here
runs PASSIVE checkpoints meanwhile, so the checkpoint inside a commit stays short.

Each worker sends back per-piece counts, never rows. A worker receives its next piece while it
works on the current one. It dies with this process (`PR_SET_PDEATHSIG`); one that fails
reports its traceback, which is raised here.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import itertools
import multiprocessing
import os
import queue
import signal
import sqlite3
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from ragtriage.config import FlaggingSettings
from ragtriage.errors import InputError, LogFormatError
from ragtriage.logs.batch_writer import BatchWriter, prepare_batch
from ragtriage.logs.batches import parse_batches
from ragtriage.logs.flagging import LineRules
from ragtriage.logs.reader import BadLine, iter_line_chunks, iter_line_ranges
from ragtriage.store.db import make_engine

if TYPE_CHECKING:
    from ragtriage.logs.ingest import IngestReport

FORK_AVAILABLE = "fork" in multiprocessing.get_all_start_methods()
_COUNTS = ("read", "blank", "ingested", "flagged", "duplicates", "conflicts", "quarantined", "recovered")
_PR_SET_PDEATHSIG = 1


def can_use_workers(engine: Engine) -> bool:
    """Workers need `fork` and a database other processes can open (not in-memory SQLite)."""
    url = engine.url
    in_memory = url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")
    return FORK_AVAILABLE and not in_memory


@dataclass(slots=True)
class _PieceResult:
    """What a worker reports for one piece."""

    seq: int
    written: bool
    counts: dict[str, int] = field(default_factory=dict)
    quarantined_by_kind: dict[str, int] = field(default_factory=dict)
    strict_error: tuple[int, str, str, str] | None = None
    """`(line_no, kind, message, fix)` of the line strict mode stopped at."""
    rows_before_strict_error: int = 0
    crash: str | None = None
    input_error: str | None = None
    """The file could not be read as the pieces said (it changed during the ingest)."""


def _die_with_parent() -> None:
    # Linux: a worker must not outlive an ingest killed with -9 (it would keep writing).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _prefetch(pieces: Connection, path: Path) -> queue.Queue[Any]:
    """A thread that fetches the next piece while this worker parses or writes the current one
    (this process never waits for it); None or an exception ends the stream. A piece comes as a
    byte range of the file, read here with one `pread`, or (gzip) as bytes through the pipe."""
    inbox: queue.Queue[Any] = queue.Queue(maxsize=1)

    def receive() -> None:
        try:
            with open(path, "rb", buffering=0) as handle:
                while (header := pieces.recv()) is not None:
                    kind, seq, first_line_no, unterminated, offset, length = header
                    if kind == "range":
                        data = os.pread(handle.fileno(), length, offset)
                        if len(data) != length:
                            raise InputError(f"{path} changed while it was being ingested; ingest it again")
                    else:
                        data = pieces.recv_bytes()
                    inbox.put((seq, first_line_no, unterminated, data))
            inbox.put(None)
        except BaseException as error:  # noqa: BLE001 (handed to the worker loop)
            inbox.put(error)

    threading.Thread(target=receive, name="ragtriage-ingest-receive", daemon=True).start()
    return inbox


def _worker(
    pieces: Connection,
    results: Connection,
    path: Path,
    url: str,
    flagging: FlaggingSettings,
    strict: bool,
    source: str,
    turn: Any,
    turn_changed: Any,
) -> None:
    _die_with_parent()
    from ragtriage.logs.ingest import IngestReport

    engine: Engine | None = None
    writer: BatchWriter | None = None
    try:
        # A connection of its own: the parent's must not be used across fork.
        engine = make_engine(url)
        rules = LineRules(flagging)
        report = IngestReport()
        writer = BatchWriter(engine, flagging, report, transaction_lines=1 << 62)
        inbox = _prefetch(pieces, path)
        while (message := inbox.get()) is not None:
            if isinstance(message, BaseException):
                raise message
            seq, first_line_no, unterminated, data = message
            parts = data.split(b"\n")
            del data
            last = parts.pop()
            numbered: Iterator[tuple[int, bytes, bool]] = zip(
                itertools.count(first_line_no), parts, itertools.repeat(False)
            )
            if unterminated:
                numbered = itertools.chain(numbered, ((first_line_no + len(parts), last, True),))
            (batch,) = parse_batches(numbered, rules, strict, 1 << 62, source)
            del parts, numbered
            # Sorting and indexing need no lock: done while the other worker writes.
            prepared = prepare_batch(batch, flagging.follow_up_minutes)
            with turn_changed:
                turn_changed.wait_for(lambda seq=seq: turn.value in (seq, -1))
            if turn.value == -1:
                results.send(_PieceResult(seq, written=False))
                continue
            before = {name: getattr(report, name) for name in _COUNTS}
            kinds_before = dict(report.quarantined_by_kind)
            writer.write(source, batch, prepared)
            writer.commit()
            report.read += batch.read
            report.blank += batch.blank
            error = batch.strict_error
            results.send(
                _PieceResult(
                    seq,
                    written=True,
                    counts={name: getattr(report, name) - before[name] for name in _COUNTS},
                    quarantined_by_kind={
                        kind: count - kinds_before.get(kind, 0)
                        for kind, count in report.quarantined_by_kind.items()
                        if count != kinds_before.get(kind, 0)
                    },
                    strict_error=None
                    if error is None
                    else (error.line_no, error.kind, error.message, error.fix),
                    rows_before_strict_error=len(batch.rows),
                )
            )
    except (BrokenPipeError, ConnectionResetError, EOFError):
        pass  # the ingest ended (a stop, an error elsewhere, or it died)
    except InputError as error:
        if writer is not None:
            writer.rollback()
        with contextlib.suppress(OSError):
            results.send(_PieceResult(-1, written=False, input_error=str(error)))
    except BaseException:  # noqa: BLE001 (a bug or a database error: the parent raises it)
        if writer is not None:
            writer.rollback()
        with contextlib.suppress(OSError):
            results.send(_PieceResult(-1, written=False, crash=traceback.format_exc()))
    finally:
        if engine is not None:
            engine.dispose()


class _Checkpointer(threading.Thread):
    """Copies committed WAL pages into a SQLite store while the workers write on (a PASSIVE
    checkpoint blocks nobody), so the checkpoint a worker's commit runs once the WAL is full
    (`SQLITE_AUTOCHECKPOINT_PAGES`) finds little left to copy and to sync: that work leaves the
    write turn, which is what limits the rate (docs/benchmarks.md)."""

    INTERVAL_S = 0.5

    def __init__(self, database: str) -> None:
        super().__init__(name="ragtriage-ingest-checkpoint", daemon=True)
        self.database = database
        self._done = threading.Event()

    @classmethod
    def running_for(cls, engine: Engine) -> _Checkpointer | None:
        """A started checkpointer for a SQLite file store; None for another store."""
        url = engine.url
        if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
            return None
        checkpointer = cls(str(url.database))
        checkpointer.start()
        return checkpointer

    def run(self) -> None:
        try:
            connection = sqlite3.connect(self.database, timeout=30, isolation_level=None)
        except sqlite3.Error:
            return  # the workers' own checkpoints still run
        with contextlib.closing(connection):
            while not self._done.wait(self.INTERVAL_S):
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def stop(self) -> None:
        self._done.set()
        self.join()


def ingest_file_in_workers(
    engine: Engine,
    path: Path,
    *,
    source: str,
    display_name: str,
    flagging: FlaggingSettings,
    strict: bool,
    batch_size: int,
    report: IngestReport,
    on_progress: Callable[[int, int | None], None] | None,
    should_stop: Callable[[], bool] | None,
    workers: int = 2,
) -> bool:
    """Ingest `path` with `workers` forked processes; counts go into `report`. True when
    `should_stop` asked to stop (pieces after that are not written).

    Raises:
        LogFormatError: strict mode and a bad line (the lines before it are stored).
        InputError: the file is missing or its gzip stream is corrupt (what came before is stored).
        RuntimeError: a worker failed (its traceback is in the message) or died.
    """
    # A plain file is handed out as byte ranges (each worker reads its own); gzip as bytes.
    # (Opened before any worker starts: a missing file is an `InputError` with nothing to clean up.)
    ranges = iter_line_ranges(path, batch_size)
    context = multiprocessing.get_context("fork")
    turn = context.Value("q", 0, lock=False)
    turn_changed = context.Condition()
    url = engine.url.render_as_string(hide_password=False)
    procs: list[Any] = []
    piece_pipes: list[Connection] = []
    result_pipes: list[Connection] = []
    # Objects that exist now are never traversed by a worker's garbage collector, so the worker
    # does not write to (and thereby copy) the pages it shares with this process.
    gc.freeze()
    for index in range(workers):
        piece_out, piece_in = context.Pipe(duplex=False)
        result_out, result_in = context.Pipe(duplex=False)
        process = context.Process(
            target=_worker,
            args=(piece_out, result_in, path, url, flagging, strict, source, turn, turn_changed),
            name=f"ragtriage-ingest-{index}",
            daemon=True,
        )
        process.start()
        piece_out.close()
        result_in.close()
        procs.append(process)
        piece_pipes.append(piece_in)
        result_pipes.append(result_out)
    gc.unfreeze()

    def set_turn(value: int) -> None:
        with turn_changed:
            turn.value = value
            turn_changed.notify_all()

    outstanding: list[list[int]] = [[] for _ in range(workers)]  # pieces each worker holds
    #: Pieces a worker may hold: the one it works on and the next, already received.
    per_worker = 2
    done: dict[int, _PieceResult] = {}
    next_seq = 0  # next piece to report
    stopped = False
    failure: BaseException | None = None
    input_error: str | None = None
    pieces: Iterator[tuple[Any, ...]] = (
        (
            (("range", first, unterminated, offset, length), None)
            for first, offset, length, unterminated in ranges
        )
        if ranges is not None
        else (
            (("bytes", first, unterminated, 0, 0), data)
            for first, data, unterminated in iter_line_chunks(path, batch_size)
        )
    )
    upcoming: tuple[Any, ...] | None = None
    exhausted = False
    sent = 0

    def read_ahead() -> None:
        # One piece is always read ahead: knowing whether a piece is the last one decides, as
        # in the one-process ingest, whether a stop request is asked after it.
        nonlocal upcoming, exhausted, input_error
        if upcoming is None and not exhausted:
            try:
                upcoming = next(pieces)
            except StopIteration:
                exhausted = True
            except InputError as error:
                input_error, exhausted = str(error), True

    checkpointer = _Checkpointer.running_for(engine)
    try:
        while True:
            # Hand out pieces: piece `sent` goes to worker `sent % workers` once that one is free.
            read_ahead()
            while (
                upcoming is not None
                and failure is None
                and not stopped
                and len(outstanding[sent % workers]) < per_worker
            ):
                (kind, first_line_no, unterminated, offset, length), data = upcoming
                pipe = piece_pipes[sent % workers]
                pipe.send((kind, sent, first_line_no, unterminated, offset, length))
                if data is not None:
                    pipe.send_bytes(data)  # as it is: no pickled copy of megabytes
                outstanding[sent % workers].append(sent)
                upcoming, sent = None, sent + 1
                read_ahead()
            if not any(outstanding):
                break
            for ready in wait(result_pipes):
                index = result_pipes.index(ready)  # type: ignore[arg-type]
                try:
                    result: _PieceResult = ready.recv()  # type: ignore[union-attr]
                except EOFError:
                    raise RuntimeError(
                        f"an ingest worker ended without finishing (exit code {procs[index].exitcode})"
                    ) from None
                if result.crash is not None:
                    raise RuntimeError(f"an ingest worker failed:\n{result.crash}")
                if result.input_error is not None:
                    raise InputError(result.input_error)
                outstanding[index].remove(result.seq)
                done[result.seq] = result
            while next_seq in done:
                result = done.pop(next_seq)
                next_seq += 1
                if not result.written:
                    continue
                for name, count in result.counts.items():
                    setattr(report, name, getattr(report, name) + count)
                for kind, count in result.quarantined_by_kind.items():
                    report.quarantined_by_kind[kind] = report.quarantined_by_kind.get(kind, 0) + count
                if result.strict_error is not None:
                    line_no, kind, message, fix = result.strict_error
                    described = BadLine(line_no, kind, message, fix, b"").describe(display_name)
                    good = result.rows_before_strict_error
                    stored = f" ({good} valid line(s) before it in this batch were stored;" if good else " ("
                    failure = LogFormatError(
                        described + stored + " ingest is idempotent: fix the line and re-run)"
                    )
                    break
                if on_progress is not None:
                    on_progress(report.read, None)
                last_piece = exhausted and upcoming is None and next_seq == sent
                if should_stop is not None and not last_piece and should_stop():
                    stopped = True
                    break
            if failure is not None or stopped:
                set_turn(-1)
            else:
                set_turn(next_seq)
    except BaseException:
        set_turn(-1)
        raise
    finally:
        if checkpointer is not None:
            checkpointer.stop()
        for pipe in piece_pipes:
            with contextlib.suppress(OSError):
                pipe.send(None)
            pipe.close()
        for process in procs:
            process.join(timeout=60)
            if process.is_alive():
                process.terminate()
                process.join()
        for pipe in result_pipes:
            pipe.close()
    if failure is not None:
        raise failure
    if input_error is not None and not stopped:
        raise InputError(input_error)
    return stopped
