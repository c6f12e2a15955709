"""Parsed batches of log lines, made here or in a forked worker process.

`parse_batches` turns numbered raw lines into `ParsedBatch`es (valid lines with their flag
reasons, quarantined lines, counts) and ends at the first bad line in strict mode or at an
unreadable gzip tail. `parse_in_process` runs exactly that generator over one file in a second
process, so that parsing (pure Python, holding the GIL) overlaps the SQLite writes of this one on
another core. Line numbers, reasons and raw bytes are the worker's own: the results are the same.

The worker sends each batch as one pickled message of plain tuples (about 2 µs per line each way,
a third of what pickling the dataclasses costs). The pipe blocks when the writer falls behind, so
at most a batch or two wait in memory; if this process dies the worker's next send fails and it exits.
"""

from __future__ import annotations

import multiprocessing
import pickle
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from operator import attrgetter
from pathlib import Path
from typing import Any

from ragtriage.errors import InputError
from ragtriage.logs.flagging import LineRules
from ragtriage.logs.reader import BadLine, LogLine, iter_raw_lines, parse_line

FORK_AVAILABLE = "fork" in multiprocessing.get_all_start_methods()
_LOG_LINE_FIELDS = attrgetter(*(f.name for f in fields(LogLine)))
_BAD_LINE_FIELDS = attrgetter(*(f.name for f in fields(BadLine)))


@dataclass(slots=True)
class ParsedBatch:
    """Lines parsed since the previous batch. `read` and `blank` count only this batch's lines."""

    good: list[LogLine] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    read: int = 0
    blank: int = 0
    final: bool = False
    """The last batch of the stream (also after a strict-mode stop or an input error)."""
    strict_error: BadLine | None = None
    """Strict mode stopped at this line (counted in `read`); `good` holds the lines before it."""
    input_error: str | None = None
    """The file could not be read further (message of the `InputError`)."""


def parse_batches(
    raw_lines: Iterable[tuple[int, bytes, bool]], rules: LineRules, strict: bool, batch_size: int
) -> Iterator[ParsedBatch]:
    """Parse `(line_no, raw, unterminated)` items into batches of at most `batch_size` good + bad lines.

    Valid lines get their per-line flag reasons (`LogLine.reasons`). The last batch has `final`.
    """
    good: list[LogLine] = []
    bad: list[BadLine] = []
    read = blank = 0
    lines = iter(raw_lines)
    while True:
        try:
            line_no, raw, unterminated = next(lines)
        except StopIteration:
            break
        except InputError as error:
            # A corrupt gzip tail must not lose the lines parsed before it.
            yield ParsedBatch(good, bad, read, blank, final=True, input_error=str(error))
            return
        read += 1
        parsed = parse_line(raw, line_no, unterminated=unterminated)
        if parsed is None:
            blank += 1
        elif type(parsed) is LogLine:
            parsed.reasons = rules.reasons(parsed)
            good.append(parsed)
        elif strict:
            yield ParsedBatch(good, [], read, blank, final=True, strict_error=parsed)  # type: ignore[arg-type]
            return
        else:
            bad.append(parsed)  # type: ignore[arg-type]
        if len(good) + len(bad) >= batch_size:
            yield ParsedBatch(good, bad, read, blank)
            good, bad = [], []
            read = blank = 0
    yield ParsedBatch(good, bad, read, blank, final=True)


def _encode(batch: ParsedBatch) -> bytes:
    strict_error = None if batch.strict_error is None else _BAD_LINE_FIELDS(batch.strict_error)
    return pickle.dumps(
        (
            list(map(_LOG_LINE_FIELDS, batch.good)),
            list(map(_BAD_LINE_FIELDS, batch.bad)),
            batch.read,
            batch.blank,
            batch.final,
            strict_error,
            batch.input_error,
        ),
        protocol=pickle.HIGHEST_PROTOCOL,
    )


def _decode(message: Any) -> ParsedBatch:
    good, bad, read, blank, final, strict_error, input_error = message
    return ParsedBatch(
        good=[LogLine(*item) for item in good],
        bad=[BadLine(*item) for item in bad],
        read=read,
        blank=blank,
        final=final,
        strict_error=None if strict_error is None else BadLine(*strict_error),
        input_error=input_error,
    )


def _work(receiver: Any, sender: Any, path: Path, rules: LineRules, strict: bool, batch_size: int) -> None:
    receiver.close()  # only the parent reads: a dead parent must break this side's pipe
    try:
        for batch in parse_batches(iter_raw_lines(path), rules, strict, batch_size):
            sender.send_bytes(_encode(batch))
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent stopped reading (stop request, strict error, or it died)
    except BaseException:  # noqa: BLE001 (a bug: the parent re-raises it with this traceback)
        try:
            sender.send_bytes(pickle.dumps(("crash", traceback.format_exc())))
        except OSError:
            pass
    finally:
        sender.close()


def _receive(receiver: Any, process: Any) -> Iterator[ParsedBatch]:
    while True:
        try:
            message = pickle.loads(receiver.recv_bytes())
        except EOFError:
            process.join()
            raise RuntimeError(
                f"the log parse worker ended without finishing (exit code {process.exitcode})"
            ) from None
        if message[0] == "crash":
            raise RuntimeError(f"the log parse worker failed:\n{message[1]}")
        batch = _decode(message)
        yield batch
        if batch.final:
            return


@contextmanager
def parse_in_process(
    path: Path, rules: LineRules, strict: bool, batch_size: int
) -> Iterator[Iterator[ParsedBatch]]:
    """`parse_batches` over `path` in a forked worker process; the batches arrive in order.

    The worker is stopped when the block exits (also early: a stop request or an error).
    """
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_work,
        args=(receiver, sender, path, rules, strict, batch_size),
        name="ragtriage-log-parser",
        daemon=True,
    )
    process.start()
    sender.close()
    try:
        yield _receive(receiver, process)
    finally:
        receiver.close()
        if process.is_alive():
            process.terminate()
        process.join()
