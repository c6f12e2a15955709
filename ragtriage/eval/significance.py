"""Paired comparison of two runs on the same cases: win/tie/loss and a randomization test."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

__all__ = ["PairedTest", "WinTieLoss", "paired_randomization_test", "win_tie_loss"]

#: Differences closer than this count as ties (float noise from averaging).
TIE_TOLERANCE = 1e-9


class WinTieLoss(BaseModel):
    """Per-case outcome counts of run B against run A (a win = B scored higher)."""

    wins: int
    ties: int
    losses: int


class PairedTest(BaseModel):
    """Result of a paired randomization test of mean(B − A) against 0."""

    n: int
    """Paired cases."""
    mean_a: float
    mean_b: float
    mean_delta: float
    """mean(B) − mean(A)."""
    p_value: float
    """Two-sided; 1.0 when the runs do not differ on any case."""
    permutations: int
    """Sign assignments drawn (or enumerated when `exact`)."""
    exact: bool
    seed: int | None
    outcome: WinTieLoss


Scores = Sequence[float] | np.ndarray
"""Per-case scores of one run, in case order."""


def _paired(a: Scores, b: Scores) -> tuple[np.ndarray, np.ndarray]:
    scores_a = np.asarray(a, dtype=np.float64)
    scores_b = np.asarray(b, dtype=np.float64)
    if scores_a.shape != scores_b.shape or scores_a.ndim != 1:
        raise ValueError(
            f"paired scores need the same cases in both runs: got {scores_a.size} and {scores_b.size}"
        )
    if not (np.isfinite(scores_a).all() and np.isfinite(scores_b).all()):
        raise ValueError("paired scores must be finite numbers (found NaN or infinity)")
    return scores_a, scores_b


def win_tie_loss(a: Scores, b: Scores, *, tolerance: float = TIE_TOLERANCE) -> WinTieLoss:
    """Count cases where B beats, ties or loses to A (|B − A| ≤ tolerance is a tie)."""
    scores_a, scores_b = _paired(a, b)
    delta = scores_b - scores_a
    wins = int((delta > tolerance).sum())
    losses = int((delta < -tolerance).sum())
    return WinTieLoss(wins=wins, ties=int(delta.size - wins - losses), losses=losses)


def paired_randomization_test(
    a: Scores,
    b: Scores,
    *,
    permutations: int = 10_000,
    seed: int | None = 0,
    exact_limit: int = 16,
) -> PairedTest:
    """Two-sided paired randomization (sign-flip permutation) test on the mean per-case difference.

    Under H0 each case's A and B labels are exchangeable, so each difference keeps or flips its sign.
    p = (1 + #{|mean of flipped deltas| ≥ |observed mean|}) / (1 + permutations) (Smucker, Allan and
    Carterette 2007, "A comparison of statistical significance tests for IR evaluation"; the +1 from
    Phipson and Smyth 2010). With at most `exact_limit` non-zero differences every sign assignment is
    enumerated and p is exact. Seeded: the same inputs and seed give the same p.
    """
    if permutations < 1:
        raise ValueError(f"permutations must be at least 1, got {permutations}")
    scores_a, scores_b = _paired(a, b)
    outcome = win_tie_loss(a, b)
    n = int(scores_a.size)
    delta = scores_b - scores_a
    delta[np.abs(delta) <= TIE_TOLERANCE] = 0.0
    observed = abs(delta.sum())
    nonzero = delta[delta != 0.0]

    def result(p_value: float, permutations: int, exact: bool) -> PairedTest:
        return PairedTest(
            p_value=p_value,
            permutations=permutations,
            exact=exact,
            n=n,
            mean_a=float(scores_a.mean()) if n else 0.0,
            mean_b=float(scores_b.mean()) if n else 0.0,
            mean_delta=float(delta.mean()) if n else 0.0,
            seed=seed,
            outcome=outcome,
        )

    if nonzero.size == 0:
        return result(1.0, 0, True)
    # Sums instead of means: same ordering, and the zero differences cannot change either.
    threshold = observed - 1e-12 * max(1.0, observed)
    if nonzero.size <= exact_limit:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=int(nonzero.size))))
        extreme = int((np.abs(signs @ nonzero) >= threshold).sum())
        return result(extreme / len(signs), len(signs), True)
    rng = np.random.default_rng(seed)
    extreme = 0
    batch = max(1, min(permutations, 4_000_000 // nonzero.size))
    done = 0
    while done < permutations:
        size = min(batch, permutations - done)
        signs = rng.integers(0, 2, size=(size, nonzero.size), dtype=np.int8) * 2 - 1
        extreme += int((np.abs(signs @ nonzero) >= threshold).sum())
        done += size
    p_value = (extreme + 1) / (permutations + 1)
    return result(min(1.0, p_value), permutations, False)
