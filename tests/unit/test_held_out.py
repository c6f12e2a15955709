"""The shared held-out helper: folds (stratified, seeded), cross-validating a choice by hand, the
warning when the held-out gain shrinks or is noise, and the split-half check of a comparison."""

from __future__ import annotations

import numpy as np
import pytest

from ragtriage.eval.held_out import cross_validate_choice, fold_indices, held_out_figures, split_half


def test_folds_cover_every_case_once_and_stratify() -> None:
    strata = ["answerable"] * 8 + ["no answer"] * 4
    parts = fold_indices(12, 4, seed=3, strata=strata)
    assert sorted(i for part in parts for i in part) == list(range(12))
    # Each fold holds one of the four no-answer cases and two answerable ones.
    assert [sum(strata[i] == "no answer" for i in part) for part in parts] == [1, 1, 1, 1]
    assert parts == fold_indices(12, 4, seed=3, strata=strata)  # seeded
    with pytest.raises(ValueError, match="2 to 3 folds, got 4"):
        fold_indices(3, 4)


def test_a_choice_that_memorises_wins_in_sample_and_loses_held_out() -> None:
    # Option j scores 1 on case j only: the in-sample best is any option (ties to the first),
    # and out of fold the option picked on the other cases never scores on the held case.
    n = 6
    table = np.eye(n)
    baseline = np.full(n, 0.5)

    def choose(train: list[int]) -> int:
        return int(np.argmax(table[:, train].sum(axis=1) + 1e-9 * np.arange(n)[::-1]))

    oof, parts = cross_validate_choice(n, choose, lambda j, held: table[j, held], folds=3, seed=0)
    in_sample = table[choose(list(range(n)))]
    held = held_out_figures("mrr", baseline, in_sample, oof, parts)
    assert held.in_sample_gain == pytest.approx(1 / 6 - 0.5)
    assert held.held_out_gain <= held.in_sample_gain and len(held.fold_gains) == 3
    assert not held.significant and held.warning is not None
    assert held.warning.endswith("no gain on held-out cases; keep the current setting")
    assert held_out_figures("mrr", baseline, baseline, baseline, parts).warning is None  # no change
    # A real in-sample gain that vanishes out of fold: the warning and the refusal name the figures.
    gainful = held_out_figures("mrr", np.zeros(n), np.ones(n), np.array([1, 0, 0, 0, 0, 0.0]), parts)
    assert gainful.warning is not None and "under half the in-sample gain" in gainful.warning
    refusal = gainful.refusal("the threshold")
    assert refusal.startswith(
        "nothing written: the held-out gain of the threshold is +0.1667 mrr (3-fold, p ="
    )
    assert refusal.endswith("add --force to write it anyway")


def test_a_gain_that_holds_out_of_fold_is_significant_and_quiet() -> None:
    n = 20
    held = held_out_figures("mrr", np.zeros(n), np.ones(n), np.ones(n), fold_indices(n, 5))
    assert held.significant and held.warning is None and held.spread == 0.0


def test_split_half_flags_a_delta_whose_sign_flips_between_halves() -> None:
    a = np.zeros(8)
    b = np.array([1.0, 0, 0, 0, 0, 0, 0, 0])
    result = split_half("mrr", a, b, seed=0)
    assert result is not None and not result.agree and result.warning is not None
    assert "halves of the cases disagree" in result.warning or "not significant" in result.warning
    steady = split_half("mrr", np.zeros(20), np.ones(20))
    assert steady is not None and steady.agree and steady.warning is None
    assert split_half("mrr", [0.0], [1.0]) is None
