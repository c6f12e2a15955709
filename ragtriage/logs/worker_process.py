"""The forked side of `ingest_workers`: one worker process that parses and writes its pieces.

A worker receives piece headers through a pipe (a byte range it `pread`s itself, or for gzip the
bytes that follow the header), parses each piece and sorts and indexes it (`prepare_batch`) while
the other worker writes, waits for its turn, writes and commits, and sends back the per-piece
counts (never rows). It dies with the ingest process (`PR_SET_PDEATHSIG`); one that fails sends
its traceback, which the ingest process raises.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import queue
import signal
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from ragtriage.config.settings import FlaggingSettings
from ragtriage.errors import InputError
from ragtriage.logs.batch_writer import BatchWriter
from ragtriage.logs.batches import ParsedBatch, parse_batches
from ragtriage.logs.flagging import LineRules
from ragtriage.logs.prepared_batch import PreparedBatch, prepare_batch
from ragtriage.logs.report import IngestReport
from ragtriage.store.db import make_engine

#: The report fields a worker counts per piece (the ingest process adds them up in file order).
PIECE_COUNTS = ("read", "blank", "ingested", "flagged", "duplicates", "conflicts", "quarantined", "recovered")
_PR_SET_PDEATHSIG = 1
#: A batch size no piece reaches: a piece is parsed into one batch and written in one transaction.
_UNBOUNDED = 1 << 62


@dataclass(slots=True)
class PieceResult:
    """What a worker reports for one piece."""

    seq: int
    written: bool
    counts: dict[str, int] = field(default_factory=dict)
    quarantined_by_kind: dict[str, int] = field(default_factory=dict)
    flagged_by_reason: dict[str, int] = field(default_factory=dict)
    strict_error: tuple[int, str, str, str] | None = None
    """`(line_no, kind, message, fix)` of the line strict mode stopped at."""
    rows_before_strict_error: int = 0
    crash: str | None = None
    input_error: str | None = None
    """The file could not be read as the pieces said (it changed during the ingest)."""


@dataclass(slots=True)
class WorkerArgs:
    """What a worker needs besides its two pipes (picklable, though `fork` copies it anyway)."""

    path: Path
    url: str
    flagging: FlaggingSettings
    strict: bool
    source: str
    turn: Any
    """Shared integer: the piece that may be written now; -1 once the ingest stops."""
    turn_changed: Any
    """Condition notified when `turn` changes."""


def _die_with_parent() -> None:
    # Linux: a worker must not outlive an ingest killed with -9 (it would keep writing).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _prefetch(pieces: Connection, path: Path) -> queue.Queue[Any]:
    """A thread that fetches the next piece while this worker parses or writes the current one
    (the ingest process never waits for it); None or an exception ends the stream. A piece comes
    as a byte range of the file, read here with one `pread`, or (gzip) as bytes through the pipe."""
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


def _parse_piece(
    first_line_no: int, unterminated: bool, data: bytes, rules: LineRules, args: WorkerArgs
) -> tuple[ParsedBatch, PreparedBatch]:
    """One piece of whole lines (the last one perhaps without its newline) as one batch, sorted
    and indexed for the writer: no lock is needed for that, so it runs while the other worker writes."""
    parts = data.split(b"\n")
    del data
    last = parts.pop()
    numbered: Iterator[tuple[int, bytes, bool]] = zip(
        itertools.count(first_line_no), parts, itertools.repeat(False)
    )
    if unterminated:
        numbered = itertools.chain(numbered, ((first_line_no + len(parts), last, True),))
    (batch,) = parse_batches(numbered, rules, args.strict, _UNBOUNDED, args.source)
    del parts, numbered
    return batch, prepare_batch(batch, args.flagging.follow_up_minutes)


def _write_piece(
    seq: int, batch: ParsedBatch, prepared: PreparedBatch, writer: BatchWriter, args: WorkerArgs
) -> PieceResult:
    """Write and commit one prepared piece; its counts are the change in the writer's report."""
    report = writer.report
    before = {name: getattr(report, name) for name in PIECE_COUNTS}
    kinds_before = dict(report.quarantined_by_kind)
    reasons_before = dict(report.flagged_by_reason)
    writer.write(args.source, batch, prepared)
    writer.commit()
    report.read += batch.read
    report.blank += batch.blank
    error = batch.strict_error
    return PieceResult(
        seq,
        written=True,
        counts={name: getattr(report, name) - before[name] for name in PIECE_COUNTS},
        quarantined_by_kind=_change(kinds_before, report.quarantined_by_kind),
        flagged_by_reason=_change(reasons_before, report.flagged_by_reason),
        strict_error=None if error is None else (error.line_no, error.kind, error.message, error.fix),
        rows_before_strict_error=len(batch.rows),
    )


def _change(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The counts `after` added to `before`, by key (keys that did not change left out)."""
    return {key: count - before.get(key, 0) for key, count in after.items() if count != before.get(key, 0)}


def run_worker(pieces: Connection, results: Connection, args: WorkerArgs) -> None:
    """The worker process's main function (the target of `Process`)."""
    _die_with_parent()
    engine: Engine | None = None
    writer: BatchWriter | None = None
    try:
        # A connection of its own: the parent's must not be used across fork.
        engine = make_engine(args.url)
        rules = LineRules(args.flagging)
        writer = BatchWriter(engine, args.flagging, IngestReport(), transaction_lines=_UNBOUNDED)
        inbox = _prefetch(pieces, args.path)
        while (message := inbox.get()) is not None:
            if isinstance(message, BaseException):
                raise message
            seq, first_line_no, unterminated, data = message
            batch, prepared = _parse_piece(first_line_no, unterminated, data, rules, args)
            del message, data
            with args.turn_changed:
                args.turn_changed.wait_for(lambda seq=seq: args.turn.value in (seq, -1))
            if args.turn.value == -1:
                results.send(PieceResult(seq, written=False))
                continue
            results.send(_write_piece(seq, batch, prepared, writer, args))
    except (BrokenPipeError, ConnectionResetError, EOFError):
        pass  # the ingest ended (a stop, an error elsewhere, or it died)
    except InputError as error:
        if writer is not None:
            writer.rollback()
        with contextlib.suppress(OSError):
            results.send(PieceResult(-1, written=False, input_error=str(error)))
    except BaseException:  # noqa: BLE001 (a bug or a database error: the parent raises it)
        if writer is not None:
            writer.rollback()
        with contextlib.suppress(OSError):
            results.send(PieceResult(-1, written=False, crash=traceback.format_exc()))
    finally:
        if engine is not None:
            engine.dispose()
