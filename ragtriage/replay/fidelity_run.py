"""`ragtriage fidelity`: replay logged requests in batches, compare every logged stage, store, report.

Each request is replayed with its profile (the one mapped to its `pipeline_version`) at its logged
time (time-dependent rerank features see the moment production saw), in `Pipeline.run_many`
batches so query embeddings are computed once per batch. Logged ids are then resolved against the
KB in one pass: live chunks, deleted rows (an older version of a document that has other ids now)
and ids with no row at all. `replay.fidelity` compares and explains; the per-request result goes to
the `replay_fidelity` table, which the queue sorts and filters by and the case screen shows.
"""

from __future__ import annotations

import fnmatch
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Engine

from ragtriage.config.profiles import explain, resolve_profile
from ragtriage.errors import InputError
from ragtriage.logs.formats.spans import text_fingerprint
from ragtriage.logs.requests import _parse, logged_versions
from ragtriage.logs.schema import STAGE_NAMES, RequestLog, extra_routes
from ragtriage.pipeline.types import RunOptions, Trace
from ragtriage.replay.fidelity import (
    ChunkChange,
    FidelityReport,
    RequestFidelity,
    compare_request,
    explain_request,
    stage_limits,
    summarize,
)
from ragtriage.replay.logged import STAGE_ROUTES, logged_stage_ids, replayed_route, replayed_stage_ids
from ragtriage.store.db import read_session, write_session
from ragtriage.store.fidelity_tables import ReplayFidelityRow
from ragtriage.store.kb_repo import as_utc
from ragtriage.store.kb_tables import ChunkRow, DocumentRow
from ragtriage.store.log_tables import RequestLogRow
from ragtriage.wording import quoted

if TYPE_CHECKING:
    # Types only: the pipeline module loads the BM25 analyzer (Whoosh, jieba), which a command
    # importing this module at its top must not pay for at `--help`.
    from ragtriage.pipeline.pipeline import Pipeline
    from ragtriage.workspace import Workspace

#: Rows per store transaction (short write locks while a triager labels).
STORE_BATCH = 500


@dataclass
class ReplayGroup:
    """Requests replayed by one pipeline (one profile)."""

    profile: str
    pipeline: Pipeline
    config_hash: str | None
    records: list[RequestLog] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)
    """request_id → caveats of its replay (e.g. no profile mapped to its version)."""


def select_requests(
    engine: Engine,
    *,
    since: datetime | None = None,
    version: str | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[RequestLog]:
    """Stored requests logged since `since`, of `version` (exact, or a glob like `prod-2026.*`),
    `sample` of them drawn at random with `seed` (reproducible), oldest first.

    Raises:
        InputError: `sample` is not positive.
    """
    if sample is not None and sample <= 0:
        raise InputError(f"--sample {sample}: give a positive number of requests")
    table = RequestLogRow.__table__  # type: ignore[attr-defined]
    query = select(table.c.request_id, table.c.ts, table.c.body).order_by(table.c.ts, table.c.request_id)
    if since is not None:
        query = query.where(table.c.ts >= since.astimezone(timezone.utc))
    with read_session(engine) as session:
        rows = session.execute(query).all()
    records = [_parse(body, request_id) for request_id, _, body in rows]
    if version is not None:
        records = [
            r
            for r in records
            if r.pipeline_version is not None and fnmatch.fnmatchcase(r.pipeline_version, version)
        ]
    if sample is not None and sample < len(records):
        picked = set(random.Random(seed).sample(range(len(records)), sample))
        records = [r for i, r in enumerate(records) if i in picked]
    return records


def chunk_origins(engine: Engine, chunk_ids: Sequence[str]) -> tuple[set[str], dict[str, str]]:
    """(live chunk ids, chunk id → document) for `chunk_ids`.

    A deleted chunk row keeps its document (an older version of it). An id with no row belongs to
    a document only when it follows ragtriage's `doc_id#hash` scheme and that document exists;
    other ids (foreign UUIDs, ints) stay unknown.
    """
    wanted = list(dict.fromkeys(chunk_ids))
    live: set[str] = set()
    doc_of: dict[str, str] = {}
    chunks = ChunkRow.__table__  # type: ignore[attr-defined]
    documents = DocumentRow.__table__  # type: ignore[attr-defined]
    with read_session(engine) as session:
        for start in range(0, len(wanted), 500):
            batch = wanted[start : start + 500]
            for chunk_id, doc_id, status in session.execute(
                select(chunks.c.chunk_id, chunks.c.doc_id, chunks.c.status).where(
                    chunks.c.chunk_id.in_(batch)
                )
            ):
                if status == "deleted":
                    doc_of[chunk_id] = doc_id
                else:
                    live.add(chunk_id)
        rowless = [c for c in wanted if c not in live and c not in doc_of and "#" in c]
        prefixes = list({c.split("#", 1)[0] for c in rowless})
        known_docs: set[str] = set()
        for start in range(0, len(prefixes), 500):
            batch = prefixes[start : start + 500]
            known_docs.update(
                session.execute(select(documents.c.doc_id).where(documents.c.doc_id.in_(batch))).scalars()
            )
    for chunk_id in rowless:
        prefix = chunk_id.split("#", 1)[0]
        if prefix in known_docs:
            doc_of[chunk_id] = prefix
    return live, doc_of


@dataclass(frozen=True)
class KBChunk:
    """What fidelity needs of a live chunk to tell whether production served other text for it."""

    doc_id: str
    fingerprint: str
    """`text_fingerprint` of the KB's content now."""
    updated_at: datetime
    version: int


def live_chunks(engine: Engine, chunk_ids: Sequence[str]) -> dict[str, KBChunk]:
    """The live chunks among `chunk_ids` (deleted rows and unknown ids left out)."""
    wanted = list(dict.fromkeys(chunk_ids))
    chunks = ChunkRow.__table__  # type: ignore[attr-defined]
    found: dict[str, KBChunk] = {}
    with read_session(engine) as session:
        for start in range(0, len(wanted), 500):
            query = select(
                chunks.c.chunk_id, chunks.c.doc_id, chunks.c.content, chunks.c.updated_at, chunks.c.version
            ).where(chunks.c.chunk_id.in_(wanted[start : start + 500]), chunks.c.status != "deleted")
            for chunk_id, doc_id, content, updated_at, version in session.execute(query):
                found[chunk_id] = KBChunk(
                    doc_id, text_fingerprint(content or ""), as_utc(updated_at), version
                )
    return found


def logged_chunks(record: RequestLog) -> dict[str, dict[str, str]]:
    """What production logged of each chunk beyond its id (`logged_chunks` of a trace ingest:
    `doc_id`, `source`, `content_hash`); {} when the request has none or another shape."""
    found = (record.model_extra or {}).get("logged_chunks")
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, dict)}


def name_documents(engine: Engine, logged: dict[str, dict[str, str]]) -> dict[str, tuple[str, str]]:
    """Chunk id the KB has no row for → (KB document, what named it) from what production logged of
    it: its document id when the KB has that document; else its source, equal to a KB document's
    source path or to its file name; else its content, when a live KB chunk has the same text
    (`text_fingerprint`). Ids nothing names are left out."""
    documents = DocumentRow.__table__  # type: ignore[attr-defined]
    chunks = ChunkRow.__table__  # type: ignore[attr-defined]
    named: dict[str, tuple[str, str]] = {}
    with read_session(engine) as session:
        doc_ids = list({info["doc_id"] for info in logged.values() if isinstance(info.get("doc_id"), str)})
        known: set[str] = set()
        for start in range(0, len(doc_ids), 500):
            batch = doc_ids[start : start + 500]
            known.update(
                session.execute(select(documents.c.doc_id).where(documents.c.doc_id.in_(batch))).scalars()
            )
        for chunk_id, info in logged.items():
            if info.get("doc_id") in known:
                named[chunk_id] = (info["doc_id"], "logged document id")
        rest = {c: info for c, info in logged.items() if c not in named}
        if any(isinstance(info.get("source"), str) for info in rest.values()):
            by_source: dict[str, str] = {}
            for doc_id, path in session.execute(
                select(documents.c.doc_id, documents.c.source_path).where(
                    documents.c.source_path.is_not(None)
                )
            ):
                by_source.setdefault(path, doc_id)
                by_source.setdefault(_file_name(path), doc_id)
            for chunk_id, info in rest.items():
                source = info.get("source")
                if isinstance(source, str):
                    doc_id = by_source.get(source) or by_source.get(_file_name(source))
                    if doc_id is not None:
                        named[chunk_id] = (doc_id, "logged source")
        rest = {
            c: info
            for c, info in rest.items()
            if c not in named and isinstance(info.get("content_hash"), str)
        }
        if rest:
            # Only when needed: every live chunk's text is read and fingerprinted.
            by_text: dict[str, str] = {}
            query = select(chunks.c.doc_id, chunks.c.content).where(chunks.c.status != "deleted")
            for doc_id, content in session.execute(query):
                by_text.setdefault(text_fingerprint(content or ""), doc_id)
            for chunk_id, info in rest.items():
                if (doc_id := by_text.get(info["content_hash"])) is not None:
                    named[chunk_id] = (doc_id, "logged content")
    return named


def _file_name(path: str) -> str:
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def plan_replays(workspace: Workspace, records: Sequence[RequestLog]) -> list[ReplayGroup]:
    """Group requests by the replay profile `[replay.versions]` maps their pipeline_version to (the
    default profile when none matches; each such request gets a note saying so)."""
    groups: dict[tuple[str, str], ReplayGroup] = {}
    for record in records:
        resolved = resolve_profile(workspace.settings, record.pipeline_version)
        key = (resolved.name, resolved.config_hash)
        if key not in groups:
            groups[key] = ReplayGroup(
                profile=resolved.name,
                pipeline=workspace.pipeline_for(resolved),
                config_hash=resolved.config_hash,
            )
        group = groups[key]
        group.records.append(record)
        if resolved.fallback:
            group.notes[record.request_id] = [explain(resolved.ref())]
    return list(groups.values())


def _logged_lists(record: RequestLog) -> dict[str, list[str] | None]:
    return {stage: logged_stage_ids(record, stage) for stage in STAGE_NAMES}


def _logged_scores(record: RequestLog) -> dict[str, dict[str, float]]:
    scores: dict[str, dict[str, float]] = {}
    for stage in ("bm25", "dense"):
        items = getattr(record.stages, stage, None) if record.stages is not None else None
        scores[stage] = {
            item.chunk_id: item.score
            for item in items or ()
            if not isinstance(item, str) and item.score is not None
        }
    return scores


def _replayed_scores(trace: Trace) -> dict[str, dict[str, float]]:
    routes = {stage: replayed_route(trace, stage) for stage in STAGE_ROUTES}
    return {stage: {h.chunk_id: h.score for h in r.hits} if r else {} for stage, r in routes.items()}


def _rewrite_difference(record: RequestLog, trace: Trace) -> str | None:
    """How the replayed rewrite differs from the logged one (None: same, or nothing logged)."""
    logged = record.rewrite
    if logged is None or logged.rewritten_query is None:
        return None
    replayed = trace.rewrite
    if logged.rewritten_query != replayed.rewritten_query:
        return f"rewritten query {quoted(logged.rewritten_query)} logged, {quoted(replayed.rewritten_query)} replayed"
    if logged.sub_queries is not None and list(logged.sub_queries) != list(replayed.sub_queries):
        return f"sub-queries {logged.sub_queries} logged, {replayed.sub_queries} replayed"
    return None


def _measure_group(
    group: ReplayGroup,
    *,
    batch_size: int,
    on_progress: Callable[[int, int], None] | None,
    should_stop: Callable[[], bool] | None,
) -> list[tuple[RequestLog, Trace]]:
    # Each request at its own time: freshness then matches what production computed.
    options = [RunOptions(as_of=r.ts) if r.ts is not None else RunOptions() for r in group.records]
    traces = group.pipeline.run_many(
        [r.raw_query for r in group.records],
        options=options,
        batch_size=batch_size,
        on_progress=on_progress,
        should_stop=should_stop,
    )
    return list(zip(group.records, traces, strict=False))


def judge(
    pairs: Sequence[tuple[RequestLog, Trace]],
    live: set[str],
    doc_of: dict[str, str],
    *,
    profiles: dict[str, tuple[str, str | None]] | None = None,
    notes: dict[str, list[str]] | None = None,
    limits: dict[str, dict[str, int]] | None = None,
    named: dict[str, tuple[str, str]] | None = None,
    kb: dict[str, KBChunk] | None = None,
) -> list[RequestFidelity]:
    """Compare and explain every (logged request, replay) pair; stale documents seen in any request
    of a `pipeline_version` explain misses of the others of that version. `limits`: request id →
    its profile's `stage_limits`. `named`: logged id the KB has no row for → (document, what named
    it), see `name_documents`. `kb`: the live chunks of the logged and replayed lists
    (`live_chunks`): a logged `content_hash` other than the KB's text, or a newer KB version
    written after the request, makes a chunk changed (`RequestFidelity.changed_chunks`)."""
    named = named or {}
    kb = kb or {}
    results: list[RequestFidelity] = []
    stage_members: list[dict[str, set[str]]] = []
    own_hashes: list[dict[str, str]] = []
    changed_by_version: dict[str | None, dict[str, ChunkChange]] = {}
    for record, trace in pairs:
        lists = _logged_lists(record)
        extra = {route.name: [h.chunk_id for h in route.hits] for route in extra_routes(record)}
        stages = compare_request(lists, trace, live, extra_routes=extra)
        expected: dict[str, set[str]] = {}
        for stage in stages:
            for route, ids in stage.expected_lost.items():
                expected.setdefault(route, set()).update(ids)
        without = {route: len(ids) for route, ids in sorted(expected.items())}
        logged_ids = [c for ids in lists.values() for c in ids or ()]
        stale: dict[str, list[str]] = {}
        named_by: dict[str, str] = {}
        unknown: list[str] = []
        for chunk_id in dict.fromkeys(c for c in logged_ids if c not in live):
            if chunk_id in doc_of:
                stale.setdefault(doc_of[chunk_id], []).append(chunk_id)
            elif chunk_id in named:
                doc_id, how = named[chunk_id]
                stale.setdefault(doc_id, []).append(chunk_id)
                named_by.setdefault(doc_id, how)
            else:
                unknown.append(chunk_id)
        hashes = {
            c: info["content_hash"]
            for c, info in logged_chunks(record).items()
            if isinstance(info.get("content_hash"), str) and c in kb
        }
        version_changes = changed_by_version.setdefault(record.pipeline_version, {})
        for chunk_id, logged_hash in hashes.items():
            held = kb[chunk_id]
            if held.fingerprint != logged_hash:
                version_changes.setdefault(
                    chunk_id,
                    ChunkChange(doc_id=held.doc_id, updated_at=held.updated_at, content_differs=True),
                )
        members = {
            stage: set(lists.get(stage) or ()) | set(replayed_stage_ids(trace, stage))
            for stage in STAGE_NAMES
        }
        profile, config_hash = (profiles or {}).get(record.request_id, ("default", trace.config_hash))
        item_notes = list((notes or {}).get(record.request_id, []))
        if record.ts is None:
            item_notes.append("no request time logged: rerank freshness computed at replay time")
        results.append(
            RequestFidelity(
                request_id=record.request_id,
                ts=record.ts,
                pipeline_version=record.pipeline_version,
                profile=profile,
                config_hash=config_hash,
                stages=stages,
                stale_documents=stale,
                stale_named_by=named_by,
                unknown_ids=unknown,
                routes_without_counterpart=without,
                rewrite_differs=_rewrite_difference(record, trace),
                notes=item_notes,
            )
        )
        stage_members.append(members)
        own_hashes.append(hashes)
    for result, members, hashes, (record, _) in zip(results, stage_members, own_hashes, pairs, strict=True):
        result.changed_chunks = _changed_chunks(
            result,
            set().union(*members.values()),
            {c for ids in _logged_lists(record).values() for c in ids or ()},
            hashes,
            kb,
            changed_by_version.get(result.pipeline_version, {}),
        )
    stale_by_version: dict[str | None, set[str]] = {}
    for result in results:
        # A chunk that changed moves BM25 statistics for every request of the version, as a stale one does.
        changed_docs = {c.doc_id for c in changed_by_version.get(result.pipeline_version, {}).values()}
        stale_by_version.setdefault(result.pipeline_version, set()).update(
            set(result.stale_documents) | changed_docs
        )
    for result, members, (record, trace) in zip(results, stage_members, pairs, strict=True):
        explain_request(
            result,
            replayed_docs={c.chunk_id: c.doc_id for c in trace.candidates},
            stale_docs_of_version=stale_by_version.get(result.pipeline_version, set()),
            logged_scores=_logged_scores(record),
            replayed_scores=_replayed_scores(trace),
            replayed_limits=(limits or {}).get(result.request_id),
            members=members,
        )
    return results


def _changed_chunks(
    result: RequestFidelity,
    ids: set[str],
    logged: set[str],
    own_hashes: dict[str, str],
    kb: dict[str, KBChunk],
    version_changes: dict[str, ChunkChange],
) -> dict[str, ChunkChange]:
    """The chunks of a request's lists (logged or replayed) whose text changed after it: its own
    logged text differs from the KB's; or it logged none for the chunk and another request of its
    version did; or, for a chunk it logged, the KB wrote a newer version of it (version > 1) after
    the request (a new id the request never logged is a new chunk, not a changed one)."""
    changed: dict[str, ChunkChange] = {}
    for chunk_id in sorted(ids):
        held = kb.get(chunk_id)
        if held is None:
            continue
        if chunk_id in own_hashes:
            if own_hashes[chunk_id] != held.fingerprint:
                changed[chunk_id] = version_changes[chunk_id]
        elif chunk_id in version_changes:
            changed[chunk_id] = version_changes[chunk_id]
        elif (
            chunk_id in logged and held.version > 1 and result.ts is not None and held.updated_at > result.ts
        ):
            changed[chunk_id] = ChunkChange(doc_id=held.doc_id, updated_at=held.updated_at)
    return changed


def store_fidelity(engine: Engine, results: Sequence[RequestFidelity]) -> int:
    """Replace the stored fidelity of these requests (short transactions). Returns rows written."""
    table = ReplayFidelityRow.__table__  # type: ignore[attr-defined]
    now = datetime.now(timezone.utc)
    for start in range(0, len(results), STORE_BATCH):
        batch = results[start : start + STORE_BATCH]
        rows = [
            {
                "request_id": r.request_id,
                "measured_at": now,
                "pipeline_version": r.pipeline_version,
                "profile": r.profile,
                "config_hash": r.config_hash,
                "line": r.line,
                "min_rbo": r.min_rbo,
                "exact_stages": r.exact_stages,
                "stages_compared": len(r.stages),
                "unexplained": len(r.unexplained),
                "stale_documents": sorted(
                    set(r.stale_documents) | {c.doc_id for c in r.changed_chunks.values()}
                ),
                "stages": [s.model_dump(mode="json") for s in r.stages],
                "notes": list(r.notes),
            }
            for r in batch
        ]
        with write_session(engine) as session:
            session.execute(delete(table).where(table.c.request_id.in_([r.request_id for r in batch])))
            session.execute(insert(table), rows)
    return len(results)


class StoredFidelity(BaseModel):
    """The stored fidelity of one request (what the case screen and `show` print)."""

    request_id: str
    measured_at: datetime
    profile: str
    line: str
    min_rbo: float
    unexplained: int
    stale_documents: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def get_fidelity(engine: Engine, request_id: str) -> StoredFidelity | None:
    """The last fidelity measured for a request, or None when `ragtriage fidelity` never replayed it."""
    with read_session(engine) as session:
        row = session.get(ReplayFidelityRow, request_id)
        return None if row is None else StoredFidelity.model_validate(row, from_attributes=True)


def measure_fidelity(
    workspace: Workspace,
    *,
    since: datetime | None = None,
    version: str | None = None,
    sample: int | None = None,
    seed: int = 0,
    store: bool = True,
    least: int = 10,
    batch_size: int = 64,
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> FidelityReport:
    """Replay the selected requests with their profiles, compare every logged stage, store the
    per-request results (unless `store=False`) and return the report.

    Raises:
        InputError: a bad `sample`.
    """
    started = time.perf_counter()
    records = select_requests(workspace.engine, since=since, version=version, sample=sample, seed=seed)
    pairs: list[tuple[RequestLog, Trace]] = []
    profiles: dict[str, tuple[str, str | None]] = {}
    notes: dict[str, list[str]] = {}
    limits: dict[str, dict[str, int]] = {}
    done_before = 0
    for group in plan_replays(workspace, records):
        group.pipeline.warm_up()

        def progress(done: int, _total: int, offset: int = done_before) -> None:
            if on_progress is not None:
                on_progress(offset + done, len(records))

        pairs += _measure_group(group, batch_size=batch_size, on_progress=progress, should_stop=should_stop)
        done_before = len(pairs)
        profiles.update({r.request_id: (group.profile, group.config_hash) for r in group.records})
        notes.update(group.notes)
        group_limits = stage_limits(group.pipeline.settings.retrieval)
        limits.update({r.request_id: group_limits for r in group.records})
    replay_seconds = time.perf_counter() - started
    logged_ids = [c for record, _ in pairs for ids in _logged_lists(record).values() for c in ids or ()]
    live, doc_of = chunk_origins(workspace.engine, logged_ids)
    logged_info: dict[str, dict[str, str]] = {}
    for record, _ in pairs:
        for chunk_id, info in logged_chunks(record).items():
            logged_info.setdefault(chunk_id, info)
    rowless = {c: info for c, info in logged_info.items() if c not in live and c not in doc_of}
    named = name_documents(workspace.engine, rowless) if rowless else {}
    replayed_ids = [
        c for _, trace in pairs for stage in STAGE_NAMES for c in replayed_stage_ids(trace, stage)
    ]
    kb = live_chunks(workspace.engine, [c for c in logged_ids if c in live] + replayed_ids)
    results = judge(pairs, live, doc_of, profiles=profiles, notes=notes, limits=limits, named=named, kb=kb)
    stored = store_fidelity(workspace.engine, results) if store else 0
    report = summarize(results, least=least)
    unmapped = sorted({r.pipeline_version or "none logged" for r in results if r.request_id in notes})
    if unmapped:
        noun = "pipeline_version" if len(unmapped) == 1 else "pipeline_versions"
        report.notes.append(
            f"{noun} {', '.join(unmapped)}: no [replay.versions] entry, replayed with the default profile; "
            "map them to a profile (`ragtriage profiles`) to replay them as production ran"
        )
    if not records and version is not None:
        present = ", ".join(f"{name} ({count})" for name, count in logged_versions(workspace.engine).items())
        report.notes.insert(
            0,
            f"no stored request has a pipeline_version matching {quoted(version)}; the logged ones: "
            f"{present or 'none (no request stored)'}",
        )
    report.selected = len(records)
    report.stored = stored
    report.replay_seconds = round(replay_seconds, 2)
    report.seconds = round(time.perf_counter() - started, 2)
    return report
