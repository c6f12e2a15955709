"""Fit the rerank stage's feature weights on an eval set: coordinate ascent on MRR@K.

The rerank score is linear, score = Σ_f w_f · x_f (`pipeline.rerank`), so over a fixed candidate
pool the ranking is a function of the weights alone. Coordinate ascent (Metzler & Croft 2007,
"Linear feature-based models for information retrieval", RankLib's `CoordinateAscent`) changes one
weight at a time, tries steps of growing size in both directions, keeps the step that raises mean
MRR@K most, and repeats over the features until no step helps; a few restarts from perturbed
weights guard against a poor local optimum, and the best of them is kept. Weights the fit does not
move keep their value exactly (no rescaling), so a score threshold such as `min_score` keeps its
meaning as far as the moved weights allow.

With a hundred queries a fit easily learns the eval set instead of the task, so `cross_validate`
estimates what it is worth on unseen queries: k folds (`eval.held_out`), each fitted on the others
and scored on itself (out-of-fold RR@K per case), against the starting weights on the same cases;
`FitReport.held_out` holds the gains, their spread over folds, the paired test and the warning.

Metrics follow the runner's: the reranked list is cut at `top_n` (the final context), RR@K =
1/rank of the first relevant chunk within the first min(K, top_n), 0 otherwise; Hit@H likewise.
Cases whose pool holds no relevant chunk score 0 whatever the weights and stay in the mean.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragtriage.config.sources import set_settings_values
from ragtriage.errors import InputError
from ragtriage.eval.gold_map import resolve_cases
from ragtriage.eval.held_out import HeldOut, cross_validate_choice, held_out_figures
from ragtriage.pipeline.types import Trace
from ragtriage.store import eval_repo as eval_store
from ragtriage.wording import quoted

if TYPE_CHECKING:
    from ragtriage.workspace import Workspace

__all__ = [
    "CrossValidation",
    "FitCase",
    "FitReport",
    "collect_fit_cases",
    "coordinate_ascent",
    "cross_validate",
    "fit_case",
    "fit_weights",
    "rank_metrics",
    "write_weights",
]

#: Step sizes tried per coordinate, as shares of the weights' L1 norm (RankLib-like doubling).
STEP_SHARES = tuple(0.0001 * 2**i for i in range(12))
CROSS_ENCODER = "cross_encoder"


@dataclass(frozen=True)
class FitCase:
    """One query's rerank input: a feature row per candidate (fused order) and which are relevant."""

    case_id: str
    features: np.ndarray
    """Shape (candidates, features), in the order of `FitReport.names`."""
    relevant: np.ndarray
    """Shape (candidates,), bool."""


@dataclass
class FitReport:
    """Starting and fitted weights with their MRR@K and Hit@H on the fit set and out of fold."""

    names: list[str]
    """Every feature, in the order of the weight vectors."""
    current: dict[str, float]
    fitted: dict[str, float]
    fitted_names: list[str]
    """The features whose weights the fit moved (the others keep their starting weight)."""
    constant: list[str]
    """Features with one value across each query's candidates: they cannot change a ranking."""
    cases: int
    pool_without_gold: int
    """Cases whose rerank input holds no relevant chunk (they score 0 with any weights)."""
    k: int
    hit_k: int
    top_n: int
    mrr_current: float
    mrr_fitted: float
    hit_current: float
    hit_fitted: float
    folds: int
    cv_mrr_current: float | None = None
    cv_mrr_fitted: float | None = None
    cv_hit_current: float | None = None
    cv_hit_fitted: float | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    """Cases left out, by reason (no gold, no rerank input)."""
    held_out: HeldOut | None = None
    """MRR@K gain of the fit in sample and out of fold, its spread, paired test and warning."""

    @property
    def generalises(self) -> bool | None:
        """True when the fitted weights beat the current ones out of fold (None: no cross-validation)."""
        if self.cv_mrr_fitted is None or self.cv_mrr_current is None:
            return None
        return self.cv_mrr_fitted > self.cv_mrr_current + 1e-9


@dataclass(frozen=True)
class CrossValidation:
    """Per-case out-of-fold figures: RR@k and Hit@hit_k (1.0 / 0.0) of the starting weights and of
    the weights fitted without each case's fold, in case order, and the folds (case indices)."""

    rr_current: np.ndarray
    rr_fitted: np.ndarray
    hit_current: np.ndarray
    hit_fitted: np.ndarray
    parts: list[list[int]]


def fit_case(
    case_id: str, trace: Trace, relevant_ids: set[str], names: Sequence[str], *, by_doc: bool
) -> FitCase:
    """The `FitCase` of one trace: its rerank pairs' features (the cross-encoder probability as
    `cross_encoder`, 0 when absent) and relevance by chunk id, or by doc id when `by_doc`."""
    doc_of = {c.chunk_id: c.doc_id for c in trace.candidates}
    rows = []
    relevant = []
    for pair in trace.rerank_pairs:
        values = dict(pair.features)
        values[CROSS_ENCODER] = pair.cross_encoder_score or 0.0
        rows.append([float(values.get(name, 0.0)) for name in names])
        key = (doc_of.get(pair.chunk_id) or pair.chunk_id) if by_doc else pair.chunk_id
        relevant.append(key in relevant_ids)
    matrix = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(names))
    return FitCase(case_id, matrix, np.asarray(relevant, dtype=bool))


class _Stacked:
    """All cases padded into one (cases, candidates, features) block, for fast scoring."""

    def __init__(self, cases: Sequence[FitCase], n_features: int) -> None:
        depth = max((len(c.relevant) for c in cases), default=0)
        self.features = np.zeros((len(cases), depth, n_features))
        self.relevant = np.zeros((len(cases), depth), dtype=bool)
        self.padding = np.ones((len(cases), depth), dtype=bool)
        for i, case in enumerate(cases):
            n = len(case.relevant)
            self.features[i, :n] = case.features
            self.relevant[i, :n] = case.relevant
            self.padding[i, :n] = False

    def metrics(self, weights: np.ndarray, k: int, hit_k: int, top_n: int) -> tuple[float, float]:
        if not len(self.features):
            return 0.0, 0.0
        rr, hit = self.per_case(weights, k, hit_k, top_n)
        return float(rr.mean()), float(hit.mean())

    def per_case(self, weights: np.ndarray, k: int, hit_k: int, top_n: int) -> tuple[np.ndarray, np.ndarray]:
        """Per-case RR@k and Hit@hit_k (as 1.0 / 0.0), shape (cases,) each."""
        if not len(self.features):
            return np.zeros(0), np.zeros(0)
        scores = self.features @ weights
        scores[self.padding] = -np.inf
        # Stable sort on the negated score: equal scores keep the fused order, as the reranker does.
        order = np.argsort(-scores, axis=1, kind="stable")
        ranked = np.take_along_axis(self.relevant, order, axis=1)[:, :top_n]
        first = np.where(ranked.any(axis=1), ranked.argmax(axis=1) + 1, 0)
        found = first > 0
        rr = np.where(found & (first <= k), 1.0 / np.maximum(first, 1), 0.0)
        hit = found & (first <= hit_k)
        return rr, hit.astype(np.float64)


def rank_metrics(
    cases: Sequence[FitCase],
    weights: Sequence[float] | np.ndarray,
    *,
    k: int = 10,
    hit_k: int = 5,
    top_n: int = 10,
) -> tuple[float, float]:
    """(mean RR@k, mean Hit@hit_k) of the cases reranked by `weights`, the list cut at `top_n`."""
    width = len(weights)
    return _Stacked(cases, width).metrics(np.asarray(weights, dtype=np.float64), k, hit_k, top_n)


def coordinate_ascent(
    cases: Sequence[FitCase],
    start: Sequence[float] | np.ndarray,
    fitted: Sequence[int],
    *,
    k: int = 10,
    hit_k: int = 5,
    top_n: int = 10,
    restarts: int = 3,
    max_rounds: int = 25,
    seed: int = 0,
) -> np.ndarray:
    """Weights maximising mean RR@k (ties: Hit@hit_k) over `cases`, moving only the indices `fitted`.

    Restart 0 starts at `start`; each further restart from `start` with every fitted weight scaled
    by a random factor in [0.5, 1.5] plus a small random offset (steps and offsets are shares of
    the L1 norm of `start`). Returns the best weights found; the indices not in `fitted` keep
    their starting weight.
    """
    stacked = _Stacked(cases, len(start))
    origin = np.asarray(start, dtype=np.float64)
    scale = float(np.abs(origin).sum()) or 1.0
    steps = [share * scale for share in STEP_SHARES]
    rng = random.Random(seed)

    def objective(weights: np.ndarray) -> tuple[float, float]:
        return stacked.metrics(weights, k, hit_k, top_n)

    best_weights, best = origin.copy(), objective(origin)
    for restart in range(max(1, restarts)):
        weights = origin.copy()
        if restart:
            for j in fitted:
                weights[j] = weights[j] * rng.uniform(0.5, 1.5) + rng.uniform(-0.01, 0.01) * scale
        current = objective(weights)
        for _ in range(max_rounds):
            improved = False
            order = list(fitted)
            rng.shuffle(order)
            for j in order:
                base = weights[j]
                chosen, chosen_value = current, base
                for step in steps:
                    for sign in (1.0, -1.0):
                        weights[j] = base + sign * step
                        value = objective(weights)
                        if value > chosen:
                            chosen, chosen_value = value, weights[j]
                weights[j] = chosen_value
                if chosen > current:
                    current, improved = chosen, True
            if not improved:
                break
        if current > best:
            best, best_weights = current, weights.copy()
    return best_weights


def cross_validate(
    cases: Sequence[FitCase],
    start: Sequence[float] | np.ndarray,
    fitted: Sequence[int],
    *,
    folds: int = 5,
    seed: int = 0,
    k: int = 10,
    hit_k: int = 5,
    top_n: int = 10,
    restarts: int = 3,
) -> CrossValidation:
    """Per-case RR@k and Hit@hit_k of `start` and, out of fold, of the weights fitted on the other
    folds (`eval.held_out.cross_validate_choice`: seeded shuffle, `folds` folds).

    Raises ValueError for fewer than 2 folds or more folds than cases.
    """
    options = {"k": k, "hit_k": hit_k, "top_n": top_n}
    origin = np.asarray(start, dtype=np.float64)

    def choose(train: list[int]) -> np.ndarray:
        chosen = [cases[i] for i in train]
        return coordinate_ascent(chosen, origin, fitted, restarts=restarts, seed=seed, **options)

    hits = np.zeros(len(cases))

    def score(weights: np.ndarray, held: list[int]) -> np.ndarray:
        rr, hit = _Stacked([cases[i] for i in held], len(origin)).per_case(weights, k, hit_k, top_n)
        hits[held] = hit
        return rr

    rr_fitted, parts = cross_validate_choice(len(cases), choose, score, folds=folds, seed=seed)
    rr_current, hit_current = _Stacked(cases, len(origin)).per_case(origin, k, hit_k, top_n)
    return CrossValidation(rr_current, rr_fitted, hit_current, hits, parts)


def fit_weights(
    cases: Sequence[FitCase],
    names: Sequence[str],
    current: dict[str, float],
    *,
    only: Sequence[str] | None = None,
    k: int = 10,
    hit_k: int = 5,
    top_n: int = 10,
    folds: int = 5,
    restarts: int = 3,
    seed: int = 0,
    skipped: dict[str, int] | None = None,
) -> FitReport:
    """Fit the weights of `only` (default: every feature that varies within some query's pool).

    Raises ValueError when `only` names a feature not in `names`, or when there are no cases.
    """
    if not cases:
        raise ValueError("no case with gold and a rerank input to fit on")
    unknown = [name for name in only or () if name not in names]
    if unknown:
        raise ValueError(f"unknown feature {quoted(unknown[0])}; features: {', '.join(names)}")
    start = np.array([current.get(name, 0.0) for name in names], dtype=np.float64)
    varies = [
        any(len(c.relevant) > 1 and np.ptp(c.features[:, j]) > 1e-6 for c in cases) for j in range(len(names))
    ]
    constant = [name for name, moves in zip(names, varies, strict=True) if not moves]
    wanted = set(only) if only else set(names)
    fitted = [j for j, name in enumerate(names) if name in wanted and varies[j]]
    options = {"k": k, "hit_k": hit_k, "top_n": top_n}
    weights = coordinate_ascent(cases, start, fitted, restarts=restarts, seed=seed, **options)
    mrr_current, hit_current = rank_metrics(cases, start, **options)
    mrr_fitted, hit_fitted = rank_metrics(cases, weights, **options)
    report = FitReport(
        names=list(names),
        current={name: float(v) for name, v in zip(names, start, strict=True)},
        fitted={name: float(v) for name, v in zip(names, weights, strict=True)},
        fitted_names=[names[j] for j in fitted],
        constant=constant,
        cases=len(cases),
        pool_without_gold=sum(1 for c in cases if not c.relevant.any()),
        k=k,
        hit_k=hit_k,
        top_n=top_n,
        mrr_current=mrr_current,
        mrr_fitted=mrr_fitted,
        hit_current=hit_current,
        hit_fitted=hit_fitted,
        folds=folds,
        skipped=dict(skipped or {}),
    )
    if folds >= 2 and fitted and len(cases) >= 2:
        cv = cross_validate(
            cases, start, fitted, folds=min(folds, len(cases)), seed=seed, restarts=restarts, **options
        )
        report.cv_mrr_current, report.cv_hit_current = (
            float(cv.rr_current.mean()),
            float(cv.hit_current.mean()),
        )
        report.cv_mrr_fitted, report.cv_hit_fitted = float(cv.rr_fitted.mean()), float(cv.hit_fitted.mean())
        in_sample, _ = _Stacked(cases, len(names)).per_case(weights, k, hit_k, top_n)
        report.held_out = held_out_figures(f"MRR@{k}", cv.rr_current, in_sample, cv.rr_fitted, cv.parts)
    return report


def write_weights(path: Path, weights: Mapping[str, float]) -> None:
    """Set `[rerank.weights] NAME = value` for each of `weights` in the settings file at `path`,
    keeping its comments and layout (created when missing).

    Raises:
        ConfigError: the file is not valid TOML, or `rerank` / `rerank.weights` is not a table.
    """
    values = {name: round(float(value), 6) for name, value in weights.items()}
    set_settings_values(path, ("rerank", "weights"), values)


def collect_fit_cases(
    workspace: Workspace,
    dataset: str,
    names: Sequence[str],
    *,
    tags: Sequence[str] = (),
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[list[FitCase], dict[str, int]]:
    """Replay the cases of `dataset` that carry every tag of `tags` with the workspace's pipeline
    and return their `FitCase`s, plus the count of cases left out per reason.

    Gold refs are mapped onto the current KB first. Raises InputError when the rerank stage is off
    (there are no features to weigh) or no case of the dataset carries the tags.
    """
    if not workspace.settings.rerank.enabled:
        raise InputError("[rerank] enabled = false: there is no rerank stage whose weights to fit; enable it")
    stored = eval_store.dataset_cases(workspace.engine, dataset)
    cases = [s.case for s in stored if all(tag in s.case.tags for tag in tags)]
    if not cases:
        wanted = f" tagged {', '.join(tags)}" if tags else ""
        raise InputError(
            f"eval set {quoted(dataset)} has no case{wanted} ({len(stored)} cases in all); "
            "check --dataset and --tag"
        )
    cases = [m.case for m in resolve_cases(workspace.engine, cases)]
    skipped = {"no gold": sum(1 for c in cases if not c.has_gold)}
    answerable = [c for c in cases if c.has_gold]
    traces = workspace.pipeline.run_many([c.query for c in answerable], on_progress=on_progress)
    fit_cases = []
    for case, trace in zip(answerable, traces, strict=True):
        fit_cases.append(
            fit_case(
                case.case_id, trace, set(case.relevant_ids), names, by_doc=case.gold_granularity == "doc"
            )
        )
    return fit_cases, {reason: count for reason, count in skipped.items() if count}
