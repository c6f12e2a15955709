"""Property test: every ranking metric equals trec_eval's (via pytrec_eval) on random runs and qrels."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragtriage.eval.metrics import hit_at_k, ndcg_at_k, precision_at_k, recall_at_k, reciprocal_rank
from ragtriage.eval.scoring import score_rankings
from ragtriage.eval.specs import MetricSpec

pytrec_eval = pytest.importorskip("pytrec_eval")

KS = (1, 3, 5, 10)
POOL = [f"d{i}" for i in range(15)]
SPECS = [MetricSpec(name, k) for name in ("p", "recall", "hit", "ndcg") for k in KS] + [MetricSpec("mrr")]
TREC_NAMES = {"p": "P_{k}", "recall": "recall_{k}", "hit": "success_{k}", "ndcg": "ndcg_cut_{k}"}

grades = st.dictionaries(
    st.sampled_from(POOL), st.integers(min_value=-1, max_value=3), min_size=1, max_size=8
)
# Distinct ids per ranking: trec_eval cannot hold a repeated doc, and we feed it strictly decreasing scores.
rankings = st.lists(st.sampled_from(POOL), unique=True, max_size=12)
queries = st.dictionaries(
    st.sampled_from([f"q{i}" for i in range(6)]), st.tuples(grades, rankings), min_size=1, max_size=6
)


def trec_eval_scores(
    qrels: dict[str, dict[str, int]], runs: dict[str, list[str]]
) -> dict[str, dict[str, float]]:
    measures = {f"P.{','.join(map(str, KS))}", f"recall.{','.join(map(str, KS))}"}
    measures |= {f"success.{','.join(map(str, KS))}", f"ndcg_cut.{','.join(map(str, KS))}", "recip_rank"}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
    run = {qid: {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)} for qid, ranked in runs.items()}
    return evaluator.evaluate(run)


def trec_name(spec: MetricSpec) -> str:
    return "recip_rank" if spec.name == "mrr" else TREC_NAMES[spec.name].format(k=spec.k)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries)
def test_batch_scores_equal_trec_eval(data):
    qrels = {qid: judged for qid, (judged, _) in data.items()}
    runs = {qid: ranked for qid, (_, ranked) in data.items()}
    expected = trec_eval_scores(qrels, runs)
    scores = score_rankings(runs, qrels, SPECS).per_query()
    judged = [qid for qid, grades_ in qrels.items() if any(g > 0 for g in grades_.values())]
    assert sorted(scores) == sorted(judged)
    for qid in judged:
        for spec in SPECS:
            assert scores[qid][spec.label] == pytest.approx(expected[qid][trec_name(spec)], abs=1e-12), (
                qid,
                spec,
            )


@settings(max_examples=200, deadline=None)
@given(grades, rankings, st.sampled_from(KS))
def test_single_metric_functions_equal_trec_eval(judged, ranked, k):
    if not any(g > 0 for g in judged.values()):
        return
    expected = trec_eval_scores({"q": judged}, {"q": ranked})["q"]
    assert precision_at_k(ranked, judged, k) == pytest.approx(expected[f"P_{k}"], abs=1e-12)
    assert recall_at_k(ranked, judged, k) == pytest.approx(expected[f"recall_{k}"], abs=1e-12)
    assert hit_at_k(ranked, judged, k) == pytest.approx(expected[f"success_{k}"], abs=1e-12)
    assert ndcg_at_k(ranked, judged, k) == pytest.approx(expected[f"ndcg_cut_{k}"], abs=1e-12)
    assert reciprocal_rank(ranked, judged) == pytest.approx(expected["recip_rank"], abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(grades, st.lists(st.sampled_from(POOL[:6]), max_size=12))
def test_batch_equals_single_functions_with_duplicates(judged, ranked):
    """With repeated ids trec_eval is no oracle; the two paths must still agree with each other."""
    scores = score_rankings({"q": ranked}, {"q": judged}, SPECS)
    if not scores.qids:
        return
    values = scores.per_query()["q"]
    for k in KS:
        assert values[f"p@{k}"] == pytest.approx(precision_at_k(ranked, judged, k))
        assert values[f"recall@{k}"] == pytest.approx(recall_at_k(ranked, judged, k))
        assert values[f"hit@{k}"] == hit_at_k(ranked, judged, k)
        assert values[f"ndcg@{k}"] == pytest.approx(ndcg_at_k(ranked, judged, k))
        assert 0.0 <= values[f"ndcg@{k}"] <= 1.0 + 1e-12
    assert values["mrr"] == pytest.approx(reciprocal_rank(ranked, judged))
