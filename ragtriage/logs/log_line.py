"""One parsed log line: `LogLine` (valid, with the columns the store filters on) or `BadLine`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ragtriage.logs.schema import RequestLog

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
NAIVE_EPOCH = datetime(1970, 1, 1)
ONE_US = timedelta(microseconds=1)


def utc(moment: datetime) -> datetime:
    """`moment` in UTC; a time without a zone is taken as UTC."""
    # Producers log server time in UTC by convention.
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


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
        return None if self.ts_us is None else EPOCH + timedelta(microseconds=self.ts_us)

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
