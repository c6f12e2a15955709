"""Fine-tuning data from the eval set: FlagEmbedding's reranker/embedder JSONL with hard negatives.

One line per case: `{"query": str, "pos": [text, …], "neg": [text, …]}` — the format
FlagEmbedding's `reranker` and `embedder` fine-tuning scripts read (`train_data`). Positives are the
gold chunks' text. Hard negatives are the chunks a stored run ranked above the best-ranked gold
chunk that are not gold, in the run's order, topped up from the rest of the run's candidate pool
(fused order) until `negatives` are found. A gold chunk is never a negative, nor is a chunk whose
text equals a positive's. Cases without gold (the right answer is a refusal) are skipped and
counted, as are document-granularity cases (their gold names documents, not chunk texts).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ragtriage.errors import InputError
from ragtriage.eval.cases import EvalCase
from ragtriage.eval.run_view import run_or_newest
from ragtriage.kb.service import get_chunks
from ragtriage.store import eval_repo as eval_store

__all__ = [
    "FinetuneReport",
    "export_finetune",
    "finetune_records",
    "hard_negatives",
    "run_order",
    "write_finetune_jsonl",
]

_UNRANKED = 1 << 30


class FinetuneReport(BaseModel):
    """What an export wrote and skipped; `cases` = written + every skipped count."""

    run_id: int
    cases: int = 0
    written: int = 0
    skipped_no_answer: int = 0
    """Cases without gold (refusal cases): nothing is positive."""
    skipped_doc_granularity: int = 0
    skipped_not_in_run: int = 0
    """Cases the run has no candidate snapshot for (an errored or missing case)."""
    skipped_no_text: int = 0
    """Cases none of whose gold chunks is in the KB any more (no positive text)."""
    negatives: int = 0
    """Negatives written in all."""
    short_of_negatives: int = 0
    """Written cases with fewer negatives than asked (a small candidate pool)."""
    warnings: list[str] = Field(default_factory=list)


def run_order(snapshot: Mapping[str, Any]) -> list[str]:
    """Chunk ids of a run's candidate snapshot in the run's order: final rank, then rerank rank,
    then fused rank (the candidate pool after what the run returned)."""

    def rank(pair: Any) -> int:
        return int(pair[0]) if isinstance(pair, (list, tuple)) and pair and pair[0] is not None else _UNRANKED

    candidates = list(snapshot.get("candidates") or [])
    keyed = [
        (
            c.get("final_rank") or _UNRANKED,
            rank(c.get("reranked")),
            rank(c.get("fused")),
            index,
            str(c["chunk_id"]),
        )
        for index, c in enumerate(candidates)
        if c.get("chunk_id")
    ]
    return [chunk_id for *_, chunk_id in sorted(keyed)]


def hard_negatives(order: Sequence[str], gold: set[str], count: int) -> list[str]:
    """Non-gold ids ranked above the first gold id, then the rest of the pool, at most `count`."""
    return [chunk_id for chunk_id in order if chunk_id not in gold][:count]


def finetune_records(
    cases: Iterable[EvalCase],
    snapshots: Mapping[str, Mapping[str, Any]],
    texts: Callable[[Sequence[str]], Mapping[str, str]],
    *,
    negatives: int,
    run_id: int,
) -> tuple[list[dict[str, Any]], FinetuneReport]:
    """The JSONL records of `cases` given their run snapshots (case_id → snapshot) and a chunk-text
    reader (`texts(ids)` → id → text, unknown ids absent).

    Raises:
        InputError: `negatives` below 0.
    """
    if negatives < 0:
        raise InputError(f"--negatives must be 0 or more, got {negatives}")
    report = FinetuneReport(run_id=run_id)
    records: list[dict[str, Any]] = []
    for case in cases:
        report.cases += 1
        if not case.has_gold:
            report.skipped_no_answer += 1
            continue
        if case.gold_granularity == "doc":
            report.skipped_doc_granularity += 1
            continue
        snapshot = snapshots.get(case.case_id)
        if not snapshot or "candidates" not in snapshot:
            report.skipped_not_in_run += 1
            continue
        gold = set(case.relevant_ids)
        order = run_order(snapshot)
        # Over-fetch: some candidates may have left the KB or repeat a positive's text.
        pool = hard_negatives(order, gold, len(order))
        found = texts([*case.relevant_ids, *pool])
        positives = [found[g] for g in case.relevant_ids if g in found]
        if not positives:
            report.skipped_no_text += 1
            continue
        positive_texts = set(positives)
        negative_texts: list[str] = []
        for chunk_id in pool:
            text = found.get(chunk_id)
            if text is None or text in positive_texts or text in negative_texts:
                continue
            negative_texts.append(text)
            if len(negative_texts) == negatives:
                break
        if len(negative_texts) < negatives:
            report.short_of_negatives += 1
        report.written += 1
        report.negatives += len(negative_texts)
        records.append({"query": case.query, "pos": positives, "neg": negative_texts})
    return records, report


def write_finetune_jsonl(records: Iterable[Mapping[str, Any]], path: Path) -> None:
    """One JSON object per line, UTF-8, Chinese unescaped."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def export_finetune(
    engine: Any, path: Path, *, dataset: str, run_ref: str | None, negatives: int
) -> FinetuneReport:
    """Write `path` from run `run_ref` (default: the newest complete run of `dataset`) and its
    dataset version's cases; chunk texts come from the KB in the store.

    Raises:
        NotFoundError: no such run, or `dataset` has no complete run.
        InputError: `negatives` below 0.
    """
    run = run_or_newest(engine, run_ref, dataset)
    run_id = int(run.id or 0)
    cases = [c.case for c in eval_store.dataset_cases(engine, run.dataset, run.dataset_version)]
    snapshots = {r.case_id: r.snapshot or {} for r in eval_store.run_case_results(engine, run_id)}

    def texts(chunk_ids: Sequence[str]) -> dict[str, str]:
        return {chunk_id: record.content for chunk_id, record in get_chunks(engine, chunk_ids).items()}

    records, report = finetune_records(cases, snapshots, texts, negatives=negatives, run_id=run_id)
    write_finetune_jsonl(records, path)
    return report
