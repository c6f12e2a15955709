"""Paired randomization test and win/tie/loss."""

from __future__ import annotations

import numpy as np
import pytest

from ragtriage.eval.significance import paired_randomization_test, win_tie_loss


def test_identical_runs_give_p_one():
    scores = [0.1, 0.5, 1.0, 0.0, 0.3] * 20
    result = paired_randomization_test(scores, list(scores), permutations=500, seed=1)
    assert result.p_value == 1.0
    assert result.mean_delta == 0.0
    assert result.outcome.model_dump() == {"wins": 0, "ties": 100, "losses": 0}


def test_clearly_better_run_gives_small_p():
    rng = np.random.default_rng(7)
    a = rng.uniform(0.0, 0.5, size=200)
    b = a + rng.uniform(0.05, 0.3, size=200)
    result = paired_randomization_test(a, b, permutations=2000, seed=3)
    assert result.p_value == pytest.approx(1 / 2001)  # no sign flip reaches the observed mean
    assert result.mean_delta > 0.05
    assert result.outcome.wins == 200 and not result.exact


def test_noise_is_not_significant():
    rng = np.random.default_rng(11)
    a = rng.uniform(size=300)
    b = a + rng.normal(0.0, 0.2, size=300)
    b -= b.mean() - a.mean()  # same mean, different cases
    assert paired_randomization_test(a, b, permutations=2000, seed=0).p_value > 0.5


def test_seeded_results_repeat():
    rng = np.random.default_rng(5)
    a, b = rng.uniform(size=60), rng.uniform(size=60)
    first = paired_randomization_test(a, b, permutations=999, seed=42)
    again = paired_randomization_test(a, b, permutations=999, seed=42)
    assert first == again
    assert first.permutations == 999 and first.seed == 42


def test_small_samples_are_enumerated_exactly():
    # Three wins of 1.0: of the 8 sign assignments only all-plus and all-minus reach |sum| = 3.
    result = paired_randomization_test([0, 0, 0], [1, 1, 1])
    assert result.exact and result.permutations == 8
    assert result.p_value == 0.25
    # Ties do not take part: one win and nine ties is as weak as one win alone.
    assert paired_randomization_test([0] * 10, [1] + [0] * 9).p_value == 1.0


def test_win_tie_loss_direction_is_b_against_a():
    outcome = win_tie_loss([0.5, 0.5, 0.5, 0.2], [0.6, 0.5, 0.1, 0.2 + 1e-12])
    assert (outcome.wins, outcome.ties, outcome.losses) == (1, 2, 1)


def test_mismatched_or_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="same cases"):
        paired_randomization_test([0.1, 0.2], [0.1])
    with pytest.raises(ValueError, match="finite"):
        win_tie_loss([float("nan")], [0.0])
    with pytest.raises(ValueError, match="permutations"):
        paired_randomization_test([0.1], [0.2], permutations=0)
