"""Read trace files on both cores: `read_traces` with forked readers, the same results.

The files are cut into pieces of whole lines (`line_files.iter_line_ranges`; a gzip file or a
whole JSON document is one piece). `READERS` forked readers take alternate pieces, decode them
into spans (`read.read_into`), assemble each spill row's trace (its digest: see `collect`) and
spill both into one spill file, numbered from their piece's place in the input
(`collect.ORDER_BITS`), so "order of first appearance" is the input's as when one process reads.
Unreadable records are spilled the same way and come out first, in input order; the readers'
notes come back through their pipes. This process then reads the traces back in order
(`read.assembled`: a digest where one row holds the whole trace, else the spans, assembled here).

A reader's failure is raised here: `InputError` as it was raised there, anything else as
`RuntimeError` with the reader's traceback.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import traceback
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ragtriage.config.settings import OtelSettings
from ragtriage.errors import InputError
from ragtriage.logs.formats.assemble import Assembled, Rejected
from ragtriage.logs.formats.collect import ORDER_BITS, TraceCollector
from ragtriage.logs.formats.read import (
    assembled,
    digester,
    iter_raw,
    needs_span_index,
    read_into,
)
from ragtriage.logs.line_files import iter_line_ranges

FORK_AVAILABLE = "fork" in multiprocessing.get_all_start_methods()
#: Processes that read (the machine this is tuned for has two cores).
READERS = 2
#: Lines per piece handed to a reader (a Collector line holds a batch of spans, often 100 KB+).
PIECE_LINES = 128
#: Trace files of at least this many bytes together are read in parallel (smaller: not worth the
#: processes).
PARALLEL_MIN_BYTES = 8 << 20

#: `(path, format, layout, first line number, offset, length)`; offset -1: read the whole file.
_Piece = tuple[Path, str, str, int, int, int]


def worth_parallel(files: Sequence[tuple[Path, str, str]], parallel: bool | None) -> bool:
    """Read `files` in parallel? `parallel` True/False decides (when `fork` exists); None: when
    they hold `PARALLEL_MIN_BYTES` or more."""
    if not FORK_AVAILABLE or parallel is False:
        return False
    if parallel:
        return True
    total = 0
    for path, _, _ in files:
        try:
            total += path.stat().st_size
        except OSError:
            return False  # the serial reader reports the missing file
    return total >= PARALLEL_MIN_BYTES


def pieces_of(files: Sequence[tuple[Path, str, str]]) -> list[_Piece]:
    """The pieces of `files`, in input order.

    Raises:
        InputError: a file is missing or unreadable.
    """
    pieces: list[_Piece] = []
    for path, fmt, layout in files:
        ranges = iter_line_ranges(path, PIECE_LINES) if layout == "lines" else None
        if ranges is None:
            pieces.append((path, fmt, layout, 1, -1, 0))
        else:
            pieces.extend((path, fmt, layout, first, offset, length) for first, offset, length, _ in ranges)
    return pieces


def _piece_lines(piece: _Piece) -> Iterator[tuple[int, bytes]]:
    """`(line number, bytes)` of the non-blank lines of one piece (as `read.iter_raw` numbers them)."""
    path, _, layout, line_no, offset, length = piece
    return iter_raw(path, layout, None if offset < 0 else (line_no, offset, length))


def _failure(error: BaseException) -> tuple[str, str]:
    if isinstance(error, InputError):
        return "input_error", str(error)
    return "error", "".join(traceback.format_exception(error))


def _reader(
    spill: Path,
    pieces: list[tuple[int, _Piece]],
    otel: OtelSettings,
    memory_spans: int,
    index: bool,
    out: Connection,
) -> None:
    """A reader process: read `pieces` (`(place in input, piece)`) into the spill file."""
    collector = TraceCollector.attach(
        spill, memory_spans=memory_spans, index_spans=index, digest=digester(otel)
    )
    place = -1
    try:
        for place, piece in pieces:
            collector.seq = place << ORDER_BITS
            path, fmt, layout = piece[:3]
            for rejected in read_into(collector, _piece_lines(piece), str(path), fmt, layout, otel):
                collector.add_rejected(_rejected_values(rejected))
            collector.flush()  # a piece's spans never share a spill row with the next one's
        out.send(("done", collector.notes))
    except BaseException as error:  # noqa: BLE001 (reported to the parent, which raises it)
        with contextlib.suppress(OSError):  # the parent may have stopped listening
            out.send((*_failure(error), place))
    finally:
        collector.close()
        out.close()


def _rejected_values(rejected: Rejected) -> tuple[Any, ...]:
    return (rejected.kind, rejected.message, rejected.fix, rejected.source, rejected.line_no, rejected.raw)


def _start(context: Any, target: Any, args: tuple[Any, ...]) -> Any:
    """A started forked process. Objects that exist now are left out of its garbage collector's
    passes, so it does not copy the pages it shares with this process by touching them."""
    gc.freeze()
    try:
        proc = context.Process(target=target, args=args, daemon=True)
        proc.start()
    finally:
        gc.unfreeze()
    return proc


def _raise(kind: str, message: str) -> None:
    if kind == "input_error":
        raise InputError(message)
    raise RuntimeError(f"a trace ingest process failed:\n{message}")


def read_traces_parallel(
    files: Sequence[tuple[Path, str, str]],
    otel: OtelSettings,
    *,
    spill_dir: Path | None = None,
    memory_spans: int = 5_000,
) -> Iterator[Assembled | Rejected]:
    """`read.read_traces` with forked readers (see the module docstring): the same items in the
    same order. Needs `fork` (`FORK_AVAILABLE`).

    Raises:
        InputError: a file cannot be read.
    """
    context = multiprocessing.get_context("fork")
    index = needs_span_index(files)
    collector = TraceCollector(memory_spans=memory_spans, spill_dir=spill_dir, index_spans=index)
    procs: list[Any] = []
    try:
        spill = collector.spill_path()
        numbered = list(enumerate(pieces_of(files)))
        pipes = []
        for reader in range(READERS):
            receive, send = context.Pipe(duplex=False)
            share = numbered[reader::READERS]
            proc = _start(context, _reader, (spill, share, otel, memory_spans, index, send))
            send.close()
            procs.append(proc)
            pipes.append(receive)
        failed: tuple[str, str, int] | None = None
        for receive in pipes:
            message = _receive(receive)
            if message[0] == "done":
                collector.add_notes(message[1])
            elif failed is None or message[2] < failed[2]:
                failed = message
        for proc in procs:
            proc.join()
        before = None if failed is None else failed[2] << ORDER_BITS
        for values in collector.rejected_rows(before):
            yield Rejected(*values)
        if failed is not None:
            _raise(failed[0], failed[1])
        yield from assembled(collector, otel)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()
        collector.close()


def _receive(pipe: Connection) -> Any:
    try:
        return pipe.recv()
    except EOFError:
        raise RuntimeError("a trace ingest process stopped without a result") from None
