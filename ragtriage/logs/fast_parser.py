"""The fast path of line parsing: orjson parses, msgspec checks the v1 types in C, no pydantic.

It accepts only lines it can prove valid and returns None for anything else (a byte-order mark,
non-UTF-8 bytes, NaN, a trailing comma, a duplicate key, a missing field, an unusual type), which
then takes the exact path (`exact_parser`).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Annotated, Union

import msgspec
import orjson

from ragtriage.logs.log_line import EPOCH, NAIVE_EPOCH, ONE_US, LogLine, request_facts
from ragtriage.logs.schema import FLAT_STAGE_KEYS, map_flat_form

_FLAT_KEYS = frozenset((*FLAT_STAGE_KEYS, "rewritten_queries", "user_feedback"))


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
        epoch = EPOCH if moment.tzinfo is not None else NAIVE_EPOCH
        sqlite_text = f"{text[:10]} {text[11:19]}.{(fraction or '.')[1:]:0<6}"
        return (moment - epoch) // ONE_US, sqlite_text
    moment = moment.astimezone(timezone.utc)
    # `YYYY-MM-DD HH:MM:SS.ffffff+00:00` without its offset.
    return (moment - EPOCH) // ONE_US, moment.isoformat(" ", "microseconds")[:26]


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
    result_count, rewrite_fired = request_facts(record.raw_query, record.rewrite, record.stages)
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
        False,
        record.pipeline_version,
        result_count,
        rewrite_fired,
    )


_FAST_CONVERT = msgspec.convert
