"""Monitor cache: the first-day recall of a document, kept once its first 24 hours are over."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Field, SQLModel

from ragtriage.store.columns import json_list_column, utcnow

__all__ = ["MonitorDocRecallRow"]


class MonitorDocRecallRow(SQLModel, table=True):
    """Which chunks of one document version requests retrieved in its first 24 hours.

    Valid while the document's `updated_at` and the number of requests stored in that window are
    unchanged (a late-ingested log changes the count, and the entry is computed again).
    """

    __tablename__ = "monitor_doc_recall"

    doc_id: str = Field(primary_key=True)
    kb: str = Field(default="default", primary_key=True)
    updated_at: datetime
    window_requests: int
    """Requests stored with a time in [updated_at, updated_at + 24 h) when this was computed."""
    store_mark: int | None = None
    """The store's highest request rowid then (SQLite): unchanged means nothing was ingested since."""
    chunk_ids: list[Any] = Field(default_factory=list, sa_column=json_list_column(nullable=False))
    found: list[Any] = Field(default_factory=list, sa_column=json_list_column(nullable=False))
    """The chunk ids some request retrieved (any logged stage or citation) in the window."""
    computed_at: datetime = Field(default_factory=utcnow)
