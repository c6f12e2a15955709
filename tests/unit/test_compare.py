"""Run comparison: deltas on paired cases, per bucket, win/tie/loss, p-value, regressed cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtriage.eval.compare import compare_runs
from tests.unit.eval_run_helpers import engine_with_cases, store_run

A = {
    "c1": {"mrr": 1.0, "recall@5": 1.0},
    "c2": {"mrr": 0.5, "recall@5": 1.0},
    "c3": {"mrr": 0.0, "recall@5": 0.0},
    "c4": {"mrr": 1.0, "recall@5": 1.0},
}
B = {
    "c1": {"mrr": 0.5, "recall@5": 1.0},
    "c2": {"mrr": 1.0, "recall@5": 1.0},
    "c3": {"mrr": 0.0, "recall@5": 0.0},
    "c4": {"mrr": 0.25, "recall@5": 1.0},
}


@pytest.fixture
def runs(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = engine_with_cases(tmp_path, ["c1", "c2", "c3", "c4"], confirmed=("c1",))
    return engine, store_run(engine, A, name="base"), store_run(engine, B, name="new")


def test_overall_deltas_are_means_over_paired_cases(runs) -> None:  # type: ignore[no-untyped-def]
    engine, run_a, run_b = runs
    comparison = compare_runs(engine, run_a, run_b)
    mrr = comparison.delta_of("mrr")
    assert mrr is not None
    assert (mrr.a, mrr.b) == pytest.approx((2.5 / 4, 1.75 / 4))
    assert mrr.delta == pytest.approx(-0.75 / 4)
    assert comparison.delta_of("recall@5").delta == pytest.approx(0.0)  # type: ignore[union-attr]
    assert comparison.paired_cases == 4


def test_win_tie_loss_and_exact_p_value(runs) -> None:  # type: ignore[no-untyped-def]
    engine, run_a, run_b = runs
    comparison = compare_runs(engine, run_a, run_b)
    test = next(t for t in comparison.tests if t.metric == "mrr")
    assert (test.outcome.wins, test.outcome.ties, test.outcome.losses) == (1, 1, 2)
    # Non-zero deltas -0.5, +0.5, -0.75: of the 8 sign assignments only ±(0.5 + 0.5 − 0.75) = ±0.25
    # fall below the observed |sum| 0.75, so p = 6/8.
    assert test.test.exact and test.test.p_value == pytest.approx(6 / 8)
    assert test.test.n == 4


def test_regressed_cases_confirmed_first_then_by_drop(runs) -> None:  # type: ignore[no-untyped-def]
    engine, run_a, run_b = runs
    regressed = compare_runs(engine, run_a, run_b).regressed
    assert [(r.case_id, r.confirmed, r.request_id) for r in regressed] == [
        ("c1", True, "req-c1"),
        ("c4", False, None),
    ]
    assert regressed[1].delta == pytest.approx(-0.75)


def test_bucket_deltas(runs) -> None:  # type: ignore[no-untyped-def]
    engine, run_a, run_b = runs
    comparison = compare_runs(engine, run_a, run_b)
    assert comparison.bucket_cases["tag:t"] == 4
    by_metric = {d.metric: d.delta for d in comparison.buckets["case:4"]}
    assert by_metric["mrr"] == pytest.approx(-0.75)


def test_only_common_cases_are_paired_and_a_warning_names_incomplete_runs(tmp_path: Path) -> None:
    engine = engine_with_cases(tmp_path, ["c1", "c2", "c3", "c4"])
    run_a = store_run(engine, A, name="a")
    run_b = store_run(engine, {k: v for k, v in B.items() if k != "c4"}, name="b", complete=False)
    comparison = compare_runs(engine, run_a, run_b)
    assert comparison.paired_cases == 3 and comparison.only_in_a == ["c4"]
    assert any("incomplete" in w for w in comparison.warnings)


def test_unknown_primary_metric_is_an_error(runs) -> None:  # type: ignore[no-untyped-def]
    engine, run_a, run_b = runs
    with pytest.raises(ValueError, match="ndcg@3"):
        compare_runs(engine, run_a, run_b, primary_metric="ndcg@3")


def test_split_half_of_the_primary_metric_uses_its_paired_test(runs) -> None:  # type: ignore[no-untyped-def]
    engine, run_a, run_b = runs
    comparison = compare_runs(engine, run_a, run_b)
    halves = comparison.split_half
    assert halves is not None and halves.metric == "mrr"
    # Deltas per case: c1 −0.5, c2 +0.5, c3 0, c4 −0.75; two halves of two cases average to −0.1875.
    assert (halves.first + halves.second) / 2 == pytest.approx(-0.75 / 4)
    assert halves.test == comparison.tests[0].test
    assert halves.warning is not None and halves.warning.startswith("warning: mrr delta -0.1875")
