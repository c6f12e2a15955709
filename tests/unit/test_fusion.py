"""RRF against hand-computed values (known faults 7 and 8)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragtriage.pipeline.fusion import rrf


def test_ranks_start_at_one_and_missing_lists_add_nothing() -> None:
    fused = rrf({"dense": ["d7", "d2", "d9"], "sparse": ["d4", "d5", "d9"]}, k=60)
    assert [c.chunk_id for c in fused] == ["d9", "d7", "d4", "d2", "d5"]
    assert [c.rank for c in fused] == [1, 2, 3, 4, 5]
    scores = {c.chunk_id: c.score for c in fused}
    assert scores["d9"] == pytest.approx(2 / 63) == pytest.approx(0.031746, abs=1e-6)
    assert scores["d7"] == scores["d4"] == pytest.approx(1 / 61)
    assert scores["d2"] == scores["d5"] == pytest.approx(1 / 62)


def test_result_does_not_depend_on_list_order() -> None:
    lists = {"bm25": ["a", "b", "c"], "dense": ["c", "a", "x"], "sub": ["b", "c", "a"]}
    expected = rrf(lists)
    for order in itertools.permutations(lists):
        assert rrf({name: lists[name] for name in order}) == expected


def test_unnamed_lists_tie_break_by_best_rank_then_chunk_id() -> None:
    fused = rrf([["d7", "d2", "d9"], ["d4", "d5", "d9"]])
    assert [c.chunk_id for c in fused] == ["d9", "d4", "d7", "d2", "d5"]
    assert rrf([["d4", "d5", "d9"], ["d7", "d2", "d9"]]) == fused


def test_duplicate_in_one_list_counts_once_at_first_occurrence() -> None:
    fused = rrf({"a": ["c1", "c2", "c1"], "b": ["c2"]})
    scores = {c.chunk_id: c.score for c in fused}
    assert scores["c1"] == pytest.approx(1 / 61)
    assert scores["c2"] == pytest.approx(1 / 62 + 1 / 61)
    assert [c.chunk_id for c in fused] == ["c2", "c1"]


def test_top_n_k_and_empty_inputs() -> None:
    assert [c.chunk_id for c in rrf({"a": ["x", "y", "z"]}, k=1, top_n=2)] == ["x", "y"]
    assert rrf({"a": ["x"]}, k=1)[0].score == pytest.approx(0.5)
    assert rrf({}) == [] and rrf({"a": []}) == []
    with pytest.raises(ValueError, match="k must be positive"):
        rrf({"a": ["x"]}, k=0)


@given(st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=6), min_size=1, max_size=4))
def test_permutation_invariance_property(lists: list[list[str]]) -> None:
    named = {f"r{i}": ranked for i, ranked in enumerate(lists)}
    reversed_named = dict(reversed(list(named.items())))
    assert rrf(named) == rrf(reversed_named)
    assert rrf(lists) == rrf(list(reversed(lists)))
    fused = rrf(named)
    assert [c.score for c in fused] == sorted((c.score for c in fused), reverse=True)
