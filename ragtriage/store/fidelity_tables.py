"""Replay fidelity per logged request: the last `ragtriage fidelity` measurement of each one.

The queue and the case screen read `line` and `min_rbo`; `stages` keeps the per-stage figures
(`replay.fidelity.StageFidelity` as JSON) so a report can be rebuilt without replaying.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, ForeignKey, String
from sqlmodel import Field, SQLModel

from ragtriage.store.columns import utcnow
from ragtriage.store.tracked_json import deep_json_list_column

__all__ = ["ReplayFidelityRow"]


class ReplayFidelityRow(SQLModel, table=True):
    """How exactly the replay of one logged request reproduced each logged stage."""

    __tablename__ = "replay_fidelity"

    request_id: str = Field(
        sa_column=Column(String, ForeignKey("request_log.request_id", ondelete="CASCADE"), primary_key=True)
    )
    measured_at: datetime = Field(default_factory=utcnow)
    pipeline_version: str | None = Field(default=None, index=True)
    profile: str = "default"
    config_hash: str | None = None
    line: str = ""
    """`bm25 3/3 · dense 3/3 · fused 2/3 · reranked 5/5 · final 2/2` (overlap@k per stage)."""
    min_rbo: float = Field(default=1.0, index=True)
    """Lowest rank-biased overlap (p = 0.9) over the logged stages; the queue sorts by it."""
    exact_stages: int = 0
    stages_compared: int = 0
    unexplained: int = 0
    """Stages that differ for no documented reason (0 for a faithful or stale-explained replay)."""
    stale_documents: list[Any] = Field(default_factory=list, sa_column=deep_json_list_column(nullable=False))
    """Documents that changed since production indexed them (named by this request's logged ids)."""
    stages: list[Any] = Field(default_factory=list, sa_column=deep_json_list_column(nullable=False))
    """Per-stage figures, `StageFidelity` as JSON, in stage order."""
    notes: list[Any] = Field(default_factory=list, sa_column=deep_json_list_column(nullable=False))
