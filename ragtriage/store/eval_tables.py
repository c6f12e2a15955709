"""Eval tables: datasets with versions, versioned eval cases, runs and per-case run results.

A dataset version is the set of case versions valid at that time: every change to a dataset
(import, promote, edit, delete) bumps `eval_dataset.version` once, closes the changed cases' old rows
(`valid_to` = the new version) and opens new rows (`valid_from` = the new version). A row belongs
to dataset version v when `valid_from <= v` and (`valid_to` is None or `v < valid_to`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from ragtriage.store.columns import json_dict_column, json_list_column, utcnow

__all__ = ["EvalDatasetRow", "EvalCaseRow", "EvalRunRow", "EvalRunCaseRow"]


class EvalDatasetRow(SQLModel, table=True):
    """One named eval set and its current version number."""

    __tablename__ = "eval_dataset"

    name: str = Field(primary_key=True)
    version: int = 0
    """Increases by one on every change to the set of cases."""
    description: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class EvalCaseRow(SQLModel, table=True):
    """One version of one eval case (editing a case closes this row and adds the next version)."""

    __tablename__ = "eval_case"
    __table_args__ = (
        UniqueConstraint("dataset", "case_id", "version", name="uq_eval_case_version"),
        Index("ix_eval_case_current", "dataset", "valid_to"),
        Index("ix_eval_case_dedup", "dataset", "normalized_query"),
    )

    id: int | None = Field(default=None, primary_key=True)
    dataset: str = Field(index=True)
    case_id: str
    version: int = 1
    """Version of this case (1, 2, … per case id)."""
    valid_from: int
    """First dataset version this row belongs to."""
    valid_to: int | None = None
    """First dataset version this row no longer belongs to (None: current)."""
    query: str = Field(sa_column=Column(Text, nullable=False))
    normalized_query: str = ""
    """NFKC-folded, whitespace-collapsed query: the duplicate check compares this with the gold."""
    gold: dict[str, Any] = Field(default_factory=dict, sa_column=json_dict_column(nullable=False))
    """Gold id → grade (grade > 0 relevant)."""
    gold_granularity: str = "chunk"
    """`chunk` or `doc`: the granularity the case is evaluated at."""
    gold_refs: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    """Gold as `{doc_id, anchor?, start?, end?, grade, chunk_id?}` (`eval.cases.GoldRef`); None: none."""
    must_have: list[str] = Field(default_factory=list, sa_column=json_list_column(nullable=False))
    intent_type: str | None = None
    difficulty: str | None = None
    tags: list[str] = Field(default_factory=list, sa_column=json_list_column(nullable=False))
    k: int | None = None
    provenance: dict[str, Any] = Field(default_factory=dict, sa_column=json_dict_column(nullable=False))
    """`request_id`, `kb_revision`, `index_manifest`, `config_hash`, `label`, `source` (file or `promote`)."""
    created_at: datetime = Field(default_factory=utcnow)


class EvalRunRow(SQLModel, table=True):
    """One batch evaluation of one dataset version with one pipeline config."""

    __tablename__ = "eval_run"

    id: int | None = Field(default=None, primary_key=True)
    name: str | None = Field(default=None, index=True)
    dataset: str = Field(index=True)
    dataset_version: int
    granularity: str = "chunk"
    """`chunk` or `doc` (doc: ranked chunk ids are mapped to doc ids, first occurrence kept)."""
    status: str = Field(default="running", index=True)
    """`running` while a process works on it, `incomplete` when stopped with cases missing, `complete`."""
    config: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    """Snapshot of the settings (store section left out)."""
    config_hash: str = ""
    profile: str | None = None
    """Replay profile the pipeline came from (`eval run --profile`); None: the settings file as it is."""
    run_options: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    kb_revision: int | None = None
    index_manifest: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    """Manifest summary: KB revision indexed, embedder, dim, chunk count, content digest."""
    case_count: int = 0
    """Cases in the dataset version; the run is complete when this many results are stored."""
    cases_done: int = 0
    workers: int = 1
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    timings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    """`wall_s` per attempt, summed stage milliseconds, cases per second."""
    aggregates: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    """`{"cases": n, "means": {metric: value}, "no_gold": {...}}` over the ranking cases."""
    bucket_aggregates: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    """Bucket name → `{"cases": n, "means": {...}}`."""
    heartbeat_at: datetime | None = None
    """Last time the runner stored a result (a `running` run without recent heartbeats was killed)."""


class EvalRunCaseRow(SQLModel, table=True):
    """The result of one case in one run: metrics and the candidate snapshot (no chunk text)."""

    __tablename__ = "eval_run_case"
    __table_args__ = (UniqueConstraint("run_id", "case_id", name="uq_eval_run_case"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(index=True)
    case_id: str
    case_version: int = 1
    has_gold: bool = True
    refused: bool = False
    metrics: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    buckets: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    snapshot: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    """`final`, `candidates` (chunk id, doc id, per-route and per-stage ranks and scores, is_relevant,
    is_selected), `rank_shift`, `flags`, `timings_ms`."""
    ms: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)
