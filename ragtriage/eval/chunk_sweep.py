"""Chunk-size sweep: one throwaway KB per chunk setting, the same eval set on each, one table.

For each `target_chars` N the sweep builds a KB in a temporary home from the same source files
(same document ids, status and dates), chunked with target N, max ⌊1.5·N⌋ and overlap
min(configured overlap, ⌊N/4⌋), indexes it locally (Whoosh + Qdrant local mode, whatever engines
the settings name for production routes), and runs the eval set there with the configured pipeline.
Every throwaway home links the source home's embedding cache, so a chunk text that repeats across
settings (a short section is one chunk at every size) is embedded once.

Gold given as chunk ids cannot map across chunkings by itself. A case whose gold chunks are all
live chunks of this home's KB with a span or an anchor gets the refs `promote` would have stored
(`eval.gold_map.refs_for_chunks`: doc_id, anchor, character span) for the sweep only; the other
chunk-id cases are skipped and counted. Cases with gold refs, document-granularity cases and refusal
cases (no gold) run in every setting. The best setting is the highest MRR among the settings that
scored a ranking case (ties: Hit@K, then the smaller N); a setting without one shows no metric.

Held out (`eval.held_out`): the best size is chosen again on k − 1 folds of the ranking cases every
setting scored (the same key, from the per-case MRR and Hit@K the runs stored) and scored on the
held fold, against the baseline: the configured `kb.target_chars` when it is swept, else the first
size given. No KB is rebuilt and no case re-run per fold.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ragtriage import locations
from ragtriage.errors import InputError
from ragtriage.eval.gold_map import refs_for_chunks, resolve_cases
from ragtriage.eval.held_out import HeldOut, cross_validate_choice, held_out_figures
from ragtriage.eval.runner import run_eval
from ragtriage.index.indexer import sync_indexes
from ragtriage.kb.chunking import ChunkingParams
from ragtriage.kb.document import SUFFIX_FORMATS
from ragtriage.kb.loaders import load_document
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.kb_repo import store_document
from ragtriage.store.kb_tables import DocumentRow
from ragtriage.wording import quoted
from ragtriage.workspace import Workspace

__all__ = ["SweepRow", "SweepTable", "chunk_params_for", "run_chunk_sweep", "sweep_metrics"]


class SweepRow(BaseModel):
    """One chunk setting: its KB size, how many cases mapped, and the run's means."""

    target_chars: int
    max_chars: int
    overlap_chars: int
    documents: int
    chunks: int
    ranking_cases: int
    """Cases with gold scored in this setting."""
    unmapped_cases: int = 0
    """Ranking cases with a gold ref that maps to no chunk here (scored as misses)."""
    refusal_cases: int = 0
    metrics: dict[str, float] = Field(default_factory=dict)
    refusal_accuracy: float | None = None
    best: bool = False
    wall_s: float = 0.0


class SweepTable(BaseModel):
    """All settings on one dataset version, and what was left out."""

    dataset: str
    dataset_version: int
    metrics: list[str]
    rows: list[SweepRow] = Field(default_factory=list)
    cases: int = 0
    """Cases in the dataset version."""
    skipped_chunk_id_gold: list[str] = Field(default_factory=list)
    """Case ids whose gold is chunk ids only (no refs) that the KB gives no span or anchor for."""
    derived_refs: list[str] = Field(default_factory=list)
    """Case ids whose chunk-id gold was turned into refs from this home's KB for the sweep."""
    skipped_documents: list[str] = Field(default_factory=list)
    """Document ids with no readable source file (imported chunks, moved files): not in the throwaway KBs."""
    notes: list[str] = Field(default_factory=list)
    held_out: HeldOut | None = None
    """MRR of the best size against `baseline_chars`, in sample and out of fold (None: fewer than
    two settings or two cases scored in all)."""
    baseline_chars: int | None = None
    """The size the held-out gain is measured from: the configured target when swept, else the first."""


#: Per-case (MRR, Hit@K) of one setting's ranking cases, by case id.
CaseScores = dict[str, tuple[float, float]]


def chunk_params_for(target: int, overlap: int) -> tuple[int, int, int]:
    """(target, max, overlap) for a sweep setting: max ⌊1.5·target⌋, overlap ≤ ⌊target/4⌋."""
    if target < 20:
        raise InputError(f"--chunk-chars {target} is too small; use sizes of at least 20 characters")
    return target, target * 3 // 2, min(overlap, target // 4)


def sweep_metrics(ks: Sequence[int]) -> list[str]:
    """Hit@5 (or the smallest K), Recall@10 (or the largest K) and MRR: the columns of the table."""
    ordered = sorted(set(ks))
    hit_k = 5 if 5 in ordered else ordered[0]
    recall_k = 10 if 10 in ordered else ordered[-1]
    return [f"hit@{hit_k}", f"recall@{recall_k}", "mrr"]


def _with_derived_refs(workspace: Workspace, stored: eval_store.StoredCase) -> eval_store.StoredCase | None:
    """`stored` with a ref for each relevant gold chunk, or None when one of them has no span or anchor here."""
    relevant = [chunk_id for chunk_id, grade in stored.case.gold.items() if grade > 0]
    refs = refs_for_chunks(workspace.engine, stored.case.gold)
    if not relevant or len(refs) != len(relevant):
        return None
    return stored.model_copy(update={"case": stored.case.model_copy(update={"gold_refs": refs})})


def _source_documents(workspace: Workspace) -> tuple[list[DocumentRow], list[str]]:
    rows = eval_store.source_documents(workspace.engine, workspace.settings.kb.name)
    # An imported document's source_path is the chunk export (JSONL, CSV, a SQL URL): not a
    # document `kb add` can re-chunk.
    readable = [
        r
        for r in rows
        if r.source_path
        and (r.meta or {}).get("origin") != "import"
        and Path(r.source_path).suffix.lower() in SUFFIX_FORMATS
        and Path(r.source_path).is_file()
    ]
    skipped = sorted(r.doc_id for r in rows if r not in readable)
    return sorted(readable, key=lambda r: r.doc_id), skipped


def _throwaway(workspace: Workspace, home: Path, target: int, max_chars: int, overlap: int) -> Workspace:
    settings = workspace.settings
    copy = settings.model_copy(
        update={
            "kb": settings.kb.model_copy(
                update={"target_chars": target, "max_chars": max_chars, "overlap_chars": overlap}
            ),
            "store": settings.store.model_copy(update={"url": None}),
            "index": settings.index.model_copy(update={"qdrant_url": None}),
            "retrieval": settings.retrieval.model_copy(update={"route_engine": {}}),
        }
    )
    home.mkdir(parents=True)
    shared = locations.cache_dir(workspace.home)
    shared.mkdir(parents=True, exist_ok=True)
    locations.cache_dir(home).symlink_to(shared.resolve(), target_is_directory=True)
    return Workspace(home=home, settings=copy, config_file=workspace.config_file)


def _build_kb(
    throwaway: Workspace, documents: Sequence[DocumentRow], on_progress: Callable[[int, int], None] | None
) -> int:
    """Load, chunk and store every document under its own id; index; return the chunk count."""
    params = ChunkingParams.from_settings(throwaway.settings.kb)
    chunks = 0
    for row in documents:
        document = load_document(Path(str(row.source_path)))
        _, stored = store_document(
            throwaway.engine,
            document,
            doc_id=row.doc_id,
            kb=row.kb,
            status=row.status,  # type: ignore[arg-type]
            updated_at=row.updated_at,
            params=params,
            source_root=None,
        )
        chunks += len(stored)
    sync_indexes(throwaway.home, throwaway.settings, throwaway.engine, on_progress)
    return chunks


def run_chunk_sweep(
    workspace: Workspace,
    chunk_chars: Sequence[int],
    dataset: str = eval_store.DEFAULT_DATASET,
    *,
    workdir: Path | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    folds: int = 5,
    seed: int = 0,
) -> SweepTable:
    """Build a throwaway KB per `chunk_chars` target, evaluate `dataset` on each, tabulate, and
    cross-validate the choice of the best size over `folds` folds (0: not; module docstring).

    `workdir` keeps the throwaway homes there (for inspection); by default they go in a temporary
    folder removed at the end.

    Raises:
        NotFoundError: no such dataset.
        InputError: no sizes, a size below 20, no readable source document, or no case that can map.
    """
    sizes = list(dict.fromkeys(chunk_chars))
    if not sizes:
        raise InputError("--chunk-chars needs at least one size, e.g. --chunk-chars 400,800")
    settings_list = [chunk_params_for(n, workspace.settings.kb.overlap_chars) for n in sizes]
    version = eval_store.dataset_version(workspace.engine, dataset)
    stored = eval_store.dataset_cases(workspace.engine, dataset, version)
    metrics = sweep_metrics(workspace.settings.eval.ks)
    table = SweepTable(dataset=dataset, dataset_version=version, metrics=metrics, cases=len(stored))
    usable: list[eval_store.StoredCase] = []
    for case in stored:
        chunk_ids_only = case.case.gold_granularity == "chunk" and case.case.gold and not case.case.gold_refs
        if chunk_ids_only and case.case.has_gold:
            with_refs = _with_derived_refs(workspace, case)
            if with_refs is None:
                table.skipped_chunk_id_gold.append(case.case.case_id)
                continue
            table.derived_refs.append(case.case.case_id)
            case = with_refs
        usable.append(case)
    if not usable:
        raise InputError(
            f"no case of {quoted(dataset)} can map onto another chunking ({len(stored)} checked): the gold "
            "is chunk ids this KB has no span or anchor for; add `gold_refs` (doc_id with anchor or "
            "start/end) to the eval file and re-import"
        )
    documents, table.skipped_documents = _source_documents(workspace)
    if not documents:
        raise InputError(
            "no document of the KB has a readable source file (imported chunks cannot be re-chunked); "
            "add the documents with `ragtriage kb add` first"
        )
    if workspace.settings.retrieval.route_engine or workspace.settings.index.qdrant_url:
        table.notes.append(
            "production engines and the Qdrant server are replaced by local indexes in the sweep"
        )
    per_case: list[CaseScores] = []
    with tempfile.TemporaryDirectory(prefix="ragtriage-sweep-", dir=workdir) as scratch:
        for target, max_chars, overlap in settings_list:
            if should_stop is not None and should_stop():
                table.notes.append(f"stopped before chunk size {target}")
                break
            row, scores = _one_setting(
                workspace,
                Path(scratch),
                (target, max_chars, overlap),
                documents,
                usable,
                dataset,
                on_progress,
            )
            table.rows.append(row)
            per_case.append(scores)
    _mark_best(table)
    if folds >= 2:
        _add_held_out(table, per_case, workspace.settings.kb.target_chars, folds=folds, seed=seed)
    return table


def _add_held_out(
    table: SweepTable, per_case: Sequence[CaseScores], configured: int, *, folds: int, seed: int
) -> None:
    """Set `table.held_out`: the best size chosen on k − 1 folds, scored on the held one (module docstring)."""
    options = [(row, scores) for row, scores in zip(table.rows, per_case, strict=True) if row.ranking_cases]
    if len(options) < 2:
        return
    cases = sorted(set.intersection(*(set(scores) for _, scores in options)))
    if len(cases) < 2:
        return
    sizes = [row.target_chars for row, _ in options]
    baseline = sizes.index(configured) if configured in sizes else 0
    table.baseline_chars = sizes[baseline]
    mrr = [[scores[c][0] for c in cases] for _, scores in options]
    hit = [[scores[c][1] for c in cases] for _, scores in options]

    def choose(train: list[int]) -> int:
        # `_mark_best`'s key on the training cases: MRR, then Hit@K, then the smaller size.
        def key(j: int) -> tuple[float, float, int]:
            return (sum(mrr[j][i] for i in train), sum(hit[j][i] for i in train), -sizes[j])

        return max(range(len(options)), key=key)

    def score(j: int, held: list[int]) -> list[float]:
        return [mrr[j][i] for i in held]

    out_of_fold, parts = cross_validate_choice(
        len(cases), choose, score, folds=min(folds, len(cases)), seed=seed
    )
    best = choose(list(range(len(cases))))
    table.held_out = held_out_figures("mrr", mrr[baseline], mrr[best], out_of_fold, parts, seed=seed)


def _one_setting(
    workspace: Workspace,
    scratch: Path,
    setting: tuple[int, int, int],
    documents: Sequence[DocumentRow],
    cases: Sequence[eval_store.StoredCase],
    dataset: str,
    on_progress: Callable[[str, int, int], None] | None,
) -> tuple[SweepRow, CaseScores]:
    target, max_chars, overlap = setting

    def progress(stage: str) -> Callable[[int, int], None]:
        return lambda done, total: on_progress(f"{stage} {target}", done, total) if on_progress else None

    throwaway = _throwaway(workspace, scratch / f"chars-{target}", target, max_chars, overlap)
    try:
        chunks = _build_kb(throwaway, documents, progress("index"))
        eval_store.add_cases(
            throwaway.engine,
            dataset,
            [c.case for c in cases],
            provenances=[dict(c.provenance) for c in cases],
        )
        mappings = resolve_cases(throwaway.engine, [c.case for c in cases])
        summary = run_eval(throwaway, dataset, name=f"sweep:{target}", on_progress=progress("eval"))
        hit = sweep_metrics(throwaway.settings.eval.ks)[0]
        scores = {
            r.case_id: (float(r.metrics.get("mrr", 0.0)), float(r.metrics.get(hit, 0.0)))
            for r in eval_store.run_case_results(throwaway.engine, summary.run_id, snapshots=False)
            if r.has_gold
        }
    finally:
        throwaway.close()
    aggregates: dict[str, Any] = summary.aggregates or {}
    means = aggregates.get("means", {})
    no_gold = aggregates.get("no_gold", {})
    row = SweepRow(
        target_chars=target,
        max_chars=max_chars,
        overlap_chars=overlap,
        documents=len(documents),
        chunks=chunks,
        ranking_cases=int(aggregates.get("cases", 0)),
        unmapped_cases=sum(1 for m in mappings if m.case.gold_refs and not m.case.gold),
        refusal_cases=int(no_gold.get("cases", 0)),
        # No ranking case scored: the means are not 0, they do not exist.
        metrics={m: float(means[m]) for m in table_metrics(summary) if m in means}
        if int(aggregates.get("cases", 0))
        else {},
        refusal_accuracy=no_gold.get("refusal_accuracy"),
        wall_s=float((summary.timings or {}).get("wall_s", 0.0)),
    )
    return row, scores


def table_metrics(summary: Any) -> list[str]:
    """Every mean the run stored (the table picks its columns from them)."""
    return list((summary.aggregates or {}).get("means", {}))


def _mark_best(table: SweepTable) -> None:
    scored = [row for row in table.rows if row.ranking_cases]
    if not scored:
        return
    hit = table.metrics[0]
    best = max(
        scored,
        key=lambda r: (r.metrics.get("mrr", 0.0), r.metrics.get(hit, 0.0), -r.target_chars),
    )
    best.best = True
