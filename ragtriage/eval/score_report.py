"""`ScoreReport`: per-query metrics, means and data-quality warnings for rankings scored against qrels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from ragtriage.eval.metrics import Qrels
from ragtriage.eval.scoring import BatchScores, score_rankings
from ragtriage.eval.specs import MetricSpec

__all__ = ["ScoreReport", "build_score_report", "quality_warnings"]

#: How many query ids a warning lists before it says "…".
SHOWN_IDS = 5


class ScoreReport(BaseModel):
    """What `ragtriage eval score --json` prints."""

    per_query: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Query id → metric name (`p@5`, `recall@10`, `hit@5`, `mrr`, `ndcg@10`) → value."""
    mean: dict[str, float] = Field(default_factory=dict)
    queries: int = 0
    """Queries in the means (every judged query with a relevant id, ranked or not)."""
    skipped_no_qrels: int = 0
    """Ranked queries without qrels: skipped."""
    missing_from_run: int = 0
    """Judged queries the run has no line for: they score 0 and count in the means."""
    no_relevant: int = 0
    """Judged queries without any grade > 0: left out of the ranking metrics."""
    duplicates: int = 0
    """Repeated ids dropped from rankings (first occurrence kept), over all queries."""
    warnings: list[str] = Field(default_factory=list)


def _ids(qids: Sequence[str]) -> str:
    shown = ", ".join(qids[:SHOWN_IDS])
    return shown + (", …" if len(qids) > SHOWN_IDS else "")


def quality_warnings(
    scores: BatchScores, rankings: Mapping[str, Sequence[str]], *, found_any: bool
) -> list[str]:
    """One line per data-quality problem, each with a count, the first query ids and what it means."""
    warnings: list[str] = []
    if scores.duplicates:
        dup_ids = list(scores.duplicates)
        warnings.append(
            f"{len(dup_ids)} rankings repeat ids ({sum(scores.duplicates.values())} repeats dropped, first "
            f"occurrence kept): {_ids(dup_ids)}"
        )
    if scores.missing_rankings:
        warnings.append(
            f"{len(scores.missing_rankings)} judged queries are missing from the run; they score 0 "
            f"and count in the means: {_ids(scores.missing_rankings)}"
        )
    if scores.no_relevant:
        warnings.append(
            f"{len(scores.no_relevant)} queries in the qrels have no relevant id (grade > 0) "
            f"and are left out of the ranking metrics: {_ids(scores.no_relevant)}"
        )
    if scores.skipped_no_qrels:
        warnings.append(
            f"{len(scores.skipped_no_qrels)} queries in the run have no qrels and were skipped: "
            f"{_ids(scores.skipped_no_qrels)}"
        )
    ranked_any = any(rankings.get(qid) for qid in scores.qids)
    if scores.qids and ranked_any and not found_any:
        warnings.append(
            "no ranked id matches any relevant id: do the run and the qrels use the same ids "
            "(chunk ids vs document ids)?"
        )
    return warnings


def build_score_report(
    rankings: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Qrels],
    specs: Sequence[MetricSpec],
    *,
    warnings: Sequence[str] = (),
) -> ScoreReport:
    """Score `rankings` against `qrels` (batch path) and collect the counts and warnings."""
    scores = score_rankings(rankings, qrels, specs)
    found_any = _any_relevant_ranked(rankings, qrels, scores.qids)
    return ScoreReport(
        per_query=scores.per_query(),
        mean=scores.means(),
        queries=len(scores.qids),
        skipped_no_qrels=len(scores.skipped_no_qrels),
        missing_from_run=len(scores.missing_rankings),
        no_relevant=len(scores.no_relevant),
        duplicates=sum(scores.duplicates.values()),
        warnings=[*warnings, *quality_warnings(scores, rankings, found_any=found_any)],
    )


def _any_relevant_ranked(
    rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Qrels], qids: list[str]
) -> bool:
    for qid in qids:
        judged = qrels[qid]
        relevant = {d for d, g in judged.items() if g > 0} if isinstance(judged, Mapping) else set(judged)
        if relevant.intersection(rankings.get(qid, ())):
            return True
    return False
