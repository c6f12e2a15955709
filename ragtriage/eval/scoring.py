"""Score many rankings at once: the batch path behind `eval score` and the eval runner.

The metrics are the ones in `ragtriage.eval.metrics` (same conventions, same values; the tests check
both against pytrec_eval). The batch path finds each relevant id's rank once per query with one
C-level dict build, then computes every metric at every cutoff with numpy over the found ranks, so
there is no per-metric re-scan of the ranking. `build_score_report` turns the batch into what
`eval score` prints: per-query metrics, means and data-quality warnings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, Field

from ragtriage.eval.metrics import Qrels, candidate_coverage, grades_of
from ragtriage.eval.specs import MetricSpec

__all__ = [
    "BatchScores",
    "ScoreReport",
    "build_score_report",
    "quality_warnings",
    "score_case",
    "score_rankings",
]


@dataclass
class BatchScores:
    """Per-query metric values as columns (one numpy array per metric, aligned with `qids`)."""

    qids: list[str]
    columns: dict[str, np.ndarray]
    duplicates: dict[str, int] = field(default_factory=dict)
    """Query id → repeated ids dropped from its ranking (first occurrence kept)."""
    missing_rankings: list[str] = field(default_factory=list)
    """Queries with relevant ids but no ranking at all: they score 0 and count in the mean."""
    no_relevant: list[str] = field(default_factory=list)
    """Queries in the qrels without any grade > 0: excluded from ranking metrics, counted."""
    skipped_no_qrels: list[str] = field(default_factory=list)
    """Queries ranked but absent from the qrels: skipped, counted."""

    def per_query(self) -> dict[str, dict[str, float]]:
        """`{query id: {metric: value}}` as plain floats."""
        names = list(self.columns)
        lists = [self.columns[name].tolist() for name in names]
        rows = zip(*lists, strict=True)
        return {
            qid: dict(zip(names, values, strict=True)) for qid, values in zip(self.qids, rows, strict=True)
        }

    def means(self) -> dict[str, float]:
        """The mean of every metric over the scored queries (0.0 for none)."""
        return {name: float(values.mean()) if len(values) else 0.0 for name, values in self.columns.items()}


def _ranking_specs(specs: Sequence[MetricSpec]) -> list[MetricSpec]:
    for spec in specs:
        if spec.needs_candidates:
            raise ValueError(
                f"{spec} needs the candidate list before rerank; "
                "score it per case with score_case(candidates=...)"
            )
    return list(specs)


def _discounts(length: int) -> np.ndarray:
    """1 / log2(rank + 1) for rank 0..length (index 0 unused so that index = rank)."""
    ranks = np.arange(length + 1, dtype=np.float64)
    discounts = np.zeros(length + 1)
    discounts[1:] = 1.0 / np.log2(ranks[1:] + 1.0)
    return discounts


def score_rankings(
    rankings: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Qrels],
    specs: Sequence[MetricSpec],
) -> BatchScores:
    """Score every query of `qrels` that has a relevant id against its ranking in `rankings`.

    Rankings are used in the order given (no re-sorting) after first-occurrence de-duplication.
    A query without a ranking scores 0 on everything and still counts (trec_eval's `-c` behaviour).
    """
    specs = _ranking_specs(specs)
    qids: list[str] = []
    duplicates: dict[str, int] = {}
    missing: list[str] = []
    no_relevant: list[str] = []
    # Flat arrays over (query, relevant id): ranks found (1-based, 0 = not retrieved) and grades.
    gold_query: list[int] = []
    gold_grade: list[float] = []
    gold_rank: list[int] = []
    max_rank = 1
    for qid, judged in qrels.items():
        grades = judged if isinstance(judged, Mapping) else grades_of(judged)
        positive = [(doc_id, grade) for doc_id, grade in grades.items() if grade > 0]
        if not positive:
            no_relevant.append(qid)
            continue
        query_index = len(qids)
        qids.append(qid)
        ranked = rankings.get(qid)
        if ranked is None:
            missing.append(qid)
            ranked = ()
        size = len(ranked)
        if size > max_rank:
            max_rank = size
        # dict(zip(...)) keeps the *last* index of a repeated id; rebuild on the de-duplicated list then.
        position = dict(zip(ranked, range(1, size + 1), strict=True))
        if len(position) != size:
            unique = list(dict.fromkeys(ranked))
            duplicates[qid] = size - len(unique)
            position = dict(zip(unique, range(1, len(unique) + 1), strict=True))
        get = position.get
        for doc_id, grade in positive:
            gold_query.append(query_index)
            gold_grade.append(grade)
            gold_rank.append(get(doc_id, 0))
    skipped = [qid for qid in rankings if qid not in qrels]
    columns = _columns(specs, len(qids), gold_query, gold_grade, gold_rank, max_rank)
    return BatchScores(qids, columns, duplicates, missing, no_relevant, skipped)


def _columns(
    specs: Sequence[MetricSpec],
    n_queries: int,
    gold_query: list[int],
    gold_grade: list[float],
    gold_rank: list[int],
    max_rank: int,
) -> dict[str, np.ndarray]:
    query = np.asarray(gold_query, dtype=np.int64)
    grade = np.asarray(gold_grade, dtype=np.float64)
    rank = np.asarray(gold_rank, dtype=np.int64)
    found = rank > 0
    found_query, found_rank, found_grade = query[found], rank[found], grade[found]
    n_relevant = np.bincount(query, minlength=n_queries).astype(np.float64)
    max_k = max([spec.k or 0 for spec in specs] + [max_rank, 1])
    discounts = _discounts(max_k)
    found_gain = found_grade * discounts[found_rank]
    ideal_position = _ideal_positions(query, grade)
    columns: dict[str, np.ndarray] = {}
    hits_cache: dict[int, np.ndarray] = {}

    def hits_at(k: int) -> np.ndarray:
        if k not in hits_cache:
            hits_cache[k] = np.bincount(found_query[found_rank <= k], minlength=n_queries).astype(np.float64)
        return hits_cache[k]

    for spec in specs:
        k = spec.k
        if spec.name == "p" and k is not None:
            columns[spec.label] = hits_at(k) / k
        elif spec.name == "recall" and k is not None:
            columns[spec.label] = hits_at(k) / np.maximum(n_relevant, 1.0)
        elif spec.name == "hit" and k is not None:
            columns[spec.label] = (hits_at(k) > 0).astype(np.float64)
        elif spec.name == "mrr":
            first = np.full(n_queries, np.iinfo(np.int64).max, dtype=np.int64)
            within = found_rank <= k if k is not None else np.ones(len(found_rank), dtype=bool)
            np.minimum.at(first, found_query[within], found_rank[within])
            reciprocal = np.zeros(n_queries)
            seen = first != np.iinfo(np.int64).max
            reciprocal[seen] = 1.0 / first[seen]
            columns[spec.label] = reciprocal
        elif spec.name == "ndcg" and k is not None:
            in_cut = found_rank <= k
            dcg = np.bincount(found_query[in_cut], weights=found_gain[in_cut], minlength=n_queries)
            ideal_order, positions = ideal_position
            in_ideal = positions <= k
            ideal = np.bincount(
                query[ideal_order][in_ideal],
                weights=grade[ideal_order][in_ideal] * discounts[positions[in_ideal]],
                minlength=n_queries,
            )
            columns[spec.label] = np.divide(dcg, ideal, out=np.zeros(n_queries), where=ideal > 0)
        else:
            raise ValueError(f"cannot score {spec} on a ranking")
    return columns


def _ideal_positions(query: np.ndarray, grade: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order relevant ids by (query, grade descending) and give each its 1-based rank in the ideal list."""
    order = np.lexsort((-grade, query))
    sorted_query = query[order]
    positions = np.arange(1, len(order) + 1, dtype=np.int64)
    if len(order):
        starts = np.r_[0, np.flatnonzero(np.diff(sorted_query)) + 1]
        lengths = np.diff(np.r_[starts, len(order)])
        positions -= np.repeat(starts, lengths)
    return order, positions


def score_case(
    ranked: Sequence[str],
    qrels: Qrels,
    specs: Sequence[MetricSpec],
    *,
    candidates: Sequence[str] | None = None,
) -> dict[str, float]:
    """Every metric in `specs` for one case; coverage@N reads `candidates` (the list before rerank).

    A case without any relevant id scores 0 everywhere; callers leave such cases out of the ranking
    means and score refusal accuracy instead (see `EvalCase.has_gold`).

    Raises:
        ValueError: coverage is asked for but no candidate list is given.
    """
    ranking_specs = [spec for spec in specs if not spec.needs_candidates]
    scores = score_rankings({"case": ranked}, {"case": grades_of(qrels)}, ranking_specs)
    values = (
        {label: float(column[0]) for label, column in scores.columns.items()}
        if scores.qids
        else {spec.label: 0.0 for spec in ranking_specs}
    )
    for spec in specs:
        if spec.needs_candidates:
            if candidates is None:
                raise ValueError(f"{spec} needs the candidate list before rerank (candidates=...)")
            values[spec.label] = candidate_coverage(candidates, qrels, spec.k or 1)
    return {spec.label: values[spec.label] for spec in specs}


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
