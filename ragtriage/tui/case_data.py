"""What the case screen shows, gathered from the headless core (no Textual here: workers call these).

`load_case` reads the logged request, its triage record and the logged trace with its candidate
pool; `replay_case` replays the query and diagnoses it. Both return plain data for the UI thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ragtriage.config.profiles import resolve_profile
from ragtriage.kb.service import get_chunks
from ragtriage.kb.types import ChunkRecord
from ragtriage.logs.requests import get_request, request_view
from ragtriage.logs.schema import to_trace
from ragtriage.pipeline.chunk_lookup import ChunkLookup
from ragtriage.pipeline.pipeline import RunCancelled, build_candidates
from ragtriage.pipeline.rerank import RerankOutcome
from ragtriage.pipeline.types import RunOptions, Trace
from ragtriage.replay.fidelity_run import StoredFidelity, get_fidelity
from ragtriage.store.gold import gold_ids as stored_gold_ids
from ragtriage.store.triage_repo import TriageRecord
from ragtriage.triage.context import WorkspaceContext
from ragtriage.triage.diagnose import Diagnosis, diagnose
from ragtriage.workspace import Workspace

StopCheck = Callable[[], bool]


def gold_ids(record: TriageRecord | None) -> list[str]:
    """Gold chunk ids of a triage record (`store.gold.gold_ids`)."""
    if record is None:
        return []
    return stored_gold_ids(record.gold_chunk_ids)


@dataclass
class CaseData:
    """One flagged request as the case screen shows it."""

    request_id: str
    query: str
    record: TriageRecord | None
    logged: Trace
    replayed: Trace | None = None
    diagnosis: Diagnosis | None = None
    chunks: dict[str, ChunkRecord] = field(default_factory=dict)
    """Chunk id → chunk with content, for the preview."""
    ts: datetime | None = None
    """When the request was logged (replays score freshness at that moment)."""
    pipeline_version: str | None = None
    """The logged pipeline_version (replays run with the profile mapped to it)."""
    fidelity: StoredFidelity | None = None
    """The last `ragtriage fidelity` measurement of this request."""

    @property
    def fidelity_line(self) -> str | None:
        """`bm25 3/3 · dense 3/3 · …` of this session's replay, else the stored one, else None."""
        if self.diagnosis is not None and self.diagnosis.fidelity is not None:
            return f"{self.diagnosis.fidelity} (this replay)"
        if self.fidelity is not None:
            stored = self.fidelity
            return f"{stored.line} (measured {stored.measured_at:%Y-%m-%d}, profile {stored.profile})"
        return None

    @property
    def gold(self) -> list[str]:
        """The triage record's gold chunk ids."""
        return gold_ids(self.record)


def logged_trace(workspace: Workspace, request_id: str, gold: Sequence[str]) -> Trace:
    """The logged request as a trace, with its candidate pool and KB metadata filled in."""
    trace = to_trace(get_request(workspace.engine, request_id))
    outcome = RerankOutcome(reranked=list(trace.reranked), pairs=[], mode="logged")
    lookup = ChunkLookup(workspace.engine, kb=workspace.settings.kb.name)
    trace.candidates = build_candidates(
        trace.routes, trace.fused, trace.rerank_input, outcome, trace.final, lookup
    )
    trace.gold = list(gold)
    return trace


def chunk_records(workspace: Workspace, chunk_ids: Sequence[str]) -> dict[str, ChunkRecord]:
    """Chunks with content for the given ids (unknown ids are absent)."""
    return dict(get_chunks(workspace.engine, list(dict.fromkeys(chunk_ids))))


def load_case(workspace: Workspace, request_id: str) -> CaseData:
    """The logged request, its triage record, the logged trace and the text of every candidate and gold chunk."""
    view = request_view(workspace.engine, request_id)
    gold = gold_ids(view.triage)
    trace = logged_trace(workspace, request_id, gold)
    ids = [c.chunk_id for c in trace.candidates] + list(trace.final) + gold
    return CaseData(
        request_id=request_id,
        query=view.request.record.raw_query,
        record=view.triage,
        logged=trace,
        chunks=chunk_records(workspace, ids),
        ts=view.request.record.ts,
        pipeline_version=view.request.record.pipeline_version,
        fidelity=get_fidelity(workspace.engine, request_id),
    )


def replay_case(
    workspace: Workspace,
    case: CaseData,
    *,
    should_stop: StopCheck | None = None,
    on_stage: Callable[[str, int, int], None] | None = None,
) -> tuple[Trace, Diagnosis, dict[str, ChunkRecord]]:
    """Replay the query with today's KB and settings, then diagnose it (counterfactuals included).

    Raises:
        RunCancelled: `should_stop()` turned true between two stages.
    """
    report = on_stage or (lambda _name, _done, _total: None)
    report("replay", 0, 3)
    # As production ran it: the profile mapped to its pipeline_version, at its logged time.
    profile = resolve_profile(workspace.settings, case.pipeline_version)
    options = RunOptions(as_of=case.ts)
    pipeline = workspace.pipeline_for(profile)
    trace = pipeline.run(case.query, options=options, gold=case.gold, should_stop=should_stop)
    report("diagnosis", 1, 3)
    context = WorkspaceContext(workspace)
    context.use_profile(profile)
    try:
        diagnosis = diagnose(
            context,
            case.query,
            logged=case.logged,
            gold=case.gold or None,
            request_id=case.request_id,
            replay=trace,
            should_stop=should_stop,
            as_of=case.ts,
        )
    finally:
        context.close()
    if should_stop is not None and should_stop():
        raise RunCancelled("replay cancelled")
    report("chunks", 2, 3)
    chunks = chunk_records(workspace, [c.chunk_id for c in trace.candidates] + list(trace.final))
    report("done", 3, 3)
    return trace, diagnosis, chunks


def search_kb(workspace: Workspace, text: str, k: int = 20) -> list[tuple[ChunkRecord, float]]:
    """Chunks matching `text` by the pipeline's BM25 index, best first, with their scores."""
    bm25 = workspace.pipeline.bm25
    if bm25 is None or not text.strip():
        return []
    hits, _flags = bm25.search(text, k)
    found = chunk_records(workspace, [hit.chunk_id for hit in hits])
    return [(found[hit.chunk_id], hit.score) for hit in hits if hit.chunk_id in found]
