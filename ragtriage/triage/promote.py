"""Promote a confirmed triage record into a permanent eval case, with provenance and PII redacted.

The query is redacted before anything is stored (`settings.eval.redact_pii`), so the original never
enters the eval set; the duplicate check runs on the redacted, normalized query and the gold ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ragtriage.config.profiles import resolve_profile
from ragtriage.errors import InputError, NotFoundError
from ragtriage.eval.cases import EvalCase
from ragtriage.eval.gold_map import refs_for_chunks
from ragtriage.eval.runner import index_manifest_summary
from ragtriage.logs.requests import find_request
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.kb_repo import kb_revision
from ragtriage.store.triage_repo import find_record
from ragtriage.triage.redact import redact_pii
from ragtriage.triage.sampling import SAMPLED_REASON
from ragtriage.wording import quoted

if TYPE_CHECKING:
    from ragtriage.workspace import Workspace

__all__ = [
    "NO_ANSWER_LABEL",
    "ORIGIN_COMPLAINT",
    "ORIGIN_SAMPLED",
    "PromoteResult",
    "promote_request",
]

#: `provenance["origin"]` of a case promoted from a sampled request / from a flagged complaint.
ORIGIN_SAMPLED = "sampled"
ORIGIN_COMPLAINT = "complaint"

#: The label of a confirmed badcase whose right answer is a refusal (a case without gold).
NO_ANSWER_LABEL = "no_answer_in_kb"


class PromoteResult(BaseModel):
    """What promotion did: the new case, or the existing duplicate it found."""

    request_id: str
    dataset: str
    case_id: str
    created: bool
    """False when the same normalized query with the same gold was already a case."""
    dataset_version: int
    query: str
    """The query as stored (redacted)."""
    gold: dict[str, int] = Field(default_factory=dict)
    redacted: dict[str, int] = Field(default_factory=dict)
    """Kind → how many items were replaced (`phone`, `email`, `id_card`, `bank_card`)."""
    provenance: dict[str, Any] = Field(default_factory=dict)


def _gold_from_record(items: Sequence[Any]) -> dict[str, int]:
    """Gold ids as stored by triage: plain ids, or `{chunk_id, grade}` objects."""
    gold: dict[str, int] = {}
    for item in items:
        if isinstance(item, Mapping):
            chunk_id = item.get("chunk_id") or item.get("id")
            if chunk_id:
                gold[str(chunk_id)] = int(item.get("grade", 1) or 1)
        elif item:
            gold[str(item)] = 1
    return gold


def _load_record(
    workspace: Workspace, request_id: str
) -> tuple[str, str | None, str | None, list[str], dict[str, int], list[str]]:
    stored = find_request(workspace.engine, request_id)
    if stored is None:
        raise NotFoundError(
            f"request_id {quoted(request_id)} is not in the store; ingest its log with `logs ingest`"
        )
    triage = find_record(workspace.engine, request_id)
    if triage is None or triage.status != "confirmed":
        status = triage.status if triage is not None else "not flagged"
        raise InputError(
            f"request {quoted(request_id)} is {status}; only confirmed triage records are promoted "
            "(label it and confirm it first)"
        )
    record = stored.record
    return (
        record.raw_query,
        record.config_hash,
        record.pipeline_version,
        list(triage.labels),
        _gold_from_record(triage.gold_chunk_ids),
        list(triage.reasons),
    )


def promote_request(
    workspace: Workspace,
    request_id: str,
    *,
    dataset: str = eval_store.DEFAULT_DATASET,
    grades: Mapping[str, int] | None = None,
    must_have: Sequence[str] = (),
    intent_type: str | None = None,
    difficulty: str | None = None,
    tags: Sequence[str] = (),
    case_id: str | None = None,
) -> PromoteResult:
    """Turn the confirmed triage record of `request_id` into an eval case in `dataset`.

    `grades` overrides the grade of listed gold ids (default 1). A record without gold becomes a
    refusal case only when its label is `no_answer_in_kb`.

    Raises:
        NotFoundError: the request is not in the store, or its profile is not defined.
        InputError: the record is not confirmed, or has no gold and is not labelled `no_answer_in_kb`.
    """
    raw_query, logged_config_hash, pipeline_version, labels, gold, reasons = _load_record(
        workspace, request_id
    )
    # The profile replay and diagnosis ran this request with (the same choice as `replay`).
    profile = resolve_profile(workspace.settings, pipeline_version)
    for gold_id, grade in (grades or {}).items():
        if gold_id not in gold:
            raise InputError(
                f"--grade {gold_id}={grade}: {quoted(gold_id)} is not a gold chunk of request {quoted(request_id)}"
            )
        gold[gold_id] = int(grade)
    label = labels[0] if labels else None
    if not any(grade > 0 for grade in gold.values()) and label != NO_ANSWER_LABEL:
        raise InputError(
            f"request {quoted(request_id)} has no gold chunk ids; add them in triage, "
            f"or label it {NO_ANSWER_LABEL} "
            "to promote it as a refusal case"
        )
    redaction = redact_pii(raw_query) if workspace.settings.eval.redact_pii else None
    query = redaction.text if redaction is not None else raw_query
    redacted = dict(redaction.counts) if redaction is not None else {}

    existing = eval_store.find_duplicate(workspace.engine, dataset, query, gold)
    if existing is not None:
        version = eval_store.dataset_version(workspace.engine, dataset)
        return PromoteResult(
            request_id=request_id,
            dataset=dataset,
            case_id=existing,
            created=False,
            dataset_version=version,
            query=query,
            gold=gold,
            redacted=redacted,
        )

    provenance = {
        "source": "promote",
        # Sampled review (`queue sample`) vs. a flagged complaint: the `origin:` bucket of the case.
        "origin": ORIGIN_SAMPLED if SAMPLED_REASON in reasons else ORIGIN_COMPLAINT,
        "request_id": request_id,
        "label": label,
        "labels": labels,
        "kb_revision": kb_revision(workspace.engine, workspace.settings.kb.name),
        "index_manifest": index_manifest_summary(workspace),
        "config_hash": profile.config_hash,
        "profile": profile.name,
        "profile_matched_by": profile.matched_by,
        "pipeline_version": pipeline_version,
        "logged_config_hash": logged_config_hash,
        "promoted_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "redacted": redacted,
    }
    new_id = case_id or eval_store.next_case_id(workspace.engine, dataset, prefix="badcase")
    case = EvalCase(
        case_id=new_id,
        query=query,
        gold=gold,
        gold_granularity="chunk",
        must_have=list(must_have),
        intent_type=intent_type,
        difficulty=difficulty,
        tags=list(dict.fromkeys(tags)),
        # The chunks' (doc_id, anchor, span) too, so the case still scores after re-chunking.
        gold_refs=refs_for_chunks(workspace.engine, gold),
    )
    report = eval_store.add_cases(workspace.engine, dataset, [case], provenance=provenance)
    return PromoteResult(
        request_id=request_id,
        dataset=dataset,
        case_id=new_id,
        created=True,
        dataset_version=report.dataset_version,
        query=query,
        gold=gold,
        redacted=redacted,
        provenance=provenance,
    )
