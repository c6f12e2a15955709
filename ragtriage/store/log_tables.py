"""Request-log and triage tables: logged requests, quarantined lines, conflicts, triage records, audit.

`request_log.body` holds the request as JSON text (schema v1, flat form mapped, unknown fields
kept), serialized at ingest and again when a later line adds to it (`log_merge` says which line
added what); the other columns are the fields queries filter on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Column, ForeignKey, Index, LargeBinary, String, Text, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from ragtriage.store.columns import json_dict_column, utcnow
from ragtriage.store.tracked_json import deep_json_list_column

__all__ = [
    "TRIAGE_STATUSES",
    "TriageStatus",
    "RequestLogRow",
    "QuarantinedLineRow",
    "LogConflictRow",
    "LogMergeRow",
    "RequestTraceRow",
    "TriageRow",
    "TriageAuditRow",
]

REQUEST_LOG_TS_INDEX = "ix_request_log_ts_session"
REQUEST_LOG_MONITOR_INDEX = "ix_request_log_monitor"
#: Replaced by `REQUEST_LOG_TS_INDEX`; stores created before it still have it (see `logs.ingest`).
OLD_REQUEST_LOG_SESSION_INDEX = "ix_request_log_session_ts"

TriageStatus = Literal["new", "in_progress", "confirmed", "dismissed"]
TRIAGE_STATUSES: tuple[str, ...] = ("new", "in_progress", "confirmed", "dismissed")


class RequestLogRow(SQLModel, table=True):
    """One logged online request (idempotent by `request_id`)."""

    __tablename__ = "request_log"
    # The follow-up rule reads neighbours by time (logs arrive in time order, so this index grows
    # at its end); covering, so the read never touches the 1–2 KB rows.
    __table_args__ = (
        Index(REQUEST_LOG_TS_INDEX, "ts", "session_hash", "request_id"),
        # Covering for `ragtriage monitor` and `queue sample`: the 1–2 KB rows are never read.
        Index(
            REQUEST_LOG_MONITOR_INDEX,
            "ts",
            "pipeline_version",
            "result_count",
            "rewrite_fired",
            "rating",
            "escalated",
            "request_id",
        ),
        Index(
            "ix_request_log_facts_missing",
            "request_id",
            sqlite_where=text("result_count IS NULL"),
            postgresql_where=text("result_count IS NULL"),
        ),
    )

    request_id: str = Field(primary_key=True)
    ts: datetime | None = None
    """Request time (UTC). Indexed with the session for the follow-up rule; the queue sorts triage records."""
    kb: str | None = None
    session_hash: str | None = None
    user_hash: str | None = None
    raw_query: str = Field(sa_column=Column(Text, nullable=False))
    rating: str | None = None
    """Feedback rating as text (`down`, `1`, …)."""
    escalated: bool = False
    body: str = Field(sa_column=Column(Text, nullable=False))
    """The whole request as JSON text (v1 form, unknown fields kept); parse with `RequestLog`."""
    source_file: str | None = None
    source_line: int | None = None
    recovered: bool = False
    """The line was not UTF-8 and was decoded as GB18030."""
    ingested_at: datetime = Field(default_factory=utcnow)
    # Monitor columns, computed at ingest (`logs.log_line.request_facts`); NULL `result_count` marks
    # a row stored before they existed (`logs.monitor_backfill` fills those in).
    pipeline_version: str | None = None
    result_count: int | None = None
    """Chunks in the last logged stage; -1 when no stage was logged; 0 is an empty result."""
    rewrite_fired: bool | None = None
    """The logged rewrite changed the query; None when no rewrite was logged."""


class QuarantinedLineRow(SQLModel, table=True):
    """A log line that could not be ingested, kept byte for byte with the reason."""

    __tablename__ = "log_quarantine"
    __table_args__ = (UniqueConstraint("source_file", "line_no", "raw_hash", name="uq_log_quarantine_line"),)

    id: int | None = Field(default=None, primary_key=True)
    source_file: str = Field(sa_column=Column(String, nullable=False, index=True))
    line_no: int
    kind: str = Field(index=True)
    """Short reason code: `invalid_json`, `nan`, `trailing_comma`, `duplicate_key`, `not_object`,
    `missing_field`, `invalid_field`, `truncated`, `bad_encoding`."""
    reason: str
    """The full message with the fix."""
    raw: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    raw_hash: str
    quarantined_at: datetime = Field(default_factory=utcnow)


class LogConflictRow(SQLModel, table=True):
    """A line whose request_id is already stored with a different body (the stored one is kept)."""

    __tablename__ = "log_conflict"
    __table_args__ = (UniqueConstraint("request_id", "body_hash", name="uq_log_conflict_body"),)

    id: int | None = Field(default=None, primary_key=True)
    request_id: str = Field(index=True)
    source_file: str | None = None
    line_no: int | None = None
    body: str = Field(sa_column=Column(Text, nullable=False))
    body_hash: str
    detected_at: datetime = Field(default_factory=utcnow)


class LogMergeRow(SQLModel, table=True):
    """A later line that added to a stored request (feedback, scores, a stage it lacked): where it
    was read and what it added (`logs.merge`)."""

    __tablename__ = "log_merge"

    id: int | None = Field(default=None, primary_key=True)
    request_id: str = Field(index=True)
    source_file: str | None = None
    line_no: int | None = None
    added: str = Field(sa_column=Column(Text, nullable=False))
    """The paths it added, comma-separated (`feedback, stages.bm25[].score`)."""
    merged_at: datetime = Field(default_factory=utcnow)


class RequestTraceRow(SQLModel, table=True):
    """Where a stored request's trace is known by: `trace:ID` and `span:ROOT_SPAN_ID` → request_id.

    Feedback that arrives after its trace (annotations, scores, EVALUATOR spans) names only these."""

    __tablename__ = "request_trace"

    key: str = Field(primary_key=True)
    request_id: str = Field(index=True)


class TriageRow(SQLModel, table=True):
    """The triage state of one flagged request. `revision` increases on every change."""

    __tablename__ = "triage_record"
    __table_args__ = (
        # The queue pages by (request_ts, request_id) newest first, optionally per status.
        Index("ix_triage_record_status_ts", "status", "request_ts", "request_id"),
        Index("ix_triage_record_request_ts", "request_ts", "request_id"),
    )

    request_id: str = Field(
        sa_column=Column(String, ForeignKey("request_log.request_id", ondelete="CASCADE"), primary_key=True)
    )
    status: str = "new"
    """`new`, `in_progress`, `confirmed` or `dismissed`."""
    reasons: list[str] = Field(default_factory=list, sa_column=deep_json_list_column(nullable=False))
    """Why it was flagged: `bad_rating`, `escalated`, `follow_up`, `empty_citations`, `refusal`,
    `low_confidence` (or `manual` when a triager opened it)."""
    labels: list[str] = Field(default_factory=list, sa_column=deep_json_list_column(nullable=False))
    """Root-cause labels; the first is the primary one (also in `primary_label`)."""
    primary_label: str | None = Field(default=None, index=True)
    suggested_label: str | None = Field(default=None, index=True)
    """Root cause suggested by diagnosis (machine-made: set without a revision bump or audit row)."""
    gold_chunk_ids: list[Any] = Field(default_factory=list, sa_column=deep_json_list_column(nullable=False))
    notes: list[Any] = Field(default_factory=list, sa_column=deep_json_list_column(nullable=False))
    """`{"at": ISO time, "user": name, "text": …}` items, oldest first."""
    assignee: str | None = Field(default=None, index=True)
    request_ts: datetime | None = None
    """The request's time (queue order), or its ingest time when the log had none."""
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    updated_by: str | None = None
    revision: int = 1


class TriageAuditRow(SQLModel, table=True):
    """One change to a triage record: who, when, what, and the values before and after."""

    __tablename__ = "triage_audit"

    id: int | None = Field(default=None, primary_key=True)
    request_id: str = Field(index=True)
    at: datetime = Field(default_factory=utcnow)
    user: str
    action: str
    """`flag`, `status`, `labels`, `gold`, `note`, `assign`."""
    change: dict[str, Any] = Field(default_factory=dict, sa_column=json_dict_column(nullable=False))
    """`{"before": …, "after": …}` of the changed field."""
    revision: int
    """The record's revision after the change."""
