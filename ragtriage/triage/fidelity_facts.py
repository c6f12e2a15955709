"""How far diagnosis may trust the replay of a logged request, and what it says about that.

`replay_fidelity` compares each logged stage with the replayed one (`logs.fidelity`) and resolves
the logged ids the KB no longer has live: an older version of a document that now has other ids
(the mark of `index_stale`), or an id no document can be named for. `fidelity_evidence` is the
evidence line every diagnosis of a logged request carries, naming the fidelity it relied on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ragtriage.pipeline.types import Trace
from ragtriage.replay.fidelity import STAGE_SHORT, StageFidelity, compare_traces
from ragtriage.triage.context import DiagnosisContext

#: The logged stages each label blames: diagnosis judges them from the logged lists.
LABEL_STAGES: dict[str, tuple[str, ...]] = {
    "rewrite_error": ("bm25", "dense"),
    "alias_missing": ("bm25",),
    "bm25_miss": ("bm25",),
    "dense_drift": ("dense",),
    "rerank_error": ("reranked", "final_context"),
    "chunk_split_bad": ("final_context",),
    "generation_error": ("final_context",),
    "label_error": ("final_context",),
    "no_answer_in_kb": ("final_context",),
}


@dataclass
class ReplayFidelity:
    """The logged request against its replay."""

    stages: list[StageFidelity] = field(default_factory=list)
    stale_documents: dict[str, list[str]] = field(default_factory=dict)
    """Document → logged ids of an older version of it (the KB has other ids for it now)."""
    unknown: list[str] = field(default_factory=list)
    """Logged ids the KB has no row for and no document can be named for."""

    def stage(self, name: str) -> StageFidelity | None:
        """The comparison of one logged stage, or None when it was not logged."""
        return next((s for s in self.stages if s.stage == name), None)

    def diverged(self, name: str) -> bool:
        """True when the stage was logged and the replay does not reproduce it exactly."""
        found = self.stage(name)
        return found is not None and not found.exact

    @property
    def line(self) -> str:
        return " · ".join(s.cell for s in self.stages) or "no stage logged"

    @property
    def exact(self) -> bool:
        return all(s.exact for s in self.stages)


def _origins(ctx: DiagnosisContext, chunk_ids: Sequence[str]) -> tuple[set[str], dict[str, str]]:
    """(live ids, id → document) through the context's bulk lookup when it has one (the workspace),
    else through `ctx.chunk` (a deleted row keeps its document; no row: unknown)."""
    bulk = getattr(ctx, "chunk_origins", None)
    if bulk is not None:
        found_live, found_docs = bulk(chunk_ids)
        return set(found_live), dict(found_docs)
    live: set[str] = set()
    doc_of: dict[str, str] = {}
    for chunk_id in dict.fromkeys(chunk_ids):
        chunk = ctx.chunk(chunk_id)
        if chunk is None:
            continue
        if chunk.status == "deleted":
            doc_of[chunk_id] = chunk.doc_id
        else:
            live.add(chunk_id)
    return live, doc_of


def replay_fidelity(ctx: DiagnosisContext, logged: Trace, replay: Trace) -> ReplayFidelity:
    """Compare every logged stage with the replay and name the documents of the stale logged ids."""
    from ragtriage.triage.facts import trace_chunk_ids

    logged_ids = trace_chunk_ids(logged)
    live, doc_of = _origins(ctx, [*logged_ids, *trace_chunk_ids(replay)])
    result = ReplayFidelity(stages=compare_traces(logged, replay, live))
    for chunk_id in logged_ids:
        if chunk_id in live:
            continue
        if chunk_id in doc_of:
            result.stale_documents.setdefault(doc_of[chunk_id], []).append(chunk_id)
        else:
            result.unknown.append(chunk_id)
    return result


def stage_note(stage: StageFidelity) -> str:
    """`replayed dense differs from logged (overlap 6/10): judged from the logged list`."""
    name = STAGE_SHORT.get(stage.stage, stage.stage)
    return f"replayed {name} differs from logged (overlap {stage.overlap}/{stage.k}): judged from the logged list"


def fidelity_evidence(fidelity: ReplayFidelity | None, label: str | None, has_logged: bool) -> list[str]:
    """The evidence lines naming the fidelity a diagnosis relied on (one summary, plus one per
    stage the label blames that the replay does not reproduce)."""
    if not has_logged:
        return ["no logged request: judged from the replay alone"]
    if fidelity is None:
        return ["judged from the logged request (no replay to compare)"]
    if fidelity.exact:
        return [f"replay fidelity {fidelity.line}: every logged stage reproduced"]
    lines = [
        f"replay fidelity {fidelity.line}: logged stages are judged from the logged lists, "
        "the replay only for what production did not log"
    ]
    for name in LABEL_STAGES.get(label or "", ()):
        stage = fidelity.stage(name)
        if stage is not None and not stage.exact:
            lines.append(stage_note(stage))
    return lines
