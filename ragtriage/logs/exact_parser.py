"""The exact path of line parsing: the stdlib parser and the pydantic model, which either accept
a line or say exactly what is wrong with it and how to fix it. Also decodes GB18030 and drops a
byte-order mark.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from ragtriage.logs.log_line import EPOCH, ONE_US, BadLine, LogLine, request_facts, utc
from ragtriage.logs.schema import RequestLog, map_flat_form
from ragtriage.wording import quoted

BOM = b"\xef\xbb\xbf"
_TRAILING_COMMA = re.compile(r",\s*[}\]]")


def _ts_columns(ts: datetime | None) -> tuple[int | None, str | None]:
    """`(epoch microseconds, naive-UTC SQLite text)` of an aware UTC time."""
    if ts is None:
        return None, None
    return (ts - EPOCH) // ONE_US, ts.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


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
        return bad("duplicate_key", f"duplicate key {quoted(error.key)}", "keep one value per key")
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
        got = quoted(first.get("input"), limit=60)
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
    ts = utc(record.ts) if record.ts is not None else None
    feedback = record.feedback
    confidence = mapped.get("confidence")
    ts_us, ts_text = _ts_columns(ts)
    facts = request_facts(record.raw_query, record.rewrite, record.stages)
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
        pipeline_version=record.pipeline_version,
        result_count=facts[0],
        rewrite_fired=facts[1],
    )
