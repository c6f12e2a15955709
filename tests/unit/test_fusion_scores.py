"""Score fusion (weighted, CombSUM, CombMNZ) against hand-computed values, and ranx as an oracle."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragtriage.pipeline.fusion import combmnz, combsum, normalize_scores, rrf, weighted_fusion

DENSE = [("d7", 0.9), ("d2", 0.5), ("d9", 0.1)]
BM25 = [("d4", 12.0), ("d5", 6.0), ("d9", 3.0)]
LISTS = {"dense_raw": DENSE, "bm25_raw": BM25}


def _scores(fused: list) -> dict[str, float]:
    return {c.chunk_id: c.score for c in fused}


def test_normalizations_by_hand() -> None:
    assert normalize_scores([0.9, 0.5, 0.1], "min-max") == pytest.approx([1.0, 0.5, 0.0])
    assert normalize_scores([12.0, 6.0, 3.0], "max") == pytest.approx([1.0, 0.5, 0.25])
    sigma = math.sqrt(0.32 / 3)
    assert normalize_scores([0.9, 0.5, 0.1], "z-score") == pytest.approx([0.4 / sigma, 0.0, -0.4 / sigma])
    assert normalize_scores([3.0, 1.0], "none") == [3.0, 1.0]
    # One candidate (or all equal): min-max gives each the list's best, never 0 (known fault 17).
    assert normalize_scores([0.42], "min-max") == [1.0]
    assert normalize_scores([2.0, 2.0], "z-score") == [0.0, 0.0]
    assert normalize_scores([-1.0, -2.0], "max") == [-1.0, -2.0]
    assert normalize_scores([], "min-max") == []
    with pytest.raises(ValueError, match="unknown normalization"):
        normalize_scores([1.0], "l2")  # type: ignore[arg-type]


def test_weighted_fusion_07_vector_03_keyword_min_max() -> None:
    fused = weighted_fusion(LISTS, {"dense_raw": 0.7, "bm25_raw": 0.3}, normalization="min-max")
    # dense: d7 1, d2 .5, d9 0; bm25: d4 1, d5 (6-3)/9, d9 0; a missing chunk scores 0 there.
    assert _scores(fused) == pytest.approx({"d7": 0.7, "d2": 0.35, "d4": 0.3, "d5": 0.1, "d9": 0.0})
    assert [c.chunk_id for c in fused] == ["d7", "d2", "d4", "d5", "d9"]
    assert [c.rank for c in fused] == [1, 2, 3, 4, 5]


def test_weighted_fusion_missing_scores_the_lowest_of_that_list() -> None:
    fused = weighted_fusion(LISTS, {"dense_raw": 0.7, "bm25_raw": 0.3}, normalization="none", missing="min")
    # d7 is missing from bm25, so it gets bm25's lowest score (3.0) there: .7*.9 + .3*3.
    expected = {"d7": 1.53, "d2": 1.25, "d9": 0.97, "d4": 3.67, "d5": 1.87}
    assert _scores(fused) == pytest.approx(expected)
    assert [c.chunk_id for c in fused] == ["d4", "d5", "d7", "d2", "d9"]
    zero = weighted_fusion(LISTS, {"dense_raw": 0.7, "bm25_raw": 0.3}, normalization="none")
    assert _scores(zero)["d7"] == pytest.approx(0.63)


def test_unweighted_lists_weigh_one_and_top_n_cuts() -> None:
    fused = weighted_fusion({"a": [("x", 2.0), ("y", 1.0)], "b": [("y", 4.0)]}, normalization="none", top_n=1)
    assert [(c.chunk_id, c.score) for c in fused] == [("y", 5.0)]
    with pytest.raises(ValueError, match="missing-score rule"):
        weighted_fusion(LISTS, missing="max")  # type: ignore[arg-type]


def test_combsum_and_combmnz_by_hand() -> None:
    # min-max: d7 1, d2 .5, d9 0 | d4 1, d5 1/3, d9 0. d4 and d7 tie at 1.0: both rank 1, and the
    # list name breaks the tie (bm25_raw < dense_raw), whatever order the lists come in.
    summed = combsum(LISTS)
    assert _scores(summed) == pytest.approx({"d4": 1.0, "d7": 1.0, "d2": 0.5, "d5": 1 / 3, "d9": 0.0})
    assert [c.chunk_id for c in summed] == ["d4", "d7", "d2", "d5", "d9"]
    # max norm: d9 = .1/.9 + 3/12 in two lists, so CombMNZ doubles it past d2 and d5.
    mnz = combmnz(LISTS, normalization="max")
    assert _scores(mnz)["d9"] == pytest.approx(2 * (0.1 / 0.9 + 0.25))
    assert [c.chunk_id for c in mnz] == ["d4", "d7", "d9", "d2", "d5"]
    assert _scores(combsum(LISTS, normalization="max"))["d9"] == pytest.approx(0.1 / 0.9 + 0.25)


def test_known_fault_7_rrf_and_duplicates_count_once() -> None:
    fused = rrf({"dense": ["d7", "d2", "d9"], "sparse": ["d4", "d5", "d9"]})
    assert [c.chunk_id for c in fused] == ["d9", "d7", "d4", "d2", "d5"]
    assert _scores(fused)["d9"] == pytest.approx(2 / 63)
    # A chunk listed twice in one list counts once, at its first (best) score.
    doubled = combsum({"a": [("c1", 3.0), ("c2", 2.0), ("c1", 1.0)]}, normalization="none")
    assert _scores(doubled) == {"c1": 3.0, "c2": 2.0}


@pytest.mark.parametrize(
    "fuse",
    [
        lambda lists: weighted_fusion(lists, {"dense_raw": 0.7, "bm25_raw": 0.3, "sub": 0.2}),
        lambda lists: weighted_fusion(lists, {"dense_raw": 0.7}, normalization="z-score", missing="min"),
        lambda lists: combsum(lists, normalization="max"),
        lambda lists: combmnz(lists),
    ],
)
def test_known_fault_8_result_does_not_depend_on_list_order(fuse) -> None:  # type: ignore[no-untyped-def]
    # The same chunk in several lists with different scores (d9, d2).
    lists = {**LISTS, "sub": [("d2", 0.8), ("d9", 0.7), ("d1", 0.3)]}
    expected = fuse(lists)
    for order in itertools.permutations(lists):
        assert fuse({name: lists[name] for name in order}) == expected


scored_list = st.lists(
    st.tuples(st.sampled_from("abcdefg"), st.floats(min_value=-5, max_value=5, allow_nan=False)),
    max_size=6,
)


@given(st.lists(scored_list, min_size=1, max_size=4), st.sampled_from(["none", "min-max", "max", "z-score"]))
def test_permutation_invariance_property(lists: list, normalization: str) -> None:
    named = {f"r{i}": hits for i, hits in enumerate(lists)}
    backwards = dict(reversed(list(named.items())))
    for fuse in (combsum, combmnz):
        assert fuse(named, normalization=normalization) == fuse(backwards, normalization=normalization)
    weights = {name: 0.5 + i for i, name in enumerate(named)}
    for missing in ("zero", "min"):
        assert weighted_fusion(
            named, weights, normalization=normalization, missing=missing
        ) == weighted_fusion(backwards, weights, normalization=normalization, missing=missing)


def test_weighted_fusion_normalises_each_route_its_own_way() -> None:
    # Production's 0.7 × raw cosine + 0.3 × BM25 ÷ max(BM25): the cosine as it is, BM25 over its max.
    per_route = {"dense_raw": "none", "bm25_raw": "max"}
    fused = weighted_fusion(LISTS, {"dense_raw": 0.7, "bm25_raw": 0.3}, normalization=per_route)  # type: ignore[arg-type]
    expected = {"d7": 0.63, "d2": 0.35, "d9": 0.07 + 0.075, "d4": 0.3, "d5": 0.15}
    assert _scores(fused) == pytest.approx(expected)
    assert [c.chunk_id for c in fused] == ["d7", "d2", "d4", "d5", "d9"]
    # A route the table does not name is min-max normalised (d2 then scores 0.7 × 0.5).
    only_bm25 = weighted_fusion(LISTS, {"dense_raw": 0.7, "bm25_raw": 0.3}, normalization={"bm25_raw": "max"})
    assert _scores(only_bm25)["d2"] == pytest.approx(0.35) and _scores(only_bm25)["d7"] == pytest.approx(0.7)
    assert _scores(combsum(LISTS, normalization=per_route))["d9"] == pytest.approx(0.1 + 0.25)  # type: ignore[arg-type]
