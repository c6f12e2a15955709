"""The joint sweep of lexical support's threshold and dense gap (`eval.refusal_calibration`): by hand, against
a brute-force grid, and on snapshots from before the parts were recorded."""

from __future__ import annotations

import random

import pytest

from ragtriage.eval.refusal_calibration import (
    SupportParts,
    calibrate_results,
    calibrate_with_gap,
    gap_candidates,
    lexical_score,
    support_parts,
)

CASES = [
    (True, SupportParts(0.9, False, 0.05)),
    (True, SupportParts(0.1, False, 0.04)),  # an alias gap: low share, but the dense hit stands out
    (True, SupportParts(0.6, False, None)),  # no dense route of ten hits: the share is set aside
    (False, SupportParts(0.0, False, 0.01)),
    (False, SupportParts(0.3, False, 0.02)),
    (False, SupportParts(0.5, True, 0.05)),  # vetoed by an out-of-vocabulary name
    (False, SupportParts(None, False, None)),  # n/a: never refused
]


def test_score_at_a_gap() -> None:
    assert [lexical_score(parts, 0.03) for _, parts in CASES] == [1.0, 1.0, 1.0, 0.0, 0.3, 0.0, None]
    assert [lexical_score(parts, None) for _, parts in CASES] == [0.9, 0.1, 0.6, 0.0, 0.3, 0.0, None]


def test_sweep_by_hand() -> None:
    # Gaps a gap can change (share < 1, no veto): 0.01 0.02 0.04 0.05 → below, midpoints, above, off.
    assert gap_candidates(CASES) == [0.0096, 0.015, 0.03, 0.045, 0.0504, None]
    report = calibrate_with_gap(1, CASES, max_wrong=0.0)
    # Only 0.02 < g ≤ 0.04 judges N2 (gap 0.02) by its share and A2 (gap 0.04) not: 3 of 4 refused.
    assert report.dense_gap_source == "swept" and report.dense_gap == 0.03
    assert report.proposed is not None and report.proposed.threshold == 0.65
    assert (report.proposed.refused_no_answer, report.proposed.refused_answerable) == (3, 0)
    best = {row.dense_gap: row.best for row in report.gap_rows}
    assert best[0.015] is not None and best[0.015].refused_no_answer == 2  # N2 stands out: kept
    assert best[0.0096] is not None and best[0.0096].refused_no_answer == 1  # the veto alone
    off = best[None]
    assert off is not None and off.refused_no_answer == 2  # off: A2's 0.1 bounds it
    # The threshold rows are the plain sweep at the proposed gap.
    assert [row.threshold for row in report.rows] == [-0.01, 0.15, 0.65, 1.01]
    assert "jointly over the dense gap" in report.objective


def test_ties_go_to_the_lower_gap_and_its_own_threshold() -> None:
    cases = [(True, SupportParts(0.8, False, 0.05)), (False, SupportParts(0.2, False, 0.01))]
    report = calibrate_with_gap(1, cases, max_wrong=0.0)
    # Every gap above 0.01 (and off) refuses the no-answer case and keeps the answerable one: the
    # lowest such gap wins, with the threshold the plain sweep proposes at it (between 0.2 and 1).
    assert report.dense_gap == 0.03 and report.proposed is not None and report.proposed.threshold == 0.6
    assert {row.dense_gap: row.best.threshold for row in report.gap_rows if row.best}[0.0504] == 0.5


@pytest.mark.parametrize("seed", range(5))
def test_no_point_of_a_fine_grid_beats_the_proposal(seed: int) -> None:
    rng = random.Random(seed)
    cases = [
        (
            rng.random() < 0.8,
            SupportParts(
                rng.choice([None, 0.0, 1.0, round(rng.random(), 3)]),
                rng.random() < 0.1,
                None if rng.random() < 0.15 else round(rng.uniform(0.0, 0.05), 4),
            ),
        )
        for _ in range(40)
    ]
    max_wrong = 0.1
    report = calibrate_with_gap(7, cases, max_wrong=max_wrong)
    no_answer = [p for g, p in cases if not g]
    answerable = [p for g, p in cases if g]

    def counts(threshold: float, gap: float | None) -> tuple[int, int]:
        refused = [
            [v for v in (lexical_score(p, gap) for p in group) if v is not None]
            for group in (no_answer, answerable)
        ]
        return sum(v < threshold for v in refused[0]), sum(v < threshold for v in refused[1])

    best = (0, 0)
    for gap in [None, *(i / 2000 for i in range(0, 121))]:
        scored = [
            [v for v in (lexical_score(p, gap) for p in group) if v is not None]
            for group in (no_answer, answerable)
        ]
        for threshold in (i / 400 - 0.05 for i in range(0, 441)):
            refused_no = sum(v < threshold for v in scored[0])
            refused_ok = sum(v < threshold for v in scored[1])
            if refused_ok / len(answerable) <= max_wrong and (refused_no, -refused_ok) > (best[0], -best[1]):
                best = (refused_no, refused_ok)
    assert report.proposed is not None
    proposed = (report.proposed.refused_no_answer, report.proposed.refused_answerable)
    assert proposed == counts(report.proposed.threshold, report.dense_gap)
    assert (proposed[0], -proposed[1]) >= (best[0], -best[1])


def test_parts_of_older_snapshots() -> None:
    recorded = {"lexical_support_parts": {"term_share": 0.4, "oov_names": ["wsl"], "dense_gap": 0.012}}
    assert support_parts(recorded) == SupportParts(0.4, True, 0.012)
    # Before the parts: the stored lexical support, and with the gap off the candidates' dense ranks.
    candidates = [
        {"routes": {"dense_raw": [rank, 0.9 - rank / 100], "dense_rewritten": [rank, 0.95 - rank / 50]}}
        for rank in range(1, 11)
    ]
    old = {
        "lexical_support": {"score": 0.4, "term_share": 0.4, "terms": [{"term": "x", "oov": False}]},
        "candidates": candidates,
    }
    # dense_rewritten's first hit (0.93) is the best: 0.93 − 0.75.
    assert support_parts(old) == SupportParts(0.4, False, 0.18)
    with_gap = {
        "lexical_support": {"score": 1.0, "term_share": 0.4, "dense_gap": 0.02, "dense_gap_threshold": 0.009}
    }
    assert support_parts(with_gap) == SupportParts(0.4, False, 0.02)
    assert support_parts({"lexical_support": {"score": None}}) == SupportParts(None, False, None)
    assert support_parts({"refusal_scores": {"lexical_support": 0.3}}) is None


def test_a_run_without_the_parts_is_swept_as_recorded_and_says_so() -> None:
    results = [
        (True, {"refusal_scores": {"lexical_support": 0.9}}),
        (False, {"refusal_scores": {"lexical_support": 0.1}}),
    ]
    report = calibrate_results(3, results, "lexical_support", configured_gap=0.009)
    assert report.dense_gap_source == "run" and not report.gap_rows and report.proposed is not None
    assert "did not record the term share and dense gap of 2 of its cases" in (report.gap_note or "")


def _recorded(has_gold: bool, share: float, gap: float) -> tuple[bool, dict[str, object]]:
    parts = {"term_share": share, "oov_names": [], "dense_gap": gap}
    return has_gold, {"refusal_scores": {"lexical_support": share}, "lexical_support_parts": parts}


def test_held_out_refits_threshold_and_gap_per_fold_and_tells_signal_from_noise() -> None:
    rng = random.Random(4)
    signal = [_recorded(True, rng.uniform(0.7, 1.0), rng.uniform(0.0, 0.02)) for _ in range(30)]
    signal += [_recorded(False, rng.uniform(0.0, 0.2), rng.uniform(0.0, 0.008)) for _ in range(10)]
    report = calibrate_results(1, signal, "lexical_support", configured_gap=0.009, folds=5)
    held = report.held_out
    assert report.dense_gap_source == "swept" and held is not None and held.folds == 5
    # The run refused nothing: every no-answer case refused out of fold is a real, significant gain.
    assert held.baseline == 0.75 and held.held_out == held.in_sample == 1.0
    assert held.significant and held.warning is None
    assert report.held_out_refusal_accuracy == 1.0 and report.held_out_wrongly_refused == 0.0
    # Labels that say nothing about the scores: the in-sample proposal does not survive its folds.
    noise = [_recorded(rng.random() < 0.7, rng.random(), rng.uniform(0.0, 0.02)) for _ in range(40)]
    report = calibrate_results(
        1, noise, "lexical_support", configured_gap=0.009, folds=5, max_wrong=0.3, refused=[False] * 40
    )
    assert report.held_out is not None and report.held_out.held_out_gain < 0
    assert not report.held_out.significant and report.held_out.warning is not None
    assert "no gain on held-out cases" in report.held_out.warning
    # No folds, no held-out figures.
    assert calibrate_results(1, noise, "lexical_support", configured_gap=0.009).held_out is None
