"""Held-out figures for every tuning command: k-fold cross-validation of a choice, and a split-half
check of a comparison, each with the paired randomization test and one warning line.

Method (Hastie, Tibshirani and Friedman, "The Elements of Statistical Learning", 2nd ed., §7.10):
the cases are shuffled with a seed and dealt round-robin into k folds (stratified: each stratum,
e.g. answerable / no-answer, is dealt in turn, so every fold holds its share of each). For each
fold the choice (a threshold, a chunk size, rerank weights) is made on the other k − 1 folds and
applied to the held fold alone, so each case gets an out-of-fold score from a choice that never saw
it. The held-out gain is mean(out-of-fold score − baseline score) over all cases; its spread is
the standard deviation of the per-fold gains; its significance is the paired randomization test of
`significance` on the per-case out-of-fold and baseline scores (Smucker, Allan and Carterette 2007).

The in-sample gain (the choice made and scored on all cases) overstates what unseen queries get:
the warning fires when there is no held-out gain, when it is below half the in-sample one, or when
it is not significant at `ALPHA`. Commands refuse `--write` of a change whose held-out gain is
not significant unless `--force`.

Folds reuse the per-case scores the command already computed: `cross_validate_choice` calls `choose`
on case indices and `score` on a choice and case indices, never a retrieval.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import numpy as np
from pydantic import BaseModel

from ragtriage.eval.significance import PairedTest, paired_randomization_test

__all__ = [
    "ALPHA",
    "HeldOut",
    "SplitHalf",
    "cross_validate_choice",
    "fold_indices",
    "held_out_figures",
    "split_half",
]

#: Significance level of the paired test for the warning and the `--write` guard.
ALPHA = 0.05
#: The warning fires when the held-out gain is below this share of the in-sample gain.
SHRINK_WARNING = 0.5

_Choice = TypeVar("_Choice")


class HeldOut(BaseModel):
    """In-sample and k-fold held-out gain of a choice over a baseline, on one per-case metric."""

    metric: str
    """The per-case score the gains are means of (e.g. `mrr`, `correct decision`)."""
    folds: int
    cases: int
    baseline: float
    """Mean per-case score of the baseline (what is in place now)."""
    in_sample: float
    """Mean per-case score of the choice made on all cases, scored on them."""
    held_out: float
    """Mean out-of-fold score: each case scored by the choice made without its fold."""
    in_sample_gain: float
    held_out_gain: float
    fold_gains: list[float]
    """Held-out gain of each fold (mean over its cases)."""
    spread: float
    """Standard deviation of `fold_gains` (population; 0 with one fold)."""
    test: PairedTest
    """Paired randomization test of out-of-fold against baseline per-case scores."""
    significant: bool
    """The held-out gain is positive and p < `ALPHA`."""
    warning: str | None = None
    """One line when the held-out gain is none, below half the in-sample one, or not significant."""

    def refusal(self, change: str) -> str:
        """The one line `--write` prints when it refuses `change` (not significant out of fold)."""
        return (
            f"nothing written: the held-out gain of {change} is {self.held_out_gain:+.4f} {self.metric} "
            f"({self.folds}-fold, p = {self.test.p_value:.3f}, in-sample {self.in_sample_gain:+.4f}), not "
            f"significant at p < {ALPHA:g}; add --force to write it anyway"
        )


class SplitHalf(BaseModel):
    """A comparison's delta on each half of its paired cases (a seeded random split)."""

    metric: str
    first: float
    """Mean delta (B − A) on the first half."""
    second: float
    agree: bool
    """Both halves have the delta's sign (and neither is 0 unless the overall delta is)."""
    test: PairedTest
    """The paired randomization test over all cases (for the warning)."""
    warning: str | None = None


def fold_indices(
    n: int, folds: int, *, seed: int = 0, strata: Sequence[Hashable] | None = None
) -> list[list[int]]:
    """`folds` disjoint lists of case indices covering range(n): shuffled with `seed`, dealt
    round-robin, stratum by stratum when `strata` (one label per case) is given.

    Raises:
        ValueError: fewer than 2 folds, more folds than cases, or `strata` of another length.
    """
    if folds < 2 or folds > n:
        raise ValueError(f"cross-validation needs 2 to {n} folds, got {folds}")
    if strata is not None and len(strata) != n:
        raise ValueError(f"strata need one label per case: got {len(strata)} for {n} cases")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    if strata is not None:
        # Stable by first appearance of the label in the shuffled order: deterministic for a seed.
        rank = {label: i for i, label in reversed(list(enumerate(strata[j] for j in order)))}
        order.sort(key=lambda j: rank[strata[j]])
    parts: list[list[int]] = [[] for _ in range(folds)]
    for position, index in enumerate(order):
        parts[position % folds].append(index)
    return parts


def cross_validate_choice(
    n: int,
    choose: Callable[[list[int]], _Choice],
    score: Callable[[_Choice, list[int]], Sequence[float] | np.ndarray],
    *,
    folds: int,
    seed: int = 0,
    strata: Sequence[Hashable] | None = None,
) -> tuple[np.ndarray, list[list[int]]]:
    """Out-of-fold per-case scores (shape (n,)) and the folds: for each fold, `choose(training
    indices)` then `score(choice, held indices)` (one score per held index, in order).

    Raises:
        ValueError: as `fold_indices`.
    """
    parts = fold_indices(n, folds, seed=seed, strata=strata)
    out = np.zeros(n, dtype=np.float64)
    for held in parts:
        held_set = set(held)
        train = [i for i in range(n) if i not in held_set]
        out[held] = np.asarray(score(choose(train), held), dtype=np.float64)
    return out, parts


def held_out_figures(
    metric: str,
    baseline: Sequence[float] | np.ndarray,
    in_sample: Sequence[float] | np.ndarray,
    out_of_fold: Sequence[float] | np.ndarray,
    parts: Sequence[Sequence[int]],
    *,
    seed: int | None = 0,
) -> HeldOut:
    """The `HeldOut` of per-case `baseline`, `in_sample` (choice fitted on all cases) and
    `out_of_fold` scores (from `cross_validate_choice`), with the warning when it applies."""
    base = np.asarray(baseline, dtype=np.float64)
    fitted = np.asarray(in_sample, dtype=np.float64)
    oof = np.asarray(out_of_fold, dtype=np.float64)
    test = paired_randomization_test(base, oof, seed=seed)
    gains = [float((oof[list(p)] - base[list(p)]).mean()) for p in parts if len(p)]
    report = HeldOut(
        metric=metric,
        folds=len(parts),
        cases=int(base.size),
        baseline=float(base.mean()) if base.size else 0.0,
        in_sample=float(fitted.mean()) if fitted.size else 0.0,
        held_out=float(oof.mean()) if oof.size else 0.0,
        in_sample_gain=float((fitted - base).mean()) if base.size else 0.0,
        held_out_gain=float((oof - base).mean()) if base.size else 0.0,
        fold_gains=gains,
        spread=float(np.std(gains)) if gains else 0.0,
        test=test,
        significant=False,
    )
    report.significant = report.held_out_gain > 1e-9 and test.p_value < ALPHA
    report.warning = _warning(report)
    return report


def _warning(report: HeldOut) -> str | None:
    figures = (
        f"held-out gain {report.held_out_gain:+.4f} {report.metric} ± {report.spread:.4f} over "
        f"{report.folds} folds, in-sample {report.in_sample_gain:+.4f}, p = {report.test.p_value:.3f}"
    )
    if abs(report.in_sample_gain) <= 1e-9 and abs(report.held_out_gain) <= 1e-9:
        return None  # the choice changes nothing: nothing to overstate
    if report.held_out_gain <= 1e-9:
        return f"warning: {figures}: no gain on held-out cases; keep the current setting"
    if report.held_out_gain < SHRINK_WARNING * report.in_sample_gain:
        return (
            f"warning: {figures}: under half the in-sample gain, the choice fits these cases more than "
            "the task; add cases before trusting it"
        )
    if not report.significant:
        return (
            f"warning: {figures}: not significant (p ≥ {ALPHA:g}), within the noise of "
            f"{report.cases} cases; add cases before trusting it"
        )
    return None


def split_half(
    metric: str,
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    seed: int = 0,
    test: PairedTest | None = None,
) -> SplitHalf | None:
    """The delta of paired per-case scores `b − a` on two seeded random halves, and whether its sign
    holds on both; the warning when it does not, or when the paired test is not significant.
    None with fewer than 2 cases."""
    scores_a = np.asarray(a, dtype=np.float64)
    scores_b = np.asarray(b, dtype=np.float64)
    if scores_a.size < 2:
        return None
    test = test or paired_randomization_test(scores_a, scores_b, seed=seed)
    first, second = fold_indices(int(scores_a.size), 2, seed=seed)
    halves = [float((scores_b[h] - scores_a[h]).mean()) for h in (first, second)]
    overall = float((scores_b - scores_a).mean())
    sign = np.sign(round(overall, 9))
    agree = all(np.sign(round(h, 9)) == sign for h in halves)
    result = SplitHalf(metric=metric, first=halves[0], second=halves[1], agree=agree, test=test)
    figures = (
        f"{metric} delta {overall:+.4f} (halves {halves[0]:+.4f} and {halves[1]:+.4f}, "
        f"p = {test.p_value:.3f})"
    )
    if sign != 0 and not agree:
        result.warning = (
            f"warning: {figures}: the halves of the cases disagree on its sign, so it may not hold on "
            "other queries; add cases before trusting it"
        )
    elif sign != 0 and test.p_value >= ALPHA:
        result.warning = (
            f"warning: {figures}: not significant (p ≥ {ALPHA:g}), within the noise of "
            f"{scores_a.size} cases; add cases before trusting it"
        )
    return result
