"""overlap@k and extrapolated RBO (Webber, Moffat & Zobel 2010, Eq. 32) against hand computation and
against values of the reference implementation (the `rbo` package, 0.1.3, `RankingSimilarity.rbo_ext`).

The `rbo` package pins numpy < 2, which would downgrade this project's numpy, so it is not a dev
dependency: its values below were computed once with it (309 random pairs × p ∈ {0.5, 0.9, 0.98}
agreed with `rbo_ext` to 2e-16) and are kept as recorded reference values.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragtriage.replay.fidelity import overlap_at_k, rbo_ext


@pytest.mark.parametrize(
    ("first", "second", "p", "expected"),
    [
        # X1 = 0, X2 = 2: (0.1/0.9)·(0·0.9 + 1·0.81) + (0/2 + 2/2)·0.81 = 0.09 + 0.81
        (["a", "b"], ["b", "a"], 0.9, 0.9),
        # S = [a, x], L = [a, b, c]: X = 1, 1, 1; Σ X_d/d p^d = 0.9 + 0.405 + 0.243 = 1.548;
        # Σ_{d>s} X_s(d-s)/(s d) p^d = 0.729/6 = 0.1215; (0.1/0.9)·1.6695 + (0/3 + 1/2)·0.729 = 0.55
        (["a", "b", "c"], ["a", "x"], 0.9, 0.55),
        # disjoint lists agree nowhere
        (["a", "b", "c"], ["x", "y", "z"], 0.9, 0.0),
        # one item each, the same: X1 = 1 → (0.1/0.9)·0.9 + 1·0.9 = 1.0
        (["a"], ["a"], 0.9, 1.0),
    ],
)
def test_rbo_ext_matches_hand_computation(
    first: list[str], second: list[str], p: float, expected: float
) -> None:
    assert rbo_ext(first, second, p) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (list("abcde"), list("edcba"), 0.737775),
        (list("abc"), list("abcdefg"), 1.0),
        (list("abcdefgh"), list("abdcxfyh"), 0.815278),
        (list("abc"), list("bxcdefa"), 0.66092),
    ],
)
def test_rbo_ext_matches_the_reference_implementation(
    first: list[str], second: list[str], expected: float
) -> None:
    assert rbo_ext(first, second, 0.9) == pytest.approx(expected, abs=1e-6)


def test_rbo_edge_cases_and_bad_p() -> None:
    assert rbo_ext([], []) == 1.0
    assert rbo_ext([], ["a"]) == 0.0 and rbo_ext(["a"], []) == 0.0
    # duplicates count once, at their first rank
    assert rbo_ext(["a", "a", "b"], ["a", "b"]) == pytest.approx(1.0)
    for bad in (0.0, 1.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="persistence"):
            rbo_ext(["a"], ["a"], bad)


def test_foreign_ids_uuid_and_int_strings() -> None:
    ids = [str(uuid.UUID(int=i)) for i in range(4)]
    assert rbo_ext(ids, ids) == pytest.approx(1.0)
    assert overlap_at_k(["17", "4711", ids[0]], ["4711", "17", "99"], 3) == 2


def test_overlap_at_k() -> None:
    assert overlap_at_k(["a", "b", "c"], ["c", "x", "a"], 3) == 2
    assert overlap_at_k(["a", "b", "c"], ["c", "x", "a"], 1) == 0
    assert overlap_at_k(["a"], [], 5) == 0
    with pytest.raises(ValueError):
        overlap_at_k(["a"], ["a"], -1)


@given(
    st.lists(st.sampled_from("abcdefghij"), max_size=10),
    st.lists(st.sampled_from("abcdefghij"), max_size=10),
    st.floats(min_value=0.05, max_value=0.95),
)
def test_rbo_is_symmetric_bounded_and_one_only_for_agreeing_prefixes(
    first: list[str], second: list[str], p: float
) -> None:
    score = rbo_ext(first, second, p)
    assert 0.0 <= score <= 1.0
    assert score == pytest.approx(rbo_ext(second, first, p))
    assert rbo_ext(first, first, p) == pytest.approx(1.0)
