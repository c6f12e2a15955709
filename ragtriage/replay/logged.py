"""Replay a logged request through its profile's pipeline and diff it with what production logged, per stage.

`stage_diff` is pure (the CLI view and the TUI both render its result); `compare_request` reads the
request from the store, picks the replay profile mapped to its `pipeline_version` (or the one
asked for), replays its raw query (optionally with the logged rewrite) and diffs the five logged
stages: bm25, dense, fused, reranked and final_context. When the logged config hash differs from
the profile's and the logged settings are known (`known_config`: a profile or an eval run has that
hash), `differing_settings` names the settings that differ instead of two opaque hashes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from ragtriage.config.profiles import get_profile, list_profiles, resolve_profile
from ragtriage.config.settings import Settings
from ragtriage.errors import InputError
from ragtriage.kb.service import document_titles, get_chunks
from ragtriage.kb.types import ChunkRecord
from ragtriage.logs.requests import get_request
from ragtriage.logs.schema import STAGE_NAMES, RequestLog, stage_ids, to_trace
from ragtriage.pipeline.types import (
    ROUTE_BM25_RAW,
    ROUTE_DENSE_RAW,
    ProfileRef,
    RouteResult,
    RunOptions,
    Trace,
)
from ragtriage.store.db import read_session
from ragtriage.store.eval_tables import EvalRunRow
from ragtriage.store.gold import gold_ids
from ragtriage.store.triage_repo import find_record
from ragtriage.wording import quoted

if TYPE_CHECKING:
    from ragtriage.workspace import Workspace

#: Logged stage → the route of a replayed trace it is compared with (first one that ran).
STAGE_ROUTES = {"bm25": (ROUTE_BM25_RAW, "bm25"), "dense": (ROUTE_DENSE_RAW, "dense")}


class RankChange(BaseModel):
    """A chunk present in both lists at different ranks (ranks from 1; `delta` > 0 means it moved up)."""

    chunk_id: str
    logged_rank: int
    replayed_rank: int
    delta: int


class StageDiff(BaseModel):
    """One stage, logged vs replayed: which chunks stayed, came, went, moved, and which the KB lacks."""

    logged: list[str] = Field(default_factory=list)
    replayed: list[str] = Field(default_factory=list)
    kept: list[str] = Field(default_factory=list)
    """In both lists, in logged order."""
    gained: list[str] = Field(default_factory=list)
    """Only in the replay, in replayed order."""
    lost: list[str] = Field(default_factory=list)
    """Only in the log, in logged order."""
    rank_changes: list[RankChange] = Field(default_factory=list)
    unknown: list[str] = Field(default_factory=list)
    """Logged chunk ids the KB does not know (a stale index or another KB)."""
    logged_missing: bool = False
    """True when the request did not log this stage (everything replayed counts as gained)."""
    not_replayed: str | None = None
    """Why the replay has no such stage (its profile runs no rerank, or no route of that kind);
    the logged chunks are then not `lost`, nothing was compared. None: the stage was replayed."""


def stage_diff(
    logged_ids: Sequence[str] | None,
    replayed_ids: Sequence[str],
    known_ids: Collection[str] | None = None,
    not_replayed: str | None = None,
) -> StageDiff:
    """Diff two ranked lists (duplicates count at their first rank).

    `logged_ids=None` means the stage was not logged; `not_replayed` (a reason) that the replay
    did not run it, so no logged chunk is `lost`. With `known_ids`, logged ids outside it are
    reported as `unknown`; without it no id is.
    """
    logged = list(dict.fromkeys(logged_ids or ()))
    replayed = list(dict.fromkeys(replayed_ids))
    logged_rank = {chunk_id: rank for rank, chunk_id in enumerate(logged, start=1)}
    replayed_rank = {chunk_id: rank for rank, chunk_id in enumerate(replayed, start=1)}
    changes = [
        RankChange(
            chunk_id=chunk_id,
            logged_rank=rank,
            replayed_rank=replayed_rank[chunk_id],
            delta=rank - replayed_rank[chunk_id],
        )
        for chunk_id, rank in logged_rank.items()
        if chunk_id in replayed_rank and replayed_rank[chunk_id] != rank
    ]
    return StageDiff(
        logged=logged,
        replayed=replayed,
        kept=[c for c in logged if c in replayed_rank],
        gained=[c for c in replayed if c not in logged_rank],
        lost=[] if not_replayed else [c for c in logged if c not in replayed_rank],
        rank_changes=changes,
        unknown=[c for c in logged if known_ids is not None and c not in known_ids],
        logged_missing=logged_ids is None,
        not_replayed=not_replayed,
    )


class FinalChunk(BaseModel):
    """A chunk of the logged or the replayed final context, with what it is (ids alone, e.g.
    production UUIDs, do not say); ranks from 1, None when absent from that list."""

    chunk_id: str
    logged_rank: int | None = None
    replayed_rank: int | None = None
    doc_id: str | None = None
    title: str | None = None
    """None when the KB does not know the chunk."""
    doc_title: str | None = None
    """The document's title; None when unknown or when the document has none but its id."""
    heading_path: list[str] = Field(default_factory=list)


def final_chunks(
    logged: Sequence[str] | None,
    replayed: Sequence[str],
    known: Mapping[str, ChunkRecord],
    doc_titles: Mapping[str, str] | None = None,
) -> list[FinalChunk]:
    """The logged final context in order, then the replayed chunks it lacks, in replayed order;
    `doc_titles` (doc_id → title) names their documents."""
    logged_rank = {c: rank for rank, c in enumerate(dict.fromkeys(logged or ()), start=1)}
    replayed_rank = {c: rank for rank, c in enumerate(dict.fromkeys(replayed), start=1)}
    chunks = []
    for chunk_id in dict.fromkeys([*logged_rank, *replayed_rank]):
        record = known.get(chunk_id)
        chunks.append(
            FinalChunk(
                chunk_id=chunk_id,
                logged_rank=logged_rank.get(chunk_id),
                replayed_rank=replayed_rank.get(chunk_id),
                doc_id=record.doc_id if record is not None else None,
                title=record.title if record is not None else None,
                doc_title=(doc_titles or {}).get(record.doc_id) if record is not None else None,
                heading_path=list(record.heading_path) if record is not None else [],
            )
        )
    return chunks


class LoggedReplay(BaseModel):
    """A logged request, its replay, and the per-stage diffs (`--json` of `replay REQUEST_ID`)."""

    request_id: str
    logged: Trace
    replayed: Trace
    diffs: dict[str, StageDiff] = Field(default_factory=dict)
    use_logged_rewrite: bool = False
    logged_rewrite: str | None = None
    """The rewritten query production logged; None when it logged no rewrite (`logged.rewrite` then
    carries the raw query only as the text its routes searched)."""
    profile: ProfileRef | None = None
    """The replay profile and why it was chosen (also in `replayed.profile`)."""
    config_changes: list[str] | None = None
    """`section.key: logged → replayed` when the config hashes differ and the logged settings are
    known (an eval run was made with them); None when they are equal or unknown."""
    final_chunks: list[FinalChunk] = Field(default_factory=list)
    """The chunks of both final contexts with their document and title (`final_chunks`)."""


def replayed_route(trace: Trace, stage: str) -> RouteResult | None:
    """The replayed route a logged `bm25`/`dense` stage is compared with: the raw route of its kind,
    else the first of its kind with hits, else the first of its kind (None: the replay ran none)."""
    preferred, kind = STAGE_ROUTES[stage]
    return (
        trace.route(preferred)
        or next((r for r in trace.routes if r.kind == kind and r.hits), None)
        or next((r for r in trace.routes if r.kind == kind), None)
    )


def replayed_stage_ids(trace: Trace, stage: str) -> list[str]:
    """A replayed trace's ranked list for one logged stage name."""
    if stage in STAGE_ROUTES:
        route = replayed_route(trace, stage)
        return [hit.chunk_id for hit in route.hits] if route is not None else []
    if stage == "fused":
        return [hit.chunk_id for hit in trace.fused]
    if stage == "reranked":
        return [hit.chunk_id for hit in trace.reranked]
    if stage == "final_context":
        return list(trace.final)
    raise ValueError(f"unknown stage {quoted(stage)}; stages are {', '.join(STAGE_NAMES)}")


def not_replayed_reason(trace: Trace, stage: str) -> str | None:
    """Why a replayed trace has no list for a logged stage name, or None when it ran the stage."""
    runner = f"profile {trace.profile.name}" if trace.profile is not None else "the replay"
    if stage in STAGE_ROUTES:
        if replayed_route(trace, stage) is None:
            return f"{runner} runs no {STAGE_ROUTES[stage][1]} route"
    elif stage == "reranked" and trace.rerank_mode == "off":
        return f"{runner} runs no rerank"
    return None


def logged_stage_ids(record: RequestLog, stage: str) -> list[str] | None:
    """The logged list of one stage, or None when the request did not log it."""
    items = getattr(record.stages, stage, None) if record.stages is not None else None
    return None if items is None else stage_ids(items)


def diff_request(
    record: RequestLog, replayed: Trace, known_ids: Collection[str] | None = None
) -> dict[str, StageDiff]:
    """Every stage of `STAGE_NAMES`, logged vs replayed."""
    return {
        stage: stage_diff(
            logged_stage_ids(record, stage),
            replayed_stage_ids(replayed, stage),
            known_ids,
            not_replayed_reason(replayed, stage),
        )
        for stage in STAGE_NAMES
    }


def logged_trace(record: RequestLog) -> Trace:
    """`to_trace(record)` with the logged citations (what the answer was written from)."""
    trace = to_trace(record)
    if record.citations is not None:
        trace.citations = stage_ids(record.citations)
    return trace


def logged_rewrite_options(record: RequestLog) -> RunOptions:
    """Run options that make retrieval use the logged rewrite (mode `logged`).

    Raises:
        InputError: the request logged no rewrite.
    """
    if record.rewrite is None:
        raise InputError(
            f"request {quoted(record.request_id)} logged no rewrite; replay it without --use-logged-rewrite"
        )
    return RunOptions(rewrite_override=to_trace(record).rewrite)


def _stored_gold(workspace: Workspace, request_id: str) -> list[str]:
    triage = find_record(workspace.engine, request_id)
    if triage is None:
        return []
    return gold_ids(triage.gold_chunk_ids)


def compare_request(
    workspace: Workspace,
    request_id: str,
    use_logged_rewrite: bool = False,
    profile: str | None = None,
    gold: Sequence[str] | None = None,
) -> LoggedReplay:
    """Replay a stored request with its profile and diff every stage with the log.

    `profile` None: the profile `[replay.versions]` maps the request's pipeline_version to (or the
    default profile, which `replayed.profile.matched_by == "default"` records). `gold` None: the
    gold stored on the request's triage record; else these chunk ids (`replay REQUEST_ID --gold`).

    Raises:
        NotFoundError: no such request_id in the store, or no such profile.
        InputError: `use_logged_rewrite` and the request logged no rewrite.
    """
    record = get_request(workspace.engine, request_id)
    resolved = resolve_profile(workspace.settings, record.pipeline_version, profile)
    options = logged_rewrite_options(record) if use_logged_rewrite else RunOptions()
    pipeline = workspace.pipeline_for(resolved)
    # Warm up first so the replay's timings show the query, not model loading.
    pipeline.warm_up()
    wanted_gold = list(gold) if gold is not None else _stored_gold(workspace, request_id)
    replayed = pipeline.run(record.raw_query, options=options, gold=wanted_gold)
    replayed.profile = resolved.ref()
    logged = logged_trace(record)
    logged.gold = list(replayed.gold)
    logged_ids = [c for stage in STAGE_NAMES for c in logged_stage_ids(record, stage) or ()]
    chunks = get_chunks(workspace.engine, list(dict.fromkeys([*logged_ids, *replayed.final])))
    known = set(chunks).intersection(logged_ids)
    changes = None
    if logged.config_hash and replayed.config_hash and logged.config_hash != replayed.config_hash:
        logged_config = known_config(workspace.engine, logged.config_hash, workspace.settings)
        if logged_config is not None:
            changes = differing_settings(logged_config, resolved.settings)
    return LoggedReplay(
        request_id=request_id,
        logged=logged,
        replayed=replayed,
        diffs=diff_request(record, replayed, known),
        use_logged_rewrite=use_logged_rewrite,
        logged_rewrite=record.rewrite.rewritten_query if record.rewrite is not None else None,
        profile=replayed.profile,
        config_changes=changes,
        final_chunks=final_chunks(
            logged_stage_ids(record, "final_context"),
            replayed.final,
            chunks,
            document_titles(workspace.engine, [chunk.doc_id for chunk in chunks.values()]),
        ),
    )


# ---------------------------------------------------------------- config differences

#: Sections `Settings.config_hash` leaves out: they never change retrieval results.
_NOT_HASHED = ("store", "keymap", "logs", "triage", "profiles", "profile_sources", "replay", "config_file")

#: Keys inside hashed sections that the hash ignores too.
_UNHASHED_KEYS = frozenset({"rerank.freshness_now"})


def known_config(engine: Engine, config_hash: str, settings: Settings | None = None) -> dict[str, Any] | None:
    """The settings (as JSON data) behind `config_hash`: a profile of `settings` with that hash,
    else the latest eval run made with it; None when neither has it."""
    if settings is not None:
        for info in list_profiles(settings):
            if info.config_hash == config_hash:
                return get_profile(settings, info.name).settings.model_dump(mode="json")
    with read_session(engine) as session:
        row = session.exec(
            select(EvalRunRow)
            .where(col(EvalRunRow.config_hash) == config_hash)
            .order_by(col(EvalRunRow.id).desc())
            .limit(1)
        ).first()
        return dict(row.config) if row is not None and row.config else None


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            _flatten(inner, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return "unset" if value is None else str(value)


def differing_settings(logged: Mapping[str, Any], current: Settings) -> list[str]:
    """`section.key: logged → current` for every hashed setting that differs, in key order (profile
    tables and their bookkeeping are left out: only the settings a replay runs with count)."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    _flatten({k: v for k, v in logged.items() if k not in _NOT_HASHED}, "", before)
    now = current.model_dump(mode="json", exclude=set(_NOT_HASHED))
    _flatten(now, "", after)
    return [
        f"{key}: {_shown(before.get(key))} → {_shown(after.get(key))}"
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
        and not key.startswith("kb.import_")
        and key not in _UNHASHED_KEYS
    ]
