"""Metric names: canonical parsing, aliases, cutoffs and "did you mean"."""

from __future__ import annotations

import pytest

from ragtriage.eval.specs import MetricSpec, default_specs, parse_ks, parse_metric, parse_metrics


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("p@5", MetricSpec("p", 5)),
        ("P@5", MetricSpec("p", 5)),
        ("precision@5", MetricSpec("p", 5)),
        ("recall@10", MetricSpec("recall", 10)),
        ("R@10", MetricSpec("recall", 10)),
        ("hit@5", MetricSpec("hit", 5)),
        ("success@5", MetricSpec("hit", 5)),
        ("mrr", MetricSpec("mrr")),
        ("mrr@10", MetricSpec("mrr", 10)),
        ("recip_rank", MetricSpec("mrr")),
        ("ndcg@10", MetricSpec("ndcg", 10)),
        ("nDCG@10", MetricSpec("ndcg", 10)),
        ("ndcg_cut_10", MetricSpec("ndcg", 10)),
        ("P_5", MetricSpec("p", 5)),
        ("coverage@30", MetricSpec("coverage", 30)),
        (" ndcg @ 3 ", MetricSpec("ndcg", 3)),
    ],
)
def test_parse_metric(text, expected):
    assert parse_metric(text) == expected


@pytest.mark.parametrize("label", ["p@5", "recall@10", "hit@5", "mrr", "mrr@10", "ndcg@10", "coverage@30"])
def test_labels_round_trip(label):
    assert parse_metric(label).label == label
    assert str(parse_metric(label)) == label


@pytest.mark.parametrize(
    ("text", "suggestion"),
    [
        ("ndgc@10", "ndcg@10"),
        ("recal@5", "recall@5"),
        ("mmr", "mrr"),
        ("precison@3", "p@3"),
        ("coverag@30", "coverage@30"),
    ],
)
def test_unknown_metric_says_did_you_mean(text, suggestion):
    with pytest.raises(ValueError, match=f"did you mean {suggestion}\\?"):
        parse_metric(text)


def test_unknown_metric_without_a_close_match_lists_the_known_ones():
    with pytest.raises(ValueError, match="Known: p@K") as info:
        parse_metric("zzz@3")
    assert "did you mean" not in str(info.value)


@pytest.mark.parametrize("text", ["p", "ndcg", "recall@", "hit@0", "p@x", "coverage"])
def test_missing_or_bad_cutoff(text):
    with pytest.raises(ValueError, match="cutoff"):
        parse_metric(text)


def test_parse_metrics_splits_commas_keeps_order_and_drops_repeats():
    specs = parse_metrics(["ndcg@10,p@5", "P@5", "mrr"])
    assert [s.label for s in specs] == ["ndcg@10", "p@5", "mrr"]


def test_coverage_needs_candidates():
    assert parse_metric("coverage@30").needs_candidates
    assert not parse_metric("recall@30").needs_candidates


def test_parse_ks():
    assert parse_ks("1,3, 5,10,20,5") == [1, 3, 5, 10, 20]
    for bad in ("", "0", "a", "3,-1"):
        with pytest.raises(ValueError, match="--ks"):
            parse_ks(bad)


def test_default_specs():
    labels = [s.label for s in default_specs([1, 5], coverage_n=30)]
    assert labels == [
        "p@1",
        "p@5",
        "recall@1",
        "recall@5",
        "hit@1",
        "hit@5",
        "ndcg@1",
        "ndcg@5",
        "mrr",
        "coverage@30",
    ]
