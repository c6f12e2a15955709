"""Request-log lines in: the one parser of a line (orjson, then the `RequestLog` model). How a later
line combines with a stored request is `logs.merge`.

Records are split on `\\n` only (a U+2028 inside a value is not a line break), in constant memory
(`line_files`). orjson parses a line and pydantic validates it; a line orjson refuses (non-UTF-8
bytes, NaN, a trailing comma, a cut-off end) or that may repeat a key is read again by the stdlib
parser, which says exactly what is wrong and where, or decodes a GB18030 line. Every bad line
names its kind, its line, the field and the fix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from ragtriage.errors import LogFormatError
from ragtriage.logs.line_files import iter_raw_lines
from ragtriage.logs.log_line import BadLine, LogLine, request_facts, trace_keys, utc
from ragtriage.logs.schema import RequestLog
from ragtriage.wording import quoted

BOM = b"\xef\xbb\xbf"
_TRAILING_COMMA = re.compile(r",\s*[}\]]")
# A blank between a key's closing quote and its colon hides a repeated key from the count of `":`.
_BLANK_BEFORE_COLON = re.compile(rb'"[ \t\r]+:')
_JSON_KIND = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


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


def _may_repeat_a_key(data: bytes, obj: Any) -> bool:
    """True unless the line surely has no repeated key (orjson keeps the last value silently): a line
    orjson writes back byte for byte has none; any other has as many `":` as the rewrite has."""
    again = orjson.dumps(obj)
    return again != data and (
        again.count(b'":') != data.count(b'":') or bool(_BLANK_BEFORE_COLON.search(data))
    )


def _is_union_tag(part: Any) -> bool:
    # pydantic names union branches in `loc` (`str`, `StageItem`, `list[str]`); they are not field names.
    return isinstance(part, str) and (
        part in ("str", "int", "float", "bool") or part[:1].isupper() or "[" in part
    )


def parse_line(raw: bytes, line_no: int, *, unterminated: bool = False) -> LogLine | BadLine | None:
    """Parse one line's bytes; None for a blank line. Decodes GB18030 and drops a byte-order mark."""

    def bad(kind: str, message: str, fix: str) -> BadLine:
        return BadLine(line_no=line_no, kind=kind, message=message, fix=fix, raw=raw)

    data = raw[len(BOM) :] if raw.startswith(BOM) else raw
    if not data.strip():
        return None
    recovered = False
    body = data.strip()
    try:
        obj = orjson.loads(data)
        exact = _may_repeat_a_key(data, obj)
    except orjson.JSONDecodeError:
        exact = True
    if exact:
        # The stdlib parser explains what orjson refused, and finds a repeated key.
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
            body = text.encode("utf-8").strip()
        try:
            obj = json.loads(
                text, object_pairs_hook=_object_without_duplicates, parse_constant=_reject_constant
            )
        except _DuplicateKey as error:
            return bad("duplicate_key", f"duplicate key {quoted(error.key)}", "keep one value per key")
        except _NonFiniteNumber as error:
            return bad("nan", f"{error.token} is not valid JSON", "log null (or a finite number) instead")
        except RecursionError:
            return bad("invalid_json", "JSON nested too deeply", "flatten the record")
        except json.JSONDecodeError as error:
            if _TRAILING_COMMA.search(text):
                return bad(
                    "trailing_comma",
                    f"trailing comma (column {error.colno}: {error.msg})",
                    "remove the comma",
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
        try:
            # A `\\uD8xx` escape decodes to half a surrogate pair, which no UTF-8 store can hold.
            orjson.dumps(obj)
        except orjson.JSONEncodeError:
            return bad(
                "bad_encoding", "a \\uD8xx escape that is half of a surrogate pair", "log whole characters"
            )
    if not isinstance(obj, dict):
        kind = "null" if obj is None else _JSON_KIND.get(type(obj), type(obj).__name__)
        return bad("not_object", f"the line is {kind}, not a JSON object", "write one {…} object per line")
    try:
        record = RequestLog.model_validate(obj)
    except ValidationError as error:
        # In a union (id or object) the deepest error is the informative one.
        first = max(error.errors(), key=lambda e: len(e["loc"]))
        where = ".".join(str(p) for p in first["loc"] if not _is_union_tag(p))
        if first["type"] == "missing":
            return bad("missing_field", f"missing required field '{where}'", f"add '{where}' to every record")
        got = quoted(first.get("input"), limit=60)
        return bad(
            "invalid_field", f"field '{where}': {first['msg']} (got {got})", "fix the value or drop the field"
        )
    feedback = record.feedback
    confidence = (record.model_extra or {}).get("confidence")
    result_count, rewrite_fired = request_facts(record.raw_query, record.rewrite, record.stages)
    return LogLine(
        line_no=line_no,
        request_id=record.request_id,
        ts=None if record.ts is None else utc(record.ts),
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
        pipeline_version=record.pipeline_version,
        result_count=result_count,
        rewrite_fired=rewrite_fired,
        trace_keys=trace_keys(record.model_extra),
    )
