"""Read request-log files line by line: `.jsonl` or `.jsonl.gz`, strict or lenient.

Records are split on `\\n` only (a U+2028 inside a value is not a line break), in constant memory.
Each line goes through a fast path first (orjson to parse, msgspec to check the v1 types in C, no
pydantic) that accepts only lines it can prove valid; anything else (a byte-order mark, non-UTF-8 bytes, NaN, a trailing
comma, a duplicate key, a missing field, an unusual type) takes the slow path: the stdlib parser
and the pydantic model, which either accept the line or say exactly what is wrong and how to fix it.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, Union

import msgspec
import orjson
from pydantic import ValidationError

from ragtriage.errors import InputError, LogFormatError
from ragtriage.logs.schema import FLAT_STAGE_KEYS, RequestLog, map_flat_form

BOM = b"\xef\xbb\xbf"
READ_CHUNK_BYTES = 1 << 20
_FLAT_KEYS = frozenset((*FLAT_STAGE_KEYS, "rewritten_queries", "user_feedback"))
_TRAILING_COMMA = re.compile(r",\s*[}\]]")


@dataclass(slots=True)
class LogLine:
    """One valid log line: the columns the store filters on plus the body as JSON text."""

    line_no: int
    request_id: str
    ts_us: int | None
    """Request time as integer microseconds since the Unix epoch (UTC): exact, cheap to compare."""
    ts_text: str | None
    """The same time as the naive-UTC text SQLAlchemy's SQLite `DateTime` stores and compares."""
    kb: str | None
    session: str | None
    user: str | None
    raw_query: str
    rating: str | None
    escalated: bool
    follow_up_marked: bool
    """The producer marked this request as followed up (`feedback.follow_up`)."""
    citations_empty: bool
    """`citations` was logged and is `[]`."""
    answer: str | None
    confidence: float | None
    body: bytes
    """The line as logged, UTF-8 (a GB18030 line re-encoded, a byte-order mark and surrounding
    blanks dropped): valid for `RequestLog`, unknown fields and the flat form included."""
    recovered: bool = False
    """Decoded as GB18030 because it was not UTF-8."""

    @property
    def ts(self) -> datetime | None:
        """Request time, aware UTC."""
        return None if self.ts_us is None else _EPOCH + timedelta(microseconds=self.ts_us)

    def record(self) -> RequestLog:
        """The line as a validated `RequestLog`."""
        return RequestLog.model_validate_json(self.body)


@dataclass(slots=True)
class BadLine:
    """A line that cannot be ingested: where, why (`kind` + message), how to fix it, and its bytes."""

    line_no: int
    kind: str
    message: str
    fix: str
    raw: bytes

    def describe(self, source: str) -> str:
        """`file:line: reason — fix`, the strict-mode error and the quarantine reason."""
        return f"{source}:{self.line_no}: {self.message} — {self.fix}"


# ---------------------------------------------------------------- files


def _open_binary(path: Path) -> Any:
    handle = open(path, "rb")
    if handle.read(2) == b"\x1f\x8b":
        handle.seek(0)
        return gzip.GzipFile(fileobj=handle, mode="rb")
    handle.seek(0)
    return handle


def iter_raw_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """Yield `(line_no, raw_bytes, unterminated)` for every line of a `.jsonl` or gzip file.

    Only `\\n` separates lines. `unterminated` is True for a last line without a newline.

    Raises:
        InputError: the file is missing, or its gzip stream is corrupt or cut off.
    """
    try:
        handle = _open_binary(path)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    line_no = 0
    with handle:
        rest = b""
        # GzipFile.read(n) loses everything it decompressed when the stream turns out to be cut
        # off; read1 hands over each decompressed piece, so the lines before the cut are yielded.
        read = handle.read1 if isinstance(handle, gzip.GzipFile) else handle.read
        try:
            while chunk := read(READ_CHUNK_BYTES):
                parts = (rest + chunk).split(b"\n") if rest else chunk.split(b"\n")
                rest = parts.pop()
                for part in parts:
                    line_no += 1
                    yield line_no, part, False
        except (EOFError, gzip.BadGzipFile, OSError) as error:
            raise InputError(_cut_message(path, line_no, error)) from None
        if rest:
            yield line_no + 1, rest, True


def _cut_message(path: Path, line_no: int, error: BaseException) -> str:
    return (
        f"{path}: the gzip stream is corrupt or cut off after line {line_no} ({error}); "
        "re-copy the file (lines before that point were read)"
    )


def iter_line_chunks(path: Path, lines_per_chunk: int) -> Iterator[tuple[int, bytes, bool]]:
    """Yield `(first_line_no, data, unterminated)`: the file in pieces of `lines_per_chunk` whole
    lines (the last piece may be shorter), each line ending in `\n` except, when `unterminated`,
    the last line of the last piece. Splitting `data` on `\n` gives the lines `iter_raw_lines`
    yields, without a Python object per line here.

    Raises:
        InputError: the file is missing, or its gzip stream is corrupt or cut off (raised after
            the pieces of whole lines read before the cut).
    """
    try:
        handle = _open_binary(path)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    first = 1
    blocks: list[bytes] = []
    counted = 0  # newlines in `blocks`
    with handle:
        read = handle.read1 if isinstance(handle, gzip.GzipFile) else handle.read
        try:
            while block := read(READ_CHUNK_BYTES):
                start = 0
                newlines = block.count(b"\n")
                while counted + newlines >= lines_per_chunk:
                    end = start - 1
                    for _ in range(lines_per_chunk - counted):
                        end = block.index(b"\n", end + 1)
                    blocks.append(block[start : end + 1])
                    yield first, b"".join(blocks), False
                    first += lines_per_chunk
                    newlines -= lines_per_chunk - counted
                    blocks, counted, start = [], 0, end + 1
                blocks.append(block[start:] if start else block)
                counted += newlines
        except (EOFError, gzip.BadGzipFile, OSError) as error:
            data = b"".join(blocks)
            whole = data[: data.rfind(b"\n") + 1]
            if whole:
                yield first, whole, False
            raise InputError(_cut_message(path, first - 1 + counted, error)) from None
    data = b"".join(blocks)
    if data:
        yield first, data, not data.endswith(b"\n")


def iter_line_ranges(path: Path, lines_per_chunk: int) -> Iterator[tuple[int, int, int, bool]] | None:
    """`(first_line_no, offset, length, unterminated)` of the pieces `iter_line_chunks` would
    yield, without keeping their bytes (the reader of a piece reads its range itself); None for
    a gzip file, whose bytes only come in order through `iter_line_chunks`.

    Raises:
        InputError: the file is missing or unreadable.
    """
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed by the generator)
        if handle.read(2) == b"\x1f\x8b":
            handle.close()
            return None
        handle.seek(0)
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    return _ranges(handle, lines_per_chunk)


def _ranges(handle: Any, lines_per_chunk: int) -> Iterator[tuple[int, int, int, bool]]:
    first = 1
    start = 0  # file offset where the current piece starts
    position = 0  # file offset of the block being read
    counted = 0  # newlines between `start` and `position`
    last_byte = b"\n"
    with handle:
        while block := handle.read(READ_CHUNK_BYTES):
            last_byte = block[-1:]
            cursor = 0
            newlines = block.count(b"\n")
            while counted + newlines >= lines_per_chunk:
                end = cursor - 1
                for _ in range(lines_per_chunk - counted):
                    end = block.index(b"\n", end + 1)
                piece_end = position + end + 1
                yield first, start, piece_end - start, False
                first += lines_per_chunk
                newlines -= lines_per_chunk - counted
                start, counted, cursor = piece_end, 0, end + 1
            counted += newlines
            position += len(block)
    if position > start:
        # What is left: whole lines, and perhaps a last line without a newline.
        yield first, start, position - start, last_byte != b"\n"


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


# ---------------------------------------------------------------- lines


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
            record.ts = _utc(record.ts)
    return first.model_dump() == second.model_dump()


def parse_line(raw: bytes, line_no: int, *, unterminated: bool = False) -> LogLine | BadLine | None:
    """Parse one line's bytes; None for a blank line."""
    parsed = parse_fast(raw, line_no)
    if parsed is not None:
        return parsed
    return parse_exact(raw, line_no, unterminated)


def _utc(moment: datetime) -> datetime:
    # A time without a zone is taken as UTC: producers log server time in UTC by convention.
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_ONE_US = timedelta(microseconds=1)


def _plain_ts_columns(text: str) -> tuple[int, str]:
    """`(epoch microseconds, naive-UTC SQLite text)` of a time in `_PLAIN_ISO_TIME` form (no zone
    means UTC).

    Raises:
        ValueError: another form, or not a valid time (the slow path decides).
    """
    match = _PLAIN_ISO_TIME.match(text)
    if match is None:
        raise ValueError(text)
    moment = datetime.fromisoformat(text)
    fraction, zone = match.groups()
    if zone is None or zone == "Z" or zone == "+00:00":
        # Already UTC: the SQLite text is a re-arrangement of the logged one.
        epoch = _EPOCH if moment.tzinfo is not None else _NAIVE_EPOCH
        sqlite_text = f"{text[:10]} {text[11:19]}.{(fraction or '.')[1:]:0<6}"
        return (moment - epoch) // _ONE_US, sqlite_text
    moment = moment.astimezone(timezone.utc)
    # `YYYY-MM-DD HH:MM:SS.ffffff+00:00` without its offset.
    return (moment - _EPOCH) // _ONE_US, moment.isoformat(" ", "microseconds")[:26]


def _ts_columns(ts: datetime | None) -> tuple[int | None, str | None]:
    """`(epoch microseconds, naive-UTC SQLite text)` of an aware UTC time."""
    if ts is None:
        return None, None
    return (ts - _EPOCH) // _ONE_US, ts.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


class _FastItem(msgspec.Struct):
    chunk_id: Annotated[str, msgspec.Meta(min_length=1)]
    score: float | None = None


_FastStage = list[Union[str, _FastItem]]


class _FastRewrite(msgspec.Struct):
    normalized_query: str | None = None
    rewritten_query: str | None = None
    keywords: list[str] | None = None
    aliases: dict[str, list[str]] | list[str] | None = None
    sub_queries: list[str] | None = None
    mode: str | None = None


class _FastStages(msgspec.Struct):
    bm25: _FastStage | None = None
    dense: _FastStage | None = None
    fused: _FastStage | None = None
    reranked: _FastStage | None = None
    final_context: _FastStage | None = None


class _FastFeedback(msgspec.Struct):
    rating: str | int | float | None = None
    reason: str | None = None
    escalated: bool | None = False
    follow_up: bool | str | None = None


class _FastRecord(msgspec.Struct):
    """`RequestLog` in msgspec's strict types: what it accepts, the pydantic model accepts with the
    same values (checked by a property test). Unknown fields are ignored here and kept in the body."""

    request_id: Annotated[str, msgspec.Meta(min_length=1)]
    raw_query: str
    schema_version: int = 1
    ts: str | None = None
    kb: str | None = None
    session: str | None = None
    user: str | None = None
    rewrite: _FastRewrite | None = None
    stages: _FastStages | None = None
    answer: str | None = None
    citations: _FastStage | None = None
    feedback: _FastFeedback | None = None
    latency_ms: float | None = None
    pipeline_version: str | None = None
    config_hash: str | None = None
    confidence: float | None = None
    """Not a v1 field: an extra some producers log, read for the low-confidence rule."""


# A blank between a key's closing quote and its colon would let a duplicate key hide from the
# `":` count below; no JSON writer emits one, and such lines take the exact slow path.
_BLANK_BEFORE_COLON = re.compile(rb'"[ \t\r]+:')
# The time form every logger writes, read the same by `datetime.fromisoformat` and pydantic;
# other ISO 8601 forms (basic format, week dates, lower-case `t`, Unix seconds) take the slow path.
_PLAIN_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)?\Z", re.ASCII)
"""Groups: the fraction with its dot, and the zone."""


def parse_fast(raw: bytes, line_no: int) -> LogLine | None:
    """The common case in about 20 µs, or None when the line needs the slow path.

    orjson parses, msgspec checks every v1 type in C, and duplicate keys (which both libraries
    silently resolve to the last value) are found by counting `":` in the line and in orjson's
    re-serialization: a difference sends the line to the exact slow path. The body stored is the
    line itself, so nothing is re-serialized for storage.
    """
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    data = obj if _FLAT_KEYS.isdisjoint(obj) else map_flat_form(obj)
    try:
        record = _FAST_CONVERT(data, _FastRecord)
    except msgspec.ValidationError:
        return None
    # A line orjson would write byte for byte has no duplicate key; any other is checked by counting.
    again = orjson.dumps(obj)
    if again != raw and (again.count(b'":') != raw.count(b'":') or _BLANK_BEFORE_COLON.search(raw)):
        return None
    ts_us = ts_text = None
    if record.ts is not None:
        try:
            ts_us, ts_text = _plain_ts_columns(record.ts)
        except ValueError:
            return None
    feedback = record.feedback
    rating = escalated = follow_up = None
    if feedback is not None:
        rating, escalated, follow_up = feedback.rating, feedback.escalated, feedback.follow_up
    citations = record.citations
    confidence = record.confidence
    return LogLine(
        line_no,
        record.request_id,
        ts_us,
        ts_text,
        record.kb,
        record.session,
        record.user,
        record.raw_query,
        None if rating is None else str(rating),
        bool(escalated),
        bool(follow_up),
        citations is not None and not citations,
        record.answer,
        None if confidence is None else float(confidence),
        raw.strip(),
    )


_FAST_CONVERT = msgspec.convert


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _NonFiniteNumber(ValueError):
    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.token = token


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


def _reject_constant(token: str) -> Any:
    raise _NonFiniteNumber(token)


def _is_union_tag(part: Any) -> bool:
    # pydantic names union branches in `loc` (`str`, `StageItem`, `list[str]`); they are not field names.
    return isinstance(part, str) and (
        part in ("str", "int", "float", "bool") or part[:1].isupper() or "[" in part
    )


_JSON_KIND = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def parse_exact(raw: bytes, line_no: int, unterminated: bool) -> LogLine | BadLine | None:
    """Exact parsing with precise reasons; also decodes GB18030 and drops a byte-order mark."""

    def bad(kind: str, message: str, fix: str) -> BadLine:
        return BadLine(line_no=line_no, kind=kind, message=message, fix=fix, raw=raw)

    data = raw[len(BOM) :] if raw.startswith(BOM) else raw
    if not data.strip():
        return None
    recovered = False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        try:
            text = data.decode("gb18030")
        except UnicodeDecodeError:
            return bad(
                "bad_encoding",
                f"bytes that are neither UTF-8 nor GB18030 at byte {error.start}",
                "re-encode the file as UTF-8",
            )
        recovered = True
    try:
        obj = json.loads(text, object_pairs_hook=_object_without_duplicates, parse_constant=_reject_constant)
    except _DuplicateKey as error:
        return bad("duplicate_key", f"duplicate key {error.key!r}", "keep one value per key")
    except _NonFiniteNumber as error:
        return bad("nan", f"{error.token} is not valid JSON", "log null (or a finite number) instead")
    except RecursionError:
        return bad("invalid_json", "JSON nested too deeply", "flatten the record")
    except json.JSONDecodeError as error:
        if _TRAILING_COMMA.search(text):
            return bad(
                "trailing_comma", f"trailing comma (column {error.colno}: {error.msg})", "remove the comma"
            )
        if unterminated:
            return bad(
                "truncated",
                f"last line has no newline and is cut off ({error.msg} at column {error.colno})",
                "the file was copied while being written; copy it again once complete",
            )
        return bad(
            "invalid_json", f"not valid JSON: {error.msg} at column {error.colno}", "fix the JSON syntax"
        )
    if not isinstance(obj, dict):
        kind = "null" if obj is None else _JSON_KIND.get(type(obj), type(obj).__name__)
        return bad("not_object", f"the line is {kind}, not a JSON object", "write one {…} object per line")
    mapped = map_flat_form(obj)
    try:
        record = RequestLog.model_validate(mapped)
    except ValidationError as error:
        # In a union (id or object) the deepest error is the informative one.
        first = max(error.errors(), key=lambda e: len(e["loc"]))
        where = ".".join(str(p) for p in first["loc"] if not _is_union_tag(p))
        if first["type"] == "missing":
            return bad("missing_field", f"missing required field '{where}'", f"add '{where}' to every record")
        got = repr(first.get("input"))[:60]
        return bad(
            "invalid_field", f"field '{where}': {first['msg']} (got {got})", "fix the value or drop the field"
        )
    try:
        # A `\\uD8xx` escape decodes to half a surrogate pair, which no UTF-8 store can hold.
        json.dumps(mapped, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return bad(
            "bad_encoding", "a \\uD8xx escape that is half of a surrogate pair", "log whole characters"
        )
    ts = _utc(record.ts) if record.ts is not None else None
    feedback = record.feedback
    confidence = mapped.get("confidence")
    ts_us, ts_text = _ts_columns(ts)
    return LogLine(
        line_no=line_no,
        request_id=record.request_id,
        ts_us=ts_us,
        ts_text=ts_text,
        kb=record.kb,
        session=record.session,
        user=record.user,
        raw_query=record.raw_query,
        rating=None if feedback is None or feedback.rating is None else str(feedback.rating),
        escalated=bool(feedback is not None and feedback.escalated),
        follow_up_marked=bool(feedback is not None and feedback.follow_up),
        citations_empty=record.citations is not None and not record.citations,
        answer=record.answer,
        confidence=float(confidence)
        if isinstance(confidence, (int, float)) and not isinstance(confidence, bool)
        else None,
        body=(text.encode("utf-8") if recovered else data).strip(),
        recovered=recovered,
    )
