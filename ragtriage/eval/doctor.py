"""Eval-set doctor: why metrics come out all zero or wrong, each finding with its case ids and the fix.

Checks, in the order a triager should fix them: gold ids that are document ids (at chunk
granularity) or chunk ids (at doc granularity), unknown gold ids, gold refs (doc_id with anchor or
span) that map to no live chunk, gold chunks from another KB,
unpublished gold, deleted gold, gold lost after re-chunking (with the live chunk of the same
document whose content overlaps most), gold missing from the indexes, duplicate cases, conflicting
gold for one query, and cases without gold; then the KB (`empty_document_findings`: documents with
no chunk) and the settings (`refusal_findings`).

A `[rerank] refusal_threshold` is a value on the scale of the score it was calibrated for
(`refusal_threshold_score`). When the configuration refuses by another kind (a cross-encoder was
added, `refusal_score` changed), refusal does not judge any request (`pipeline.refusal`); when a
settings file gives a threshold without its kind, the threshold applies to whatever score the run
has, as before the kind was recorded, and nothing checks its scale.

When refusal judges by a score other than a cross-encoder's (`refusal_cost_findings`), the doctor
says what that costs on the dataset, from the latest run's stored refusal decisions (each case
snapshot's `refused`, the pipeline's refusal verdict; an empty final context without a refusal is
not counted; nor is a case that retrieved nothing, which a cross-encoder would refuse too):
answerable cases (with gold) refused ÷ answerable cases, and no-answer cases (no gold) not refused
÷ no-answer cases. Silent without such a run, or when both shares are 0.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ragtriage import locations
from ragtriage.config.settings import RerankSettings
from ragtriage.eval.gold_map import resolve_cases
from ragtriage.index.manifest import read_manifest
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.kb_repo import empty_documents
from ragtriage.store.kb_tables import filtered_reason

if TYPE_CHECKING:
    from ragtriage.workspace import Workspace

__all__ = [
    "DoctorReport",
    "Finding",
    "FindingItem",
    "best_overlap",
    "empty_document_findings",
    "refusal_cost_findings",
    "refusal_findings",
    "run_doctor",
]

DELETED = "deleted"
#: `ChunkRow.deletion` of a chunk that went without a replacement in its (live) document.
REMOVED = "removed"


class FindingItem(BaseModel):
    """One case (and gold id) a finding is about; `proposal` is the suggested replacement id."""

    case_id: str
    gold_id: str | None = None
    note: str | None = None
    proposal: str | None = None
    overlap: float | None = None


class Finding(BaseModel):
    """One kind of problem, every case it touches, and how to fix it."""

    kind: str
    severity: str
    """`error` (scores are wrong) or `warning` (scores are right but may mislead)."""
    summary: str
    fix: str
    items: list[FindingItem] = Field(default_factory=list)
    ids: list[str] = Field(default_factory=list)
    """The KB's ids a finding about no case is about (`empty_documents`: document ids)."""

    @property
    def case_ids(self) -> list[str]:
        """The distinct case ids of the items."""
        return list(dict.fromkeys(item.case_id for item in self.items))


class DoctorReport(BaseModel):
    """Every finding on one dataset version; no findings means the eval set looks sound."""

    dataset: str
    dataset_version: int
    cases: int
    kb: str
    findings: list[Finding] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when there is no error-level finding."""
        return not any(f.severity == "error" for f in self.findings)

    def error_line(self) -> str | None:
        """One line naming the error-level findings and the command that explains them (None when
        `ok`): `the gold of 1 case makes its scores wrong (unknown_gold: x1); see …`."""
        errors = [f for f in self.findings if f.severity == "error"]
        if not errors:
            return None
        cases = len({case for f in errors for case in f.case_ids})
        kinds = "; ".join(
            f"{f.kind}: {', '.join(f.case_ids[:3])}"
            + (f" +{len(f.case_ids) - 3} more" if len(f.case_ids) > 3 else "")
            for f in errors
        )
        where = "" if self.dataset == eval_store.DEFAULT_DATASET else f" --dataset {self.dataset}"
        return (
            f"the gold of {cases} case{'' if cases == 1 else 's'} of {self.dataset}@{self.dataset_version} "
            f"makes {'its' if cases == 1 else 'their'} scores wrong ({kinds}); "
            f"see `ragtriage doctor{where}` for the fix"
        )


def _char_bigrams(text: str) -> set[str]:
    compact = "".join(text.split())
    return {compact[i : i + 2] for i in range(len(compact) - 1)} or ({compact} if compact else set())


def best_overlap(old_content: str, candidates: list[tuple[str, str]]) -> tuple[str | None, float]:
    """The (chunk id, score) among `(chunk id, content)` candidates closest to `old_content`.

    Score = max(character-bigram Jaccard, difflib ratio on the first 2,000 characters): Jaccard
    survives reordering, the ratio catches a chunk that is the old one with an edit.
    """
    old_grams = _char_bigrams(old_content)
    best_id, best_score = None, 0.0
    for chunk_id, content in candidates:
        grams = _char_bigrams(content)
        jaccard = len(old_grams & grams) / len(old_grams | grams) if old_grams | grams else 0.0
        ratio = difflib.SequenceMatcher(None, old_content[:2000], content[:2000], autojunk=False).ratio()
        score = max(jaccard, ratio)
        if score > best_score:
            best_id, best_score = chunk_id, score
    return best_id, best_score


def run_doctor(
    workspace: Workspace, dataset: str = eval_store.DEFAULT_DATASET, *, refusal_cost: bool = True
) -> DoctorReport:
    """Check the current version of `dataset` against the KB and the indexes; `refusal_cost=False`
    leaves out `refusal_cost_findings` (it reads the newest run's case snapshots).

    Raises:
        NotFoundError: no such dataset.
    """
    version = eval_store.dataset_version(workspace.engine, dataset)
    cases = eval_store.dataset_cases(workspace.engine, dataset, version)
    kb = workspace.settings.kb.name
    report = DoctorReport(dataset=dataset, dataset_version=version, cases=len(cases), kb=kb)
    mappings = resolve_cases(workspace.engine, [stored.case for stored in cases])
    gold_ids = {g for c in cases for g in c.case.gold} | {g for m in mappings for g in m.case.gold}
    chunks, documents = eval_store.gold_rows(workspace.engine, gold_ids)
    findings: dict[str, Finding] = {}

    def add(kind: str, item: FindingItem) -> None:
        summary, fix, severity = _KINDS[kind]
        findings.setdefault(
            kind, Finding(kind=kind, severity=severity, summary=summary, fix=fix)
        ).items.append(item)

    indexed = _indexed_chunk_ids(workspace)
    rechunked: dict[str, list[tuple[str, str]]] = {}
    for stored, mapping in zip(cases, mappings, strict=True):
        case = stored.case
        for ref in mapping.unmapped:
            add("unmapped_gold", FindingItem(case_id=case.case_id, gold_id=ref.label, note=_ref_note(ref)))
        # With every ref mapped, the refs carry the gold: check the chunks they map to, not the
        # stored chunk ids (which re-chunking is expected to replace).
        gold = mapping.case.gold if case.gold_refs and not mapping.unmapped else case.gold
        for gold_id, grade in gold.items():
            if grade <= 0:
                continue
            chunk, document = chunks.get(gold_id), documents.get(gold_id)
            if case.gold_granularity == "doc":
                if document is None and chunk is not None:
                    add(
                        "chunk_id_as_doc",
                        FindingItem(case_id=case.case_id, gold_id=gold_id, proposal=chunk.doc_id),
                    )
                elif document is None:
                    add("unknown_gold", FindingItem(case_id=case.case_id, gold_id=gold_id))
                elif document.status == DELETED:
                    add(
                        "deleted_gold",
                        FindingItem(case_id=case.case_id, gold_id=gold_id, note="document deleted"),
                    )
                continue
            if chunk is None:
                if document is not None:
                    add("doc_id_as_chunk", FindingItem(case_id=case.case_id, gold_id=gold_id))
                else:
                    add("unknown_gold", FindingItem(case_id=case.case_id, gold_id=gold_id))
            elif chunk.kb != kb:
                add(
                    "other_kb",
                    FindingItem(case_id=case.case_id, gold_id=gold_id, note=f"chunk of KB {chunk.kb}"),
                )
            elif chunk.status == DELETED:
                owner = documents.get(chunk.doc_id)
                filtered = filtered_reason(chunk.deletion)
                if owner is not None and owner.status != DELETED and (chunk.deletion == REMOVED or filtered):
                    add(
                        "deleted_gold",
                        FindingItem(
                            case_id=case.case_id,
                            gold_id=gold_id,
                            note=f"chunk {filtered + ' when imported' if filtered else 'deleted'}; its "
                            f"document {chunk.doc_id} is live: ragtriage kb chunks --doc {chunk.doc_id}",
                        ),
                    )
                elif owner is not None and owner.status != DELETED:
                    if chunk.doc_id not in rechunked:
                        rechunked[chunk.doc_id] = eval_store.live_chunk_texts(workspace.engine, chunk.doc_id)
                    proposal, score = best_overlap(chunk.content, rechunked[chunk.doc_id])
                    add(
                        "rechunked_gold",
                        FindingItem(
                            case_id=case.case_id,
                            gold_id=gold_id,
                            proposal=proposal,
                            overlap=round(score, 3),
                            note=f"document {chunk.doc_id} was re-chunked",
                        ),
                    )
                else:
                    add(
                        "deleted_gold",
                        FindingItem(
                            case_id=case.case_id, gold_id=gold_id, note=f"document {chunk.doc_id} deleted"
                        ),
                    )
            elif chunk.status != "published":
                add(
                    "unpublished_gold",
                    FindingItem(case_id=case.case_id, gold_id=gold_id, note=f"status {chunk.status}"),
                )
            elif gold_id not in indexed:
                add("not_indexed", FindingItem(case_id=case.case_id, gold_id=gold_id))
    _duplicates(cases, add)
    for stored in cases:
        if not stored.case.has_gold:
            add("no_gold", FindingItem(case_id=stored.case.case_id))
    report.findings = [findings[kind] for kind in _KINDS if kind in findings]
    report.findings.extend(empty_document_findings(empty_documents(workspace.engine, kb), kb))
    report.findings.extend(refusal_findings(workspace.settings.rerank))
    if refusal_cost:
        report.findings.extend(refusal_cost_findings(workspace, dataset))
    return report


def empty_document_findings(doc_ids: list[str], kb: str) -> list[Finding]:
    """A warning naming the live documents of `kb` with no chunk (`doc_ids`); [] when there are none."""
    if not doc_ids:
        return []
    count = len(doc_ids)
    return [
        Finding(
            kind="empty_documents",
            severity="warning",
            summary=(
                f"{count:,} live document{'' if count == 1 else 's'} of KB {kb} "
                f"{'has' if count == 1 else 'have'} no chunk: `kb stats` counts them, nothing in them "
                "can be retrieved (most often left by an import that moved their chunks to other "
                "documents, e.g. a re-import with --map doc_id=… after one without)"
            ),
            fix=(
                "mark them deleted: `ragtriage kb remove` followed by their ids (listed below, all of them "
                "in `ragtriage doctor --json`); imports since this version remove such documents themselves"
            ),
            ids=doc_ids,
        )
    ]


def _duplicates(cases: list[eval_store.StoredCase], add: Any) -> None:
    by_query: dict[str, list[eval_store.StoredCase]] = defaultdict(list)
    for stored in cases:
        by_query[stored.normalized_query or eval_store.normalized_query(stored.case.query)].append(stored)
    for group in by_query.values():
        if len(group) < 2:
            continue
        by_gold: dict[str, list[str]] = defaultdict(list)
        for stored in group:
            by_gold[eval_store.gold_key(stored.case.gold)].append(stored.case.case_id)
        for same in by_gold.values():
            for duplicate in same[1:]:
                add(
                    "duplicate_case",
                    FindingItem(
                        case_id=duplicate, note=f"same query and gold as {same[0]}", proposal=same[0]
                    ),
                )
        if len(by_gold) > 1:
            ids = [s.case.case_id for s in group]
            for case_id in ids:
                add(
                    "conflicting_gold",
                    FindingItem(
                        case_id=case_id, note=f"same query as {', '.join(i for i in ids if i != case_id)}"
                    ),
                )


def _ref_note(ref: Any) -> str:
    if ref.chunk_id:
        return f"taken from chunk {ref.chunk_id}"
    return (
        "no live chunk of the document overlaps it"
        if ref.start is not None
        else "no live chunk has the anchor"
    )


def _indexed_chunk_ids(workspace: Workspace) -> set[str]:
    """Chunk ids in the index manifest; none when the indexes were never built (`--no-index`)."""
    manifest = read_manifest(locations.manifest_path(workspace.home))
    return set(manifest.content_hashes) if manifest is not None else set()


CALIBRATE = "run `ragtriage eval run`, then `ragtriage eval calibrate-refusal --write`"


def refusal_findings(rerank: RerankSettings) -> list[Finding]:
    """Warnings (no case items) about `refusal_threshold` and the score it judges; [] when sound."""
    threshold, calibrated_for, kind = (
        rerank.refusal_threshold,
        rerank.refusal_threshold_score,
        rerank.refusal_kind(),
    )
    if threshold is None or not rerank.enabled or calibrated_for == kind:
        return []
    if calibrated_for is None:
        return [
            Finding(
                kind="refusal_threshold_score_unknown",
                severity="warning",
                summary=(
                    f"[rerank] refusal_threshold {threshold:g} does not say which score it was calibrated "
                    f"for; it is applied to the {kind} score as it is"
                ),
                fix=(
                    f'add refusal_threshold_score = "{kind}" to [rerank] if it was calibrated for that score, '
                    f"else {CALIBRATE} (it records the kind)"
                ),
            )
        ]
    return [
        Finding(
            kind="refusal_threshold_scale",
            severity="warning",
            summary=(
                f"[rerank] refusal_threshold {threshold:g} was calibrated for {calibrated_for}, but this "
                f"configuration refuses by {kind}: refusal judges no request (the traces say "
                "`refusal not judged`)"
            ),
            fix=f'{CALIBRATE} (it writes the threshold and its kind), or set refusal_threshold = "off"',
        )
    ]


def refusal_cost_findings(workspace: Workspace, dataset: str) -> list[Finding]:
    """A warning when refusal judges without a cross-encoder, with what it cost in the latest run of
    `dataset` (shares of answerable cases refused and no-answer cases kept; module docstring) and
    each such case; [] when refusal is off, a cross-encoder scores, there is no run that refused by
    another kind, or that run made no wrong decision."""
    rerank = workspace.settings.rerank
    kind = rerank.refusal_kind()
    if rerank.refusal_threshold is None or not rerank.enabled or kind == "cross_encoder":
        return []
    runs = eval_store.list_runs(workspace.engine, dataset)
    if not runs or runs[0].id is None:
        return []
    run, run_id = runs[0], runs[0].id
    snapshots = [
        (row.case_id, row.has_gold, row.snapshot)
        for row in eval_store.run_case_results(workspace.engine, run_id)
        if "error" not in row.snapshot and row.snapshot.get("candidates")
    ]
    if any(snapshot.get("refusal_score_kind") == "cross_encoder" for _, _, snapshot in snapshots):
        return []  # that run had a cross-encoder: it says nothing of refusal without one
    answerable = [(case_id, bool(s.get("refused"))) for case_id, gold, s in snapshots if gold]
    no_answer = [(case_id, bool(s.get("refused"))) for case_id, gold, s in snapshots if not gold]
    refused = [case_id for case_id, flag in answerable if flag]
    kept = [case_id for case_id, flag in no_answer if not flag]
    if not refused and not kept:
        return []

    def share(part: list[str], whole: list[tuple[str, bool]]) -> str:
        return f"{len(part):,} of {len(whole):,} ({len(part) / len(whole):.1%})" if whole else "0 of 0"

    name = f"run {run.id}" + (f" ({run.name})" if run.name else "")
    return [
        Finding(
            kind="refusal_without_cross_encoder",
            severity="warning",
            summary=(
                f"refusal judges by {kind}, not a cross-encoder: in {name} it refused "
                f"{share(refused, answerable)} answerable cases and kept {share(kept, no_answer)} "
                "no-answer cases (each case's stored refusal decision against whether it has gold; cases that "
                "retrieved nothing left out)"
            ),
            fix=(
                'add a cross-encoder: [rerank] model = "/models/bge-reranker-v2-m3" (a local folder; or '
                '[rerank] backend = "http" with url), then run `ragtriage eval run` and '
                "`ragtriage eval calibrate-refusal --write`"
            ),
            items=[FindingItem(case_id=case_id, note="answerable, refused") for case_id in refused]
            + [FindingItem(case_id=case_id, note="no answer, kept") for case_id in kept],
        )
    ]


#: kind → (summary, fix, severity), in report order.
_KINDS: dict[str, tuple[str, str, str]] = {
    "doc_id_as_chunk": (
        "gold ids are document ids but the case is evaluated at chunk granularity: every metric is 0",
        "re-import the file with `--granularity doc` (or `cases-jsonl` positive_doc_ids), "
        "or replace the ids with chunk ids from `ragtriage kb chunks --doc DOC_ID`",
        "error",
    ),
    "chunk_id_as_doc": (
        "gold ids are chunk ids but the case is evaluated at document granularity",
        "re-import with `--granularity chunk`, or use the proposed document ids",
        "error",
    ),
    "unknown_gold": (
        "gold ids that are neither chunk ids nor document ids of this KB",
        "check the ids against `ragtriage kb chunks`; the eval set may belong to another KB "
        "or an older chunking",
        "error",
    ),
    "other_kb": (
        "gold chunks belong to another KB than the configured one",
        "set [kb] name to that KB, or re-label the cases against this KB",
        "error",
    ),
    "unpublished_gold": (
        "gold chunks are not published, so no index returns them",
        "publish their documents (front matter `status: published`) and re-run `ragtriage kb add`",
        "error",
    ),
    "deleted_gold": (
        "gold chunks (or documents) were deleted from the KB, with nothing replacing them",
        "when the document is live, pick its current chunk that answers the query "
        "(`ragtriage kb chunks --doc DOC_ID`, `ragtriage kb show CHUNK_ID`) and replace the gold id; "
        "otherwise restore the document, or turn the cases into refusal cases / remove them",
        "error",
    ),
    "rechunked_gold": (
        "gold chunks disappeared when their document was re-chunked",
        "replace each gold id with the proposed chunk (largest content overlap) after checking it, "
        "then re-import",
        "error",
    ),
    "unmapped_gold": (
        "gold refs (doc_id with anchor or span) that map to no live chunk of the KB",
        "check the document still has that section (`ragtriage kb chunks --doc DOC_ID`); fix the anchor or "
        "span in the eval file and re-import, or turn the case into a refusal case",
        "error",
    ),
    "not_indexed": (
        "gold chunks are in the KB but not in the indexes",
        "run `ragtriage kb reindex` (the indexes are behind the KB)",
        "error",
    ),
    "duplicate_case": (
        "cases with the same normalized query and the same gold count twice",
        "delete the duplicates (the proposal is the case to keep)",
        "warning",
    ),
    "conflicting_gold": (
        "one normalized query has different gold in different cases",
        "merge the gold into one case, or make the queries differ",
        "warning",
    ),
    "no_gold": (
        "cases without gold are left out of the ranking metrics and scored for refusal only",
        "add gold chunk ids if the KB does answer them; keep them if the right answer is a refusal",
        "warning",
    ),
}
