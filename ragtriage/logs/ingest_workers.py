"""Ingest one big file with forked worker processes that each parse and write, in file order.

This process finds the file's pieces of `batch_size` whole lines (one transaction each) and
hands them round-robin to the workers (`worker_process`): a byte range that the worker `pread`s
itself, or for gzip the decompressed bytes through a pipe. A worker parses its piece (pure
Python, so it needs a core of its own) and sorts and indexes it, then waits for its turn and
writes it with its own connection. Turns follow the file: this process grants piece k+1 only
after piece k is committed and reported, so duplicates, conflicts, follow-ups, a strict-mode
stop and a stop request all come out exactly as when one process ingests the file line by line;
parsing of the next pieces overlaps each write, which is what limits the rate. A thread here
runs PASSIVE checkpoints meanwhile, so the checkpoint inside a commit stays short.

Each worker sends back per-piece counts, never rows, and receives its next piece while it works
on the current one.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import sqlite3
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, cast

from sqlalchemy.engine import Engine

from ragtriage.config.settings import FlaggingSettings
from ragtriage.errors import InputError, LogFormatError
from ragtriage.logs.line_files import iter_line_chunks, iter_line_ranges
from ragtriage.logs.log_line import BadLine
from ragtriage.logs.report import IngestReport, add_counts
from ragtriage.logs.worker_process import PieceResult, WorkerArgs, run_worker

FORK_AVAILABLE = "fork" in multiprocessing.get_all_start_methods()
#: Pieces a worker may hold: the one it works on and the next, already received.
PIECES_PER_WORKER = 2

#: `((kind, first_line_no, unterminated, offset, length), bytes or None)`: one piece to hand out.
_Piece = tuple[tuple[str, int, bool, int, int], bytes | None]


def can_use_workers(engine: Engine) -> bool:
    """Workers need `fork` and a database other processes can open (not in-memory SQLite)."""
    url = engine.url
    in_memory = url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")
    return FORK_AVAILABLE and not in_memory


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


class _WorkerPool:
    """The forked workers, their pipes and the shared write turn."""

    def __init__(
        self,
        engine: Engine,
        path: Path,
        *,
        flagging: FlaggingSettings,
        strict: bool,
        source: str,
        workers: int,
    ) -> None:
        context = multiprocessing.get_context("fork")
        self.turn = context.Value("q", 0, lock=False)
        self.turn_changed = context.Condition()
        worker_args = WorkerArgs(
            path=path,
            url=engine.url.render_as_string(hide_password=False),
            flagging=flagging,
            strict=strict,
            source=source,
            turn=self.turn,
            turn_changed=self.turn_changed,
        )
        self.procs: list[Any] = []
        self.piece_pipes: list[Connection] = []
        self.result_pipes: list[Connection] = []
        # Objects that exist now are never traversed by a worker's garbage collector, so the worker
        # does not write to (and thereby copy) the pages it shares with this process.
        gc.freeze()
        for index in range(workers):
            piece_out, piece_in = context.Pipe(duplex=False)
            result_out, result_in = context.Pipe(duplex=False)
            process = context.Process(
                target=run_worker,
                args=(piece_out, result_in, worker_args),
                name=f"ragtriage-ingest-{index}",
                daemon=True,
            )
            process.start()
            piece_out.close()
            result_in.close()
            self.procs.append(process)
            self.piece_pipes.append(piece_in)
            self.result_pipes.append(result_out)
        gc.unfreeze()

    def set_turn(self, value: int) -> None:
        """Let piece `value` be written (-1: write nothing more)."""
        with self.turn_changed:
            self.turn.value = value
            self.turn_changed.notify_all()

    def send(self, worker: int, seq: int, piece: _Piece) -> None:
        (kind, first_line_no, unterminated, offset, length), data = piece
        pipe = self.piece_pipes[worker]
        pipe.send((kind, seq, first_line_no, unterminated, offset, length))
        if data is not None:
            pipe.send_bytes(data)  # as it is: no pickled copy of megabytes

    def results(self) -> Iterator[tuple[int, PieceResult]]:
        """`(worker index, result)` of the results ready now (waits for at least one).

        Raises:
            RuntimeError: a worker failed (its traceback is in the message) or died.
            InputError: a worker found the file changed under it.
        """
        for ready in wait(self.result_pipes):
            pipe = cast(Connection, ready)  # wait() only returns objects it was given
            index = self.result_pipes.index(pipe)
            try:
                result: PieceResult = pipe.recv()
            except EOFError:
                raise RuntimeError(
                    f"an ingest worker ended without finishing (exit code {self.procs[index].exitcode})"
                ) from None
            if result.crash is not None:
                raise RuntimeError(f"an ingest worker failed:\n{result.crash}")
            if result.input_error is not None:
                raise InputError(result.input_error)
            yield index, result

    def close(self) -> None:
        """Tell the workers to end, wait for them (terminate one that hangs) and close the pipes."""
        for pipe in self.piece_pipes:
            with contextlib.suppress(OSError):
                pipe.send(None)
            pipe.close()
        for process in self.procs:
            process.join(timeout=60)
            if process.is_alive():
                process.terminate()
                process.join()
        for pipe in self.result_pipes:
            pipe.close()


class _Dispatch:
    """Hands pieces out round-robin and adds the results up in file order."""

    def __init__(
        self,
        pool: _WorkerPool,
        pieces: Iterator[_Piece],
        report: IngestReport,
        display_name: str,
        on_progress: Callable[[int, int | None], None] | None,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        self.pool, self.pieces, self.report = pool, pieces, report
        self.display_name, self.on_progress, self.should_stop = display_name, on_progress, should_stop
        self.workers = len(pool.procs)
        self.outstanding: list[list[int]] = [[] for _ in range(self.workers)]  # pieces each worker holds
        self.done: dict[int, PieceResult] = {}
        self.next_seq = 0  # next piece to report
        self.sent = 0
        self.upcoming: _Piece | None = None
        self.exhausted = False
        self.stopped = False
        self.failure: LogFormatError | None = None
        self.input_error: str | None = None

    def run(self) -> None:
        """Hand out, collect and report until every piece handed out is reported."""
        while True:
            self._hand_out()
            if not any(self.outstanding):
                return
            for index, result in self.pool.results():
                self.outstanding[index].remove(result.seq)
                self.done[result.seq] = result
            self._report_in_order()
            self.pool.set_turn(-1 if self.failure is not None or self.stopped else self.next_seq)

    def _read_ahead(self) -> None:
        # One piece is always read ahead: knowing whether a piece is the last one decides, as
        # in the one-process ingest, whether a stop request is asked after it.
        if self.upcoming is None and not self.exhausted:
            try:
                self.upcoming = next(self.pieces)
            except StopIteration:
                self.exhausted = True
            except InputError as error:
                self.input_error, self.exhausted = str(error), True

    def _hand_out(self) -> None:
        """Piece `sent` goes to worker `sent % workers` once that one holds fewer than it may."""
        self._read_ahead()
        while (
            self.upcoming is not None
            and self.failure is None
            and not self.stopped
            and len(self.outstanding[self.sent % self.workers]) < PIECES_PER_WORKER
        ):
            self.pool.send(self.sent % self.workers, self.sent, self.upcoming)
            self.outstanding[self.sent % self.workers].append(self.sent)
            self.upcoming, self.sent = None, self.sent + 1
            self._read_ahead()

    def _report_in_order(self) -> None:
        """Add up the results that follow the last one reported; stop at a strict-mode error or
        when `should_stop` asks (never after the last piece, as in the one-process ingest)."""
        report = self.report
        while self.next_seq in self.done:
            result = self.done.pop(self.next_seq)
            self.next_seq += 1
            if not result.written:
                continue
            for name, count in result.counts.items():
                setattr(report, name, getattr(report, name) + count)
            add_counts(report.quarantined_by_kind, result.quarantined_by_kind)
            add_counts(report.flagged_by_reason, result.flagged_by_reason)
            if result.strict_error is not None:
                self.failure = self._strict_failure(result)
                return
            if self.on_progress is not None:
                self.on_progress(report.read, None)
            last_piece = self.exhausted and self.upcoming is None and self.next_seq == self.sent
            if self.should_stop is not None and not last_piece and self.should_stop():
                self.stopped = True
                return

    def _strict_failure(self, result: PieceResult) -> LogFormatError:
        line_no, kind, message, fix = result.strict_error  # type: ignore[misc]
        described = BadLine(line_no, kind, message, fix, b"").describe(self.display_name)
        good = result.rows_before_strict_error
        lines = "line" if good == 1 else "lines"
        stored = f" ({good} valid {lines} before it in this batch were stored;" if good else " ("
        return LogFormatError(described + stored + " ingest is idempotent: fix the line and re-run)")


def _pieces(path: Path, batch_size: int) -> Iterator[_Piece]:
    """The file's pieces: byte ranges of a plain file (each worker reads its own), gzip as bytes.

    Raises:
        InputError: the file is missing (raised now, before any worker starts).
    """
    ranges = iter_line_ranges(path, batch_size)
    if ranges is not None:
        return (
            (("range", first, unterminated, offset, length), None)
            for first, offset, length, unterminated in ranges
        )
    return (
        (("bytes", first, unterminated, 0, 0), data)
        for first, data, unterminated in iter_line_chunks(path, batch_size)
    )


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
    pieces = _pieces(path, batch_size)
    pool = _WorkerPool(engine, path, flagging=flagging, strict=strict, source=source, workers=workers)
    dispatch = _Dispatch(pool, pieces, report, display_name, on_progress, should_stop)
    checkpointer = _Checkpointer.running_for(engine)
    try:
        dispatch.run()
    except BaseException:
        pool.set_turn(-1)
        raise
    finally:
        if checkpointer is not None:
            checkpointer.stop()
        pool.close()
    if dispatch.failure is not None:
        raise dispatch.failure
    if dispatch.input_error is not None and not dispatch.stopped:
        raise InputError(dispatch.input_error)
    return dispatch.stopped
