"""Parsed batches of log lines, made here or in a forked worker process.

`parse_batches` turns numbered raw lines into `ParsedBatch`es (valid lines as ready-to-insert rows
with their flag reasons, quarantined lines, counts) and ends at the first bad line in strict mode or at an
unreadable gzip tail. `parse_in_process` runs exactly that generator over one file in a second
process, so that parsing (pure Python, holding the GIL) overlaps the SQLite writes of this one on
another core. Line numbers, reasons and raw bytes are the worker's own: the results are the same.

The worker sends each batch as one pickled message of plain tuples whose bodies are bytes (no
text encoding on either side). The pipe blocks when the writer falls behind, so
at most a batch or two wait in memory; if this process dies the worker's next send fails and it exits.
"""

from __future__ import annotations

import multiprocessing
import pickle
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from operator import attrgetter
from pathlib import Path
from typing import Any

from ragtriage.errors import InputError
from ragtriage.logs.flagging import LineRules
from ragtriage.logs.reader import BadLine, LogLine, iter_raw_lines, parse_exact, parse_fast

FORK_AVAILABLE = "fork" in multiprocessing.get_all_start_methods()
_BAD_LINE_FIELDS = attrgetter(*(f.name for f in fields(BadLine)))

#: Column order of `ParsedBatch.rows` (the `request_log` insert).
REQUEST_COLUMNS = (
    "request_id",
    "ts",
    "kb",
    "session_hash",
    "user_hash",
    "raw_query",
    "rating",
    "escalated",
    "body",
    "source_file",
    "source_line",
    "recovered",
    "ingested_at",
)
ROW_REQUEST_ID, ROW_TS, ROW_BODY, ROW_SOURCE_LINE, ROW_RECOVERED = 0, 1, 8, 10, 11


@dataclass(slots=True)
class ParsedBatch:
    """Lines parsed since the previous batch, ready for the writer.

    `read` and `blank` count only this batch's lines.
    """

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    """Valid lines as `request_log` rows in `REQUEST_COLUMNS` order (SQLite types: `ts` and
    `ingested_at` as naive-UTC text, booleans as 0/1, `body` as UTF-8 bytes)."""
    timed: list[tuple[str, str, int]] = field(default_factory=list)
    """`(session, request_id, ts in epoch µs)` of the rows that have both, for the follow-up rule."""
    flags: list[tuple[int, list[str]]] = field(default_factory=list)
    """`(index into rows, reasons)` of the rows the per-line flag rules flagged."""
    bad: list[BadLine] = field(default_factory=list)
    read: int = 0
    blank: int = 0
    final: bool = False
    """The last batch of the stream (also after a strict-mode stop or an input error)."""
    strict_error: BadLine | None = None
    """Strict mode stopped at this line (counted in `read`); `rows` holds the lines before it."""
    input_error: str | None = None
    """The file could not be read further (message of the `InputError`)."""


def sqlite_time(moment: datetime) -> str:
    """The naive-UTC text SQLAlchemy's SQLite `DateTime` stores, compares and parses back."""
    if moment.utcoffset():
        moment = moment.astimezone(timezone.utc)
    return moment.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def parse_batches(
    raw_lines: Iterable[tuple[int, bytes, bool]],
    rules: LineRules,
    strict: bool,
    batch_size: int,
    source: str,
) -> Iterator[ParsedBatch]:
    """Parse `(line_no, raw, unterminated)` items into batches of at most `batch_size` rows + bad lines.

    `source` is stored with every row. The last batch has `final`.
    """
    batch = ParsedBatch()
    ingested_at = sqlite_time(datetime.now(timezone.utc))
    lines = iter(raw_lines)
    reasons_of = rules.reasons
    while True:
        try:
            line_no, raw, unterminated = next(lines)
        except StopIteration:
            break
        except InputError as error:
            # A corrupt gzip tail must not lose the lines parsed before it.
            batch.final, batch.input_error = True, str(error)
            yield batch
            return
        batch.read += 1
        # parse_line, inlined: this loop runs for every line.
        parsed = parse_fast(raw, line_no) or parse_exact(raw, line_no, unterminated)
        if parsed is None:
            batch.blank += 1
            continue
        if type(parsed) is LogLine:
            rows = batch.rows
            if parsed.session is not None and parsed.ts_us is not None:
                batch.timed.append((parsed.session, parsed.request_id, parsed.ts_us))
            reasons = reasons_of(parsed)
            if reasons:
                batch.flags.append((len(rows), reasons))
            rows.append(
                (
                    parsed.request_id,
                    parsed.ts_text,
                    parsed.kb,
                    parsed.session,
                    parsed.user,
                    parsed.raw_query,
                    parsed.rating,
                    int(parsed.escalated),
                    parsed.body,
                    source,
                    line_no,
                    int(parsed.recovered),
                    ingested_at,
                )
            )
        elif strict:
            batch.final, batch.strict_error = True, parsed  # type: ignore[assignment]
            yield batch
            return
        else:
            batch.bad.append(parsed)  # type: ignore[arg-type]
        if len(batch.rows) + len(batch.bad) >= batch_size:
            yield batch
            batch = ParsedBatch()
            ingested_at = sqlite_time(datetime.now(timezone.utc))
    batch.final = True
    yield batch


def _encode(batch: ParsedBatch) -> bytes:
    strict_error = None if batch.strict_error is None else _BAD_LINE_FIELDS(batch.strict_error)
    return pickle.dumps(
        (
            batch.rows,
            batch.timed,
            batch.flags,
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
    rows, timed, flags, bad, read, blank, final, strict_error, input_error = message
    return ParsedBatch(
        rows=rows,
        timed=timed,
        flags=flags,
        bad=[BadLine(*item) for item in bad],
        read=read,
        blank=blank,
        final=final,
        strict_error=None if strict_error is None else BadLine(*strict_error),
        input_error=input_error,
    )


def _work(
    receiver: Any, sender: Any, path: Path, rules: LineRules, strict: bool, batch_size: int, source: str
) -> None:
    receiver.close()  # only the parent reads: a dead parent must break this side's pipe
    try:
        for batch in parse_batches(iter_raw_lines(path), rules, strict, batch_size, source):
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
    path: Path, rules: LineRules, strict: bool, batch_size: int, source: str
) -> Iterator[Iterator[ParsedBatch]]:
    """`parse_batches` over `path` in a forked worker process; the batches arrive in order.

    The worker is stopped when the block exits (also early: a stop request or an error).
    """
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_work,
        args=(receiver, sender, path, rules, strict, batch_size, source),
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
