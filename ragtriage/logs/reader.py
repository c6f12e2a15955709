"""Read request-log files line by line: `.jsonl` or `.jsonl.gz`, strict or lenient.

Records are split on `\\n` only (a U+2028 inside a value is not a line break), in constant memory.
Each line goes through a fast path first (orjson to parse, msgspec to check the v1 types in C, no
pydantic) that accepts only lines it can prove valid; anything else (a byte-order mark, non-UTF-8 bytes, NaN, a trailing
comma, a duplicate key, a missing field, an unusual type) takes the slow path: the stdlib parser
and the pydantic model, which either accept the line or say exactly what is wrong and how to fix it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from ragtriage.errors import LogFormatError
from ragtriage.logs.exact_parser import BOM, parse_exact
from ragtriage.logs.fast_parser import parse_fast
from ragtriage.logs.line_files import READ_CHUNK_BYTES, iter_line_chunks, iter_line_ranges, iter_raw_lines
from ragtriage.logs.log_line import BadLine, LogLine, utc
from ragtriage.logs.schema import RequestLog

__all__ = [
    "BOM",
    "READ_CHUNK_BYTES",
    "BadLine",
    "LogLine",
    "iter_line_chunks",
    "iter_line_ranges",
    "iter_raw_lines",
    "parse_exact",
    "parse_fast",
    "parse_line",
    "read_log",
    "same_request",
]


def read_log(path: Path, *, strict: bool = False) -> Iterator[LogLine | BadLine]:
    """Parse every non-blank line of `path`; in strict mode the first bad line raises.

    Raises:
        LogFormatError: strict mode and a bad line (`file:line: reason — fix`).
    """
    for line_no, raw, unterminated in iter_raw_lines(path):
        parsed = parse_line(raw, line_no, unterminated=unterminated)
        if parsed is None:
            continue
        if strict and isinstance(parsed, BadLine):
            raise LogFormatError(parsed.describe(str(path)))
        yield parsed


def same_request(body: bytes | str, other: bytes | str) -> bool:
    """True when two stored bodies are the same request: equal bytes, or equal once both are
    validated (flat form mapped, times compared in UTC, key order and spacing ignored)."""
    if body == other:
        return True
    try:
        first, second = RequestLog.model_validate_json(body), RequestLog.model_validate_json(other)
    except ValidationError:
        return False
    for record in (first, second):
        if record.ts is not None:
            record.ts = utc(record.ts)
    return first.model_dump() == second.model_dump()


def parse_line(raw: bytes, line_no: int, *, unterminated: bool = False) -> LogLine | BadLine | None:
    """Parse one line's bytes; None for a blank line."""
    parsed = parse_fast(raw, line_no)
    if parsed is not None:
        return parsed
    return parse_exact(raw, line_no, unterminated)
