"""Read request-log files line by line: `.jsonl` or `.jsonl.gz`, strict or lenient.

Records are split on `\\n` only (a U+2028 inside a value is not a line break), in constant memory.
Each line goes through a fast path first (orjson to parse, msgspec to check the v1 types in C, no
pydantic) that accepts only lines it can prove valid; anything else (a byte-order mark, non-UTF-8 bytes, NaN, a trailing
comma, a duplicate key, a missing field, an unusual type) takes the slow path: the stdlib parser
and the pydantic model, which either accept the line or say exactly what is wrong and how to fix it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

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
    "request_differences",
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


TIMING_TOLERANCE_MS = 1.0
"""Times and `*_ms` values this close are the same: exporters of one trace keep different
precisions (the OpenTelemetry SDK's console JSON has microseconds, OTLP nanoseconds)."""


FIELDS_NAMED_FIRST = ("raw_query", "ts", "pipeline_version", "stages", "rewrite", "feedback", "answer")
"""The fields that tell two requests apart best, named first when they differ."""


def same_request(body: bytes | str, other: bytes | str) -> bool:
    """True when two stored bodies are the same request: equal bytes, or equal once both are
    validated (flat form mapped, times compared in UTC, key order and spacing ignored, times and
    `*_ms` durations within `TIMING_TOLERANCE_MS`)."""
    return body == other or not request_differences(body, other, limit=1)


def request_differences(body: bytes | str, other: bytes | str, *, limit: int = 3) -> list[str]:
    """Up to `limit` fields in which two bodies differ as requests, the first difference under
    each top-level field (`raw_query`, `stages.bm25[2].chunk_id`; `body` when one does not
    validate); empty when they are the same request (see `same_request`)."""
    try:
        first, second = RequestLog.model_validate_json(body), RequestLog.model_validate_json(other)
    except ValidationError:
        return ["body"]
    for record in (first, second):
        if record.ts is not None:
            record.ts = utc(record.ts)
    one, two = first.model_dump(), second.model_dump()
    found: list[str] = []
    first_named = {name: index for index, name in enumerate(FIELDS_NAMED_FIRST)}
    keys = sorted(one.keys() | two.keys(), key=lambda k: (first_named.get(str(k), len(first_named)), str(k)))
    for key in keys:
        if key not in one or key not in two:
            difference: str | None = str(key)
        else:
            difference = _difference(one[key], two[key], str(key), timing=str(key).endswith("_ms"))
        if difference is not None:
            found.append(difference)
            if len(found) >= limit:
                break
    return found


def _difference(first: Any, second: Any, path: str, *, timing: bool) -> str | None:
    """Path of the first difference; datetimes, and numbers under a `*_ms` key, may differ by the
    tolerance."""
    if isinstance(first, dict) and isinstance(second, dict):
        for key in sorted(first.keys() | second.keys(), key=str):
            inner = f"{path}.{key}" if path else str(key)
            if key not in first or key not in second:
                return inner
            found = _difference(first[key], second[key], inner, timing=timing or str(key).endswith("_ms"))
            if found is not None:
                return found
        return None
    if isinstance(first, list) and isinstance(second, list):
        if len(first) != len(second):
            return f"{path} (length {len(first)} vs {len(second)})"
        for index, (a, b) in enumerate(zip(first, second, strict=True)):
            found = _difference(a, b, f"{path}[{index}]", timing=timing)
            if found is not None:
                return found
        return None
    if isinstance(first, datetime) and isinstance(second, datetime):
        close = abs(utc(first) - utc(second)) <= timedelta(milliseconds=TIMING_TOLERANCE_MS)
        return None if close else path
    numbers = (int, float)
    if (
        timing
        and isinstance(first, numbers)
        and isinstance(second, numbers)
        and not isinstance(first, bool)
        and not isinstance(second, bool)
    ):
        return None if abs(first - second) <= TIMING_TOLERANCE_MS else path
    return None if first == second else path


def parse_line(raw: bytes, line_no: int, *, unterminated: bool = False) -> LogLine | BadLine | None:
    """Parse one line's bytes; None for a blank line."""
    parsed = parse_fast(raw, line_no)
    if parsed is not None:
        return parsed
    return parse_exact(raw, line_no, unterminated)
