"""Hand-computed metric values and every metric fault of known_faults.md (items 1–6)."""

from __future__ import annotations

from math import log2

import pytest

from ragtriage.eval.aggregate import aggregate_by_bucket, mean_metrics, overall
from ragtriage.eval.metrics import (
    RankShift,
    candidate_coverage,
    dedupe_ranking,
    hit_at_k,
    ndcg_at_k,
    precision_at_k,
    rank_shift,
    recall_at_k,
    reciprocal_rank,
    refusal_accuracy,
)
from ragtriage.eval.scoring import score_case, score_rankings
from ragtriage.eval.specs import MetricSpec, parse_metrics

RANKED, QRELS = ["d3", "d1", "d9", "d2"], {"d1": 2, "d2": 1}


@pytest.mark.parametrize(
    ("compute", "expected"),
    [
        (lambda: precision_at_k(RANKED, QRELS, 2), 0.5),
        (lambda: precision_at_k(RANKED, QRELS, 4), 0.5),
        (lambda: recall_at_k(RANKED, QRELS, 2), 0.5),
        (lambda: hit_at_k(RANKED, QRELS, 1), 0.0),
        (lambda: hit_at_k(RANKED, QRELS, 2), 1.0),
        (lambda: reciprocal_rank(RANKED, QRELS), 0.5),
        (lambda: reciprocal_rank(RANKED, QRELS, k=1), 0.0),
        (lambda: ndcg_at_k(RANKED, QRELS, 4), (2 / log2(3) + 1 / log2(5)) / (2 + 1 / log2(3))),
        (lambda: ndcg_at_k(RANKED, QRELS, 2), (2 / log2(3)) / (2 + 1 / log2(3))),
    ],
)
def test_metric_matches_hand_computation(compute, expected):
    assert compute() == pytest.approx(expected)


SPECS = parse_metrics(["p@3,recall@3,hit@3,mrr,ndcg@3"])


def both_paths(ranked, qrels, specs=SPECS):
    """Score one case through the per-metric functions and through the batch path; they must agree."""
    batch = score_case(ranked, qrels, specs)
    single = {
        "p@3": precision_at_k(ranked, qrels, 3),
        "recall@3": recall_at_k(ranked, qrels, 3),
        "hit@3": hit_at_k(ranked, qrels, 3),
        "mrr": reciprocal_rank(ranked, qrels),
        "ndcg@3": ndcg_at_k(ranked, qrels, 3),
    }
    for label in batch:
        if label in single:
            assert batch[label] == pytest.approx(single[label]), label
    return batch


def test_fault1_duplicates_are_dropped_by_first_occurrence():
    values = both_paths(["c3", "c1", "c1", "c2"], {"c1", "c2"})
    assert values == pytest.approx(
        {"p@3": 2 / 3, "recall@3": 1.0, "hit@3": 1.0, "mrr": 0.5, "ndcg@3": 0.6934}, abs=5e-5
    )
    assert dedupe_ranking(["c3", "c1", "c1", "c2"]) == (["c3", "c1", "c2"], 1)


def test_fault1_duplicates_are_counted_for_the_warning():
    scores = score_rankings({"q": ["c3", "c1", "c1", "c2", "c3"]}, {"q": {"c1": 1}}, SPECS)
    assert scores.duplicates == {"q": 2}


@pytest.mark.parametrize("k", [1, 2, 10])
def test_fault1_repeated_gold_never_lifts_ndcg_above_one(k):
    assert ndcg_at_k(["s1", "s1"], {"s1"}, k) == 1.0
    assert score_case(["s1", "s1"], {"s1": 1}, [MetricSpec("ndcg", k)])[f"ndcg@{k}"] == 1.0


def test_fault2_k_larger_than_the_list_divides_by_k():
    specs = parse_metrics(["p@5", "recall@5", "hit@5", "mrr", "ndcg@5"])
    values = score_case(["c1", "c2"], {"c1": 1, "c2": 1, "c3": 1}, specs)
    assert values == pytest.approx(
        {"p@5": 0.4, "recall@5": 2 / 3, "hit@5": 1.0, "mrr": 1.0, "ndcg@5": 0.7654}, abs=5e-5
    )
    assert precision_at_k(["c1", "c2"], {"c1", "c2", "c3"}, 5) == 0.4
    assert ndcg_at_k(["c1", "c2"], {"c1", "c2", "c3"}, 5) == pytest.approx(0.76536, abs=1e-5)


def test_fault2_empty_list_scores_zero_and_counts_in_the_mean():
    values = both_paths([], {"c1"})
    assert values == {"p@3": 0.0, "recall@3": 0.0, "hit@3": 0.0, "mrr": 0.0, "ndcg@3": 0.0}
    scores = score_rankings({"a": ["c1"], "b": []}, {"a": {"c1": 1}, "b": {"c1": 1}}, SPECS)
    assert scores.means()["mrr"] == 0.5


def test_fault3_ndcg_cuts_run_and_ideal_at_k():
    qrels = {f"c{i}": 1 for i in range(1, 6)}
    assert ndcg_at_k(["c1", "c2"], qrels, 2) == 1.0
    assert score_case(["c1", "c2"], qrels, [MetricSpec("ndcg", 2)]) == {"ndcg@2": 1.0}
    # The uncut value the fault warns about, for contrast.
    assert ndcg_at_k(["c1", "c2"], qrels, 5) == pytest.approx(0.5531, abs=5e-5)


def test_fault4_a_query_that_returned_nothing_is_a_failure():
    qrels = {"q1": {"x1": 1}, "q2": {"x2": 1, "x3": 1, "x4": 1}, "q3": {"x5": 1}, "q4": {"x6": 1}}
    runs = {"q1": ["x1"], "q2": ["x4"], "q3": [], "q4": ["x6"]}
    assert score_rankings(runs, qrels, [MetricSpec("mrr")]).means()["mrr"] == 0.75
    del runs["q3"]  # no row at all (a TREC run without lines for q3)
    scores = score_rankings(runs, qrels, [MetricSpec("mrr")])
    assert scores.means()["mrr"] == 0.75
    assert scores.missing_rankings == ["q3"]
    assert mean_metrics(scores.per_query().values())["mrr"] == 0.75


def test_fault5_graded_labels_use_linear_gain():
    qrels = {"c1": 3, "c2": 1}
    assert ndcg_at_k(["c2", "c1"], qrels, 2) == pytest.approx(0.7967, abs=5e-5)
    assert score_case(["c2", "c1"], qrels, [MetricSpec("ndcg", 10)])["ndcg@10"] == pytest.approx(
        0.79671, abs=1e-5
    )


def test_fault5_negative_grade_is_judged_non_relevant():
    qrels = {"c1": -2, "c2": 1, "c3": 0}
    values = both_paths(["c1", "c3", "c2"], qrels)
    assert values == pytest.approx({"p@3": 1 / 3, "recall@3": 1.0, "hit@3": 1.0, "mrr": 1 / 3, "ndcg@3": 0.5})


def test_fault5_no_positive_grade_is_left_out_and_counted():
    scores = score_rankings({"q": ["c1"], "r": ["c1"]}, {"q": {"c1": 0}, "r": {"c1": 1}}, SPECS)
    assert scores.qids == ["r"]
    assert scores.no_relevant == ["q"]


def test_fault6_the_given_order_is_evaluated_never_resorted():
    # trec_eval would put "a" first among tied scores (doc-id order); the pipeline's order is b, a.
    assert reciprocal_rank(["b", "a"], {"a"}) == 0.5
    assert score_case(["b", "a"], {"a": 1}, [MetricSpec("mrr"), MetricSpec("p", 1)]) == {
        "mrr": 0.5,
        "p@1": 0.0,
    }


def test_run_only_queries_are_skipped_and_counted():
    scores = score_rankings({"q": ["c1"], "extra": ["c1"]}, {"q": {"c1": 1}}, SPECS)
    assert scores.skipped_no_qrels == ["extra"]
    assert scores.qids == ["q"]


def test_mrr_at_k_ignores_hits_below_the_cutoff():
    assert score_case(["a", "b", "c"], {"c": 1}, parse_metrics(["mrr@2", "mrr@3"])) == {
        "mrr@2": 0.0,
        "mrr@3": 1 / 3,
    }


def test_bad_cutoff_is_a_value_error():
    with pytest.raises(ValueError, match="positive integer"):
        precision_at_k(["a"], {"a"}, 0)


def test_candidate_coverage_looks_at_the_first_n_candidates_before_rerank():
    fused = ["c9", "c8", "c1"]
    assert candidate_coverage(fused, {"c1"}, 3) == 1.0
    assert candidate_coverage(fused, {"c1"}, 2) == 0.0
    values = score_case(["c9"], {"c1": 1}, parse_metrics(["hit@1", "coverage@30"]), candidates=fused)
    assert values == {"hit@1": 0.0, "coverage@30": 1.0}
    with pytest.raises(ValueError, match="candidate list"):
        score_case(["c9"], {"c1": 1}, parse_metrics(["coverage@30"]))


def test_rank_shift_reports_before_after_and_drops():
    shifts = rank_shift(["a", "g1", "b", "g2"], ["g2", "a"], {"g1": 1, "g2": 2, "x": 0})
    assert shifts == [RankShift("g1", 2, None), RankShift("g2", 4, 1)]
    assert shifts[0].dropped and shifts[0].shift is None
    assert shifts[1].shift == 3 and not shifts[1].dropped


def test_refusal_accuracy_counts_only_refusals():
    assert refusal_accuracy([True, False, True, True]) == 0.75
    assert refusal_accuracy([]) is None


def test_overall_and_bucket_means():
    per_case = {"a": {"mrr": 1.0}, "b": {"mrr": 0.0}, "c": {"mrr": 0.5}}
    buckets = {"a": ["tag:x", "hard"], "b": ["tag:x"], "c": ["hard", "hard"], "zz": ["tag:x"]}
    assert overall(per_case).model_dump() == {"cases": 3, "means": {"mrr": 0.5}}
    by_bucket = aggregate_by_bucket(per_case, buckets)
    assert list(by_bucket) == ["hard", "tag:x"]
    assert by_bucket["hard"].cases == 2 and by_bucket["hard"].means == {"mrr": 0.75}
    assert by_bucket["tag:x"].cases == 2 and by_bucket["tag:x"].means == {"mrr": 0.5}
    assert mean_metrics([], ["mrr"]) == {"mrr": 0.0}
