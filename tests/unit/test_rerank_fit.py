"""Rerank weight fitting (coordinate ascent on MRR@K): hand-computed metrics, a fit that finds the
one informative feature, a fit of pure noise that cross-validation exposes, and --write."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from ragtriage.eval.rerank_fit import (
    FitCase,
    coordinate_ascent,
    cross_validate,
    fit_weights,
    rank_metrics,
    write_weights,
)


def case(case_id: str, rows: list[list[float]], relevant: list[bool]) -> FitCase:
    return FitCase(case_id, np.asarray(rows, dtype=float), np.asarray(relevant, dtype=bool))


def test_metrics_by_hand_with_the_final_cut_and_ties_in_fused_order() -> None:
    cases = [
        case("q1", [[3.0], [2.0], [1.0]], [False, True, False]),  # rank 2: RR 0.5, hit
        case("q2", [[1.0], [1.0], [1.0]], [False, False, True]),  # a three-way tie keeps fused order: rank 3
        case("q3", [[1.0], [2.0]], [False, False]),  # no gold in the pool: 0, still in the mean
    ]
    assert rank_metrics(cases, [1.0], k=10, hit_k=5, top_n=10) == pytest.approx(((0.5 + 1 / 3) / 3, 2 / 3))
    # Cut at top_n = 2: q2's gold falls out of the final list.
    assert rank_metrics(cases, [1.0], k=10, hit_k=5, top_n=2) == pytest.approx((0.5 / 3, 1 / 3))
    # MRR@1 and Hit@1.
    assert rank_metrics(cases, [1.0], k=1, hit_k=1, top_n=10) == (0.0, 0.0)
    # Reversed weights put q1's gold second still, q2's tie unchanged, q3 nothing.
    assert rank_metrics(cases, [-1.0], k=10, hit_k=1, top_n=10)[1] == 0.0


def _signal_cases(count: int, seed: int) -> list[FitCase]:
    """Feature 0 (like RRF) puts a distractor first; feature 1 is 1 on the relevant chunk only."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        gold = rng.randrange(1, 5)
        rows = [[1.0 - 0.1 * j, 1.0 if j == gold else 0.0, 0.5] for j in range(5)]
        cases.append(case(f"q{i}", rows, [j == gold for j in range(5)]))
    return cases


def test_coordinate_ascent_finds_the_informative_feature_and_leaves_the_others() -> None:
    cases = _signal_cases(20, seed=1)
    start = [10.0, 0.0, 0.3]
    assert rank_metrics(cases, start)[0] < 0.6
    weights = coordinate_ascent(cases, start, fitted=[1], restarts=2, seed=0)
    assert rank_metrics(cases, weights) == (1.0, 1.0)
    assert weights[1] > 1.0  # must outweigh 10 × the 0.1–0.4 RRF gap
    assert weights[0] == 10.0 and weights[2] == 0.3  # not fitted: kept exactly


def test_fit_reports_constant_features_and_generalises_on_a_real_signal() -> None:
    report = fit_weights(_signal_cases(30, seed=2), ["rrf", "signal", "freshness"], {"rrf": 10.0}, folds=3)
    assert report.constant == ["freshness"] and report.fitted_names == ["rrf", "signal"]
    assert report.fitted["freshness"] == 0.0  # absent from `current`: 0, and never moved
    assert report.mrr_fitted == 1.0 and report.cv_mrr_fitted == 1.0
    assert report.cv_mrr_current is not None and report.cv_mrr_current < 0.6
    assert report.generalises is True


def test_a_fit_of_noise_raises_the_fit_set_but_cross_validation_says_keep() -> None:
    rng = random.Random(7)
    cases = []
    for i in range(40):
        gold = rng.randrange(6)
        rows = [[1.0 / (60 + j + 1), rng.random(), rng.random()] for j in range(6)]
        cases.append(case(f"q{i}", rows, [j == gold for j in range(6)]))
    report = fit_weights(cases, ["rrf", "noise_a", "noise_b"], {"rrf": 10.0}, folds=5, seed=3)
    assert report.mrr_fitted > report.mrr_current + 0.03  # it memorised the eval set
    assert report.generalises is False
    held = report.held_out
    assert held is not None and held.folds == 5 and held.cases == 40 and not held.significant
    assert held.warning is not None and held.warning.startswith("warning: held-out gain")


def test_cross_validation_needs_two_folds_and_a_case_per_fold() -> None:
    cases = _signal_cases(3, seed=0)
    with pytest.raises(ValueError, match="2 to 3 folds, got 4"):
        cross_validate(cases, [1.0, 0.0, 0.0], [1], folds=4)
    with pytest.raises(ValueError, match="unknown feature 'bm25'"):
        fit_weights(cases, ["rrf", "signal", "x"], {}, only=["bm25"])
    with pytest.raises(ValueError, match="no case"):
        fit_weights([], ["rrf"], {})
    assert fit_weights(cases, ["rrf", "signal", "x"], {}, folds=0).generalises is None


def test_write_weights_keeps_comments_and_other_tables(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "# team settings\n[rerank]\ntop_n = 5  # five\n\n[rerank.weights]\nrrf = 10.0  # scale\n",
        encoding="utf-8",
    )
    write_weights(path, {"rrf": 9.5, "bm25_score": 0.0312345678})
    text = path.read_text(encoding="utf-8")
    assert "# team settings" in text and "top_n = 5  # five" in text
    assert "rrf = 9.5" in text and "bm25_score = 0.031235" in text
    fresh = tmp_path / "new" / "config.toml"
    write_weights(fresh, {"title_hit": 0.1})
    written = fresh.read_text(encoding="utf-8")
    assert "[rerank.weights]" in written and "title_hit = 0.1" in written
    bad = tmp_path / "bad.toml"
    bad.write_text("rerank = 3\n", encoding="utf-8")
    from ragtriage.errors import ConfigError

    with pytest.raises(ConfigError, match="`rerank` is not a table"):
        write_weights(bad, {"rrf": 1.0})
