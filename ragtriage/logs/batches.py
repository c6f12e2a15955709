"""Parsed batches of log lines: what the parser hands the writer.

`parse_batches` turns numbered raw lines into `ParsedBatch`es (valid lines as ready-to-insert
rows with their flag reasons and session times, quarantined lines, counts) and ends at the first
bad line in strict mode or at an unreadable gzip tail.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ragtriage.errors import InputError
from ragtriage.logs.exact_parser import parse_exact
from ragtriage.logs.fast_parser import parse_fast
from ragtriage.logs.flagging import LineRules
from ragtriage.logs.log_line import BadLine, LogLine

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
    "pipeline_version",
    "result_count",
    "rewrite_fired",
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
    raw_lines: Iterable[tuple[int, bytes | BadLine, bool]],
    rules: LineRules,
    strict: bool,
    batch_size: int,
    source: str,
) -> Iterator[ParsedBatch]:
    """Parse `(line_no, raw, unterminated)` items into batches of at most `batch_size` rows + bad lines
    (`raw` may be a `BadLine` already: a record a trace-format reader rejected).

    `source` is stored with every row. The last batch has `final`.
    """
    # Locals, not attribute lookups, in the loop: it runs for every line.
    rows: list[tuple[Any, ...]] = []
    timed: list[tuple[str, str, int]] = []
    flags: list[tuple[int, list[str]]] = []
    bad: list[BadLine] = []
    read = blank = 0
    ingested_at = sqlite_time(datetime.now(timezone.utc))
    lines = iter(raw_lines)
    reasons_of = rules.reasons

    def batch(**ending: Any) -> ParsedBatch:
        return ParsedBatch(rows, timed, flags, bad, read, blank, **ending)

    while True:
        try:
            line_no, raw, unterminated = next(lines)
        except StopIteration:
            break
        except InputError as error:
            # A corrupt gzip tail must not lose the lines parsed before it.
            yield batch(final=True, input_error=str(error))
            return
        read += 1
        # parse_line, inlined. A trace-format reader hands over records it rejected as BadLines.
        parsed = (
            raw
            if isinstance(raw, BadLine)
            else parse_fast(raw, line_no) or parse_exact(raw, line_no, unterminated)
        )
        if parsed is None:
            blank += 1
            continue
        if type(parsed) is LogLine:
            if parsed.session is not None and parsed.ts_us is not None:
                timed.append((parsed.session, parsed.request_id, parsed.ts_us))
            reasons = reasons_of(parsed)
            if reasons:
                flags.append((len(rows), reasons))
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
                    parsed.pipeline_version,
                    parsed.result_count,
                    None if parsed.rewrite_fired is None else int(parsed.rewrite_fired),
                )
            )
        elif strict:
            yield batch(final=True, strict_error=parsed)
            return
        else:
            bad.append(parsed)  # type: ignore[arg-type]
        if len(rows) + len(bad) >= batch_size:
            yield batch()
            rows, timed, flags, bad = [], [], [], []
            read = blank = 0
            ingested_at = sqlite_time(datetime.now(timezone.utc))
    yield batch(final=True)
