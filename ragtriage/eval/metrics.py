"""Ranking metrics for one query: pure functions, no I/O, trec_eval conventions.

Every function takes the ranked ids in the order the pipeline produced them (never re-sorted) and
the qrels of one query as `{id: grade}` (or a set of ids, grade 1). A grade > 0 is relevant; zero
and negative grades are judged non-relevant. The ranking is de-duplicated by first occurrence
before it is cut at K, so a repeated id neither counts twice nor pushes nDCG above 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from ragtriage.wording import quoted

Qrels: TypeAlias = Mapping[str, int] | Mapping[str, float] | Iterable[str]
"""Judgements of one query: `{id: grade}`, or a collection of relevant ids (grade 1)."""

__all__ = [
    "Qrels",
    "RankShift",
    "candidate_coverage",
    "dcg_at_k",
    "dedupe_ranking",
    "grades_of",
    "hit_at_k",
    "ideal_dcg_at_k",
    "ndcg_at_k",
    "precision_at_k",
    "rank_shift",
    "recall_at_k",
    "reciprocal_rank",
    "refusal_accuracy",
    "relevant_ids",
]


def grades_of(qrels: Qrels) -> dict[str, float]:
    """The qrels as `{id: grade}`; a plain collection of ids means grade 1 for each."""
    if isinstance(qrels, Mapping):
        return {str(doc_id): float(grade) for doc_id, grade in qrels.items()}
    return {str(doc_id): 1.0 for doc_id in qrels}


def relevant_ids(qrels: Qrels) -> set[str]:
    """Ids judged relevant: grade > 0 (trec_eval `relevance_level` 1 on integer grades)."""
    return {doc_id for doc_id, grade in grades_of(qrels).items() if grade > 0}


def dedupe_ranking(ranked: Iterable[str]) -> tuple[list[str], int]:
    """Keep the first occurrence of every id; return the list and how many repeats were dropped."""
    ranked = list(ranked)
    unique = list(dict.fromkeys(ranked))
    return unique, len(ranked) - len(unique)


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"cutoff k must be a positive integer, got {quoted(k)}")


def _top_k(ranked: Iterable[str], k: int) -> list[str]:
    _check_k(k)
    return dedupe_ranking(ranked)[0][:k]


def precision_at_k(ranked: Iterable[str], qrels: Qrels, k: int) -> float:
    """P@K = |relevant ∩ top K| / K; divides by K even when fewer than K were retrieved (trec_eval `P_K`)."""
    relevant = relevant_ids(qrels)
    return sum(1 for doc_id in _top_k(ranked, k) if doc_id in relevant) / k


def recall_at_k(ranked: Iterable[str], qrels: Qrels, k: int) -> float:
    """R@K = |relevant ∩ top K| / |relevant|; 0 without relevant ids (trec_eval `recall_K`)."""
    relevant = relevant_ids(qrels)
    if not relevant:
        return 0.0
    return sum(1 for doc_id in _top_k(ranked, k) if doc_id in relevant) / len(relevant)


def hit_at_k(ranked: Iterable[str], qrels: Qrels, k: int) -> float:
    """Hit@K = 1 if any relevant id is in the top K, else 0 (trec_eval `success_K`)."""
    relevant = relevant_ids(qrels)
    return 1.0 if any(doc_id in relevant for doc_id in _top_k(ranked, k)) else 0.0


def reciprocal_rank(ranked: Iterable[str], qrels: Qrels, k: int | None = None) -> float:
    """RR = 1 / rank of the first relevant id (ranks from 1), 0 if none; optionally only within the top K.

    The mean over queries is MRR (Voorhees, TREC-8 QA track 1999; trec_eval `recip_rank`).
    """
    relevant = relevant_ids(qrels)
    unique = _top_k(ranked, k) if k is not None else dedupe_ranking(ranked)[0]
    for rank, doc_id in enumerate(unique, start=1):
        if doc_id in relevant:
            return 1.0 / rank
    return 0.0


def dcg_at_k(ranked: Iterable[str], qrels: Qrels, k: int) -> float:
    """DCG@K = Σ_{i=1..K} gain_i / log2(i + 1) with linear gain = grade (> 0 only).

    Järvelin and Kekäläinen 2002; the linear-gain form is trec_eval's `ndcg_cut`.
    """
    grades = grades_of(qrels)
    total = 0.0
    for rank, doc_id in enumerate(_top_k(ranked, k), start=1):
        grade = grades.get(doc_id, 0.0)
        if grade > 0:
            total += grade / math.log2(rank + 1)
    return total


def ideal_dcg_at_k(qrels: Qrels, k: int) -> float:
    """IDCG@K: the DCG of the positive grades sorted descending, cut at K (trec_eval `ndcg_cut`)."""
    _check_k(k)
    ideal = sorted((g for g in grades_of(qrels).values() if g > 0), reverse=True)[:k]
    return sum(grade / math.log2(rank + 1) for rank, grade in enumerate(ideal, start=1))


def ndcg_at_k(ranked: Iterable[str], qrels: Qrels, k: int) -> float:
    """nDCG@K = DCG@K / IDCG@K, linear gain, log2(rank + 1) discount, both cut at K; 0 without relevant ids.

    Järvelin and Kekäläinen 2002, "Cumulated gain-based evaluation of IR techniques"; trec_eval `ndcg_cut_K`.
    """
    ideal = ideal_dcg_at_k(qrels, k)
    if ideal <= 0:
        return 0.0
    return dcg_at_k(ranked, qrels, k) / ideal


def candidate_coverage(candidates: Iterable[str], qrels: Qrels, n: int) -> float:
    """Coverage@N = 1 if any relevant id is among the first N candidates before rerank, else 0.

    It asks whether the reranker was ever given the answer: Hit@N on the fused (pre-rerank) list.
    """
    return hit_at_k(candidates, qrels, n)


@dataclass(frozen=True)
class RankShift:
    """Where one gold id sat before and after rerank; ranks from 1, None when absent."""

    chunk_id: str
    rank_before: int | None
    rank_after: int | None

    @property
    def shift(self) -> int | None:
        """Places gained by rerank (positive = moved up); None unless present in both lists."""
        if self.rank_before is None or self.rank_after is None:
            return None
        return self.rank_before - self.rank_after

    @property
    def dropped(self) -> bool:
        """True when rerank was given the id but did not keep it."""
        return self.rank_before is not None and self.rank_after is None


def rank_shift(before: Iterable[str], after: Iterable[str], qrels: Qrels) -> list[RankShift]:
    """The rank of every relevant id in the list before rerank and after it, sorted by rank before."""
    rank_before = {doc_id: rank for rank, doc_id in enumerate(dedupe_ranking(before)[0], start=1)}
    rank_after = {doc_id: rank for rank, doc_id in enumerate(dedupe_ranking(after)[0], start=1)}
    shifts = [
        RankShift(doc_id, rank_before.get(doc_id), rank_after.get(doc_id)) for doc_id in relevant_ids(qrels)
    ]
    return sorted(shifts, key=lambda s: (s.rank_before is None, s.rank_before or 0, s.chunk_id))


def refusal_accuracy(refused: Sequence[bool]) -> float | None:
    """Share of cases without gold where the system refused (the right answer); None for no such case."""
    if not refused:
        return None
    return sum(1 for flag in refused if flag) / len(refused)
