"""One parsed log line: `LogLine` (valid, with the columns the store filters on) or `BadLine`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ragtriage.logs.schema import RequestLog
from ragtriage.tables import json_break


def utc(moment: datetime) -> datetime:
    """`moment` in UTC; a time without a zone is taken as UTC."""
    # Producers log server time in UTC by convention.
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


#: `result_count` of a request that logged no stage at all (NULL in the store means "not computed").
NO_STAGE_LOGGED = -1
#: The stages `result_count` reads, last first: the first one logged is the request's result.
RESULT_STAGES = ("final_context", "reranked", "fused", "dense", "bm25")


def trace_keys(extra: dict[str, Any] | None) -> tuple[str, ...]:
    """`trace:ID` and `span:ROOT_SPAN_ID` of a request's `otel` section (`extra`: its unknown fields)."""
    otel = (extra or {}).get("otel")
    if not isinstance(otel, dict):
        return ()
    keys = (("trace:", otel.get("trace_id")), ("span:", otel.get("root_span_id")))
    return tuple(prefix + value for prefix, value in keys if isinstance(value, str) and value)


def request_facts(raw_query: str, rewrite: Any, stages: Any) -> tuple[int, bool | None]:
    """`(result_count, rewrite_fired)` of a parsed request (a `RequestLog`).

    `result_count` = length of the first logged stage among final_context, reranked, fused, dense,
    bm25 (`NO_STAGE_LOGGED` when none is); 0 is an empty result. `rewrite_fired` = the rewritten
    query differs from the normalized query (else from the raw query), or sub-queries or aliases were
    added; None when the request logged no rewrite.
    """
    result_count = NO_STAGE_LOGGED
    if stages is not None:
        for name in RESULT_STAGES:
            items = getattr(stages, name)
            if items is not None:
                result_count = len(items)
                break
    if rewrite is None:
        return result_count, None
    base = rewrite.normalized_query or raw_query
    fired = bool(
        (rewrite.rewritten_query is not None and rewrite.rewritten_query.strip() != base.strip())
        or rewrite.sub_queries
        or rewrite.aliases
    )
    return result_count, fired


@dataclass(slots=True)
class LogLine:
    """One valid log line: the columns the store filters on plus the body as JSON text."""

    line_no: int
    request_id: str
    ts: datetime | None
    """Request time, aware UTC."""
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
    pipeline_version: str | None = None
    result_count: int = NO_STAGE_LOGGED
    """Chunks in the last logged stage (see `request_facts`); `NO_STAGE_LOGGED` when none was logged."""
    rewrite_fired: bool | None = None
    """The logged rewrite changed the query (see `request_facts`); None when no rewrite was logged."""
    trace_keys: tuple[str, ...] = ()
    """`trace:ID` and `span:ROOT_SPAN_ID` of a request read from a trace (its `otel` section):
    what feedback arriving later names."""

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


def document_error(text: bytes, error: json.JSONDecodeError, what: str = "JSON document") -> BadLine:
    """The one bad line of a JSON document that does not parse (`text`, the whole document; `error`
    from parsing it): `cut_document` when it is cut short, else `invalid_json`, naming the byte and
    line where it breaks; its bytes are the text around that place."""
    cut, reason, fix = json_break(text, error, what)
    decoded = text.decode("utf-8", errors="replace")
    around = decoded[max(0, error.pos - 2048) : error.pos + 2048].encode("utf-8")
    return BadLine(1, "cut_document" if cut else "invalid_json", reason, fix, around)
