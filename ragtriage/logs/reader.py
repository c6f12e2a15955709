"""Read request-log files line by line: `.jsonl` or `.jsonl.gz`, strict or lenient.

Records are split on `\\n` only (a U+2028 inside a value is not a line break), in constant memory.
Each line goes through a fast path first (orjson plus plain type checks, no pydantic) that accepts
only lines it can prove valid; anything else (a byte-order mark, non-UTF-8 bytes, NaN, a trailing
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
from operator import itemgetter, methodcaller
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from ragtriage.errors import InputError, LogFormatError
from ragtriage.logs.schema import FLAT_STAGE_KEYS, STAGE_NAMES, RequestLog, map_flat_form

BOM = b"\xef\xbb\xbf"
READ_CHUNK_BYTES = 1 << 20
_FLAT_KEYS = frozenset((*FLAT_STAGE_KEYS, "rewritten_queries", "user_feedback"))
_TRAILING_COMMA = re.compile(r",\s*[}\]]")
_NUMBER = (int, float)
_TEXT_FIELDS = ("kb", "session", "user", "answer", "pipeline_version", "config_hash")


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
    body: str
    """Schema v1 JSON (flat form mapped, `ts` normalized to UTC, unknown fields kept)."""
    recovered: bool = False
    """Decoded as GB18030 because it was not UTF-8."""
    reasons: list[str] | None = None
    """Flag reasons of the per-line rules, when the parser already applied them (else the writer does)."""

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
            raise InputError(
                f"{path}: the gzip stream is corrupt or cut off after line {line_no} ({error}); "
                "re-copy the file (lines before that point were read)"
            ) from None
        if rest:
            yield line_no + 1, rest, True


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


def parse_line(raw: bytes, line_no: int, *, unterminated: bool = False) -> LogLine | BadLine | None:
    """Parse one line's bytes; None for a blank line."""
    parsed = _parse_fast(raw, line_no)
    if parsed is not None:
        return parsed
    return _parse_slow(raw, line_no, unterminated)


def _utc(moment: datetime) -> datetime:
    # A time without a zone is taken as UTC: producers log server time in UTC by convention.
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def _iso_z(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)


def _ts_columns(ts: datetime | None) -> tuple[int | None, str | None]:
    """`(epoch microseconds, naive-UTC SQLite text)` of an aware UTC time."""
    if ts is None:
        return None, None
    return (ts - _EPOCH) // _ONE_US, ts.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def _ts_fields(ts: datetime) -> tuple[str, int, str]:
    """`(ISO text with Z, epoch microseconds, SQLite text)` of an aware UTC time, formatting it once."""
    iso = ts.isoformat()  # YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00
    sqlite_text = f"{iso[:10]} {iso[11:19]}.{ts.microsecond:06d}"
    return iso[:-6] + "Z", (ts - _EPOCH) // _ONE_US, sqlite_text


def _str_list(value: Any) -> bool:
    return type(value) is list and set(map(type, value)) <= _STR_TYPE


# The checks below use C-level map/set over a list instead of a Python loop per item: a line
# carries dozens of stage items, and this runs for every line.
_get_chunk_id = itemgetter("chunk_id")
_get_score = methodcaller("get", "score")
_STR_TYPE = {str}
_DICT_TYPE = {dict}
_SCORE_TYPES = {float, int, type(None)}
_OPTIONAL_STR = {str, type(None)}


def _rewrite_ok(rewrite: Any) -> bool:
    if type(rewrite) is not dict:
        return False
    texts = (rewrite.get("normalized_query"), rewrite.get("rewritten_query"), rewrite.get("mode"))
    if not set(map(type, texts)) <= _OPTIONAL_STR:
        return False
    for key in ("keywords", "sub_queries"):
        value = rewrite.get(key)
        if value is not None and not _str_list(value):
            return False
    aliases = rewrite.get("aliases")
    if aliases is None or _str_list(aliases):
        return True
    return type(aliases) is dict and all(map(_str_list, aliases.values()))


def _parse_fast(raw: bytes, line_no: int) -> LogLine | None:
    """The common case in a few microseconds, or None when the line needs the slow path."""
    # Duplicate keys are found by counting `":` before and after orjson (which silently keeps the
    # last duplicate): any difference sends the line to the exact slow path. Lines where the count
    # could be off the other way (a `\u00xx` escape spelling a quote or colon, a blank between a
    # key and its colon) go there up front. Left: a key followed by two or more blanks AND a
    # duplicate key offsetting it exactly — no JSON writer produces that.
    if b"\\u00" in raw or b'" :' in raw or b'"\t:' in raw:
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict:
        return None
    flat = not _FLAT_KEYS.isdisjoint(obj)
    data = map_flat_form(obj) if flat else obj
    request_id = data.get("request_id")
    raw_query = data.get("raw_query")
    if type(request_id) is not str or not request_id or type(raw_query) is not str:
        return None
    if type(data.get("schema_version", 1)) is not int:
        return None
    texts = list(map(data.get, _TEXT_FIELDS))
    if not set(map(type, texts)) <= _OPTIONAL_STR:
        return None
    for key in ("latency_ms", "confidence"):
        value = data.get(key)
        if value is not None and type(value) not in _NUMBER:
            return None
    ts_value = data.get("ts")
    ts_us = ts_text = None
    if ts_value is not None:
        if type(ts_value) is not str:
            return None
        try:
            ts = _utc(datetime.fromisoformat(ts_value))
        except ValueError:
            return None
        data["ts"], ts_us, ts_text = _ts_fields(ts)
    rewrite = data.get("rewrite")
    if rewrite is not None and not _rewrite_ok(rewrite):
        return None
    stages = data.get("stages")
    citations = data.get("citations")
    stage_lists = [citations] if citations is not None else []
    if stages is not None:
        if type(stages) is not dict:
            return None
        stage_lists.extend(items for items in map(stages.get, STAGE_NAMES) if items is not None)
    # One C-level pass over all `{chunk_id, score}` items; plain-id lists need only a type set.
    stage_items: list[Any] = []
    for items in stage_lists:
        if type(items) is not list:
            return None
        kinds = set(map(type, items))
        if kinds == _DICT_TYPE:
            stage_items += items
        elif not kinds <= _STR_TYPE:
            return None
    if stage_items:
        try:
            chunk_ids = list(map(_get_chunk_id, stage_items))
        except KeyError:
            return None
        if not (
            set(map(type, chunk_ids)) == _STR_TYPE
            and all(chunk_ids)
            and set(map(type, map(_get_score, stage_items))) <= _SCORE_TYPES
        ):
            return None
    feedback = data.get("feedback")
    rating: Any = None
    escalated: Any = False
    follow_up: Any = None
    if feedback is not None:
        if type(feedback) is not dict:
            return None
        rating, escalated, follow_up = (
            feedback.get("rating"),
            feedback.get("escalated"),
            feedback.get("follow_up"),
        )
        reason = feedback.get("reason")
        if (
            (rating is not None and type(rating) not in (str, int, float))
            or (escalated is not None and type(escalated) is not bool)
            or (follow_up is not None and type(follow_up) not in (bool, str))
            or (reason is not None and type(reason) is not str)
        ):
            return None
    body = orjson.dumps(data)
    # orjson keeps the last of duplicate keys silently; fewer keys out than `":` in means duplicates.
    if (orjson.dumps(obj) if flat else body).count(b'":') != raw.count(b'":'):
        return None
    confidence = data.get("confidence")
    return LogLine(
        line_no=line_no,
        request_id=request_id,
        ts_us=ts_us,
        ts_text=ts_text,
        kb=texts[0],
        session=texts[1],
        user=texts[2],
        raw_query=raw_query,
        rating=None if rating is None else str(rating),
        escalated=bool(escalated),
        follow_up_marked=bool(follow_up),
        citations_empty=citations is not None and not citations,
        answer=texts[3],
        confidence=None if confidence is None else float(confidence),
        body=body.decode(),
    )


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


def _parse_slow(raw: bytes, line_no: int, unterminated: bool) -> LogLine | BadLine | None:
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
    ts = _utc(record.ts) if record.ts is not None else None
    if ts is not None:
        mapped = {**mapped, "ts": _iso_z(ts)}
    body = json.dumps(mapped, ensure_ascii=False, separators=(",", ":"))
    try:
        body.encode("utf-8")
    except UnicodeEncodeError:
        return bad(
            "bad_encoding", "a \\uD8xx escape that is half of a surrogate pair", "log whole characters"
        )
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
        body=body,
        recovered=recovered,
    )
