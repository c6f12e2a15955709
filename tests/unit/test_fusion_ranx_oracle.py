"""Score fusion checked against `ranx.fuse` (the oracle) where the methods overlap.

ranx normalises with min-max (dividing by max(max − min, 1e-9), so a list of equal scores maps
to 0 where ours maps to 1), max and zmuv (population σ); its `wsum` counts a missing chunk as 0.
The generated lists therefore hold distinct scores, and only fused *scores* are compared: ranx
orders ties by its own sort, ours by best rank, list name and chunk id.
"""

from __future__ import annotations

import os
import random

import pytest

from ragtriage.pipeline.fusion import combmnz, combsum, rrf, weighted_fusion

# ranx's numba kernels take minutes of JIT compilation per process on 2 cores for these few tiny
# runs; interpreted they run the same code in a second (set before numba is first imported).
os.environ.setdefault("NUMBA_DISABLE_JIT", "1")
ranx = pytest.importorskip("ranx")
pytestmark = pytest.mark.oracle

NORMS = {"min-max": "min-max", "max": "max", "z-score": "zmuv"}


def _random_lists(seed: int, n_lists: int = 3) -> dict[str, list[tuple[str, float]]]:
    rng = random.Random(seed)
    lists = {}
    for index in range(n_lists):
        chunks = rng.sample([f"c{i}" for i in range(12)], rng.randint(2, 8))
        scores = sorted(rng.sample(range(1, 1000), len(chunks)), reverse=True)
        lists[f"route{index}"] = [(c, s / 37.0) for c, s in zip(chunks, scores, strict=True)]
    return lists


def _ranx_fuse(lists: dict[str, list[tuple[str, float]]], method: str, norm: str | None, **params) -> dict:  # type: ignore[no-untyped-def]
    runs = [ranx.Run({"q": dict(hits)}, name=name) for name, hits in lists.items()]
    fused = ranx.fuse(runs=runs, norm=norm, method=method, params=params or None)
    return dict(fused.to_dict()["q"])


def _ours(fused: list) -> dict[str, float]:
    return {c.chunk_id: c.score for c in fused}


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("normalization", sorted(NORMS))
def test_combsum_and_combmnz_match_ranx(seed: int, normalization: str) -> None:
    lists = _random_lists(seed)
    norm = NORMS[normalization]
    assert _ours(combsum(lists, normalization=normalization)) == pytest.approx(_ranx_fuse(lists, "sum", norm))
    assert _ours(combmnz(lists, normalization=normalization)) == pytest.approx(_ranx_fuse(lists, "mnz", norm))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("normalization", sorted(NORMS))
def test_weighted_fusion_matches_ranx_wsum(seed: int, normalization: str) -> None:
    lists = _random_lists(seed, n_lists=2)
    weights = {"route0": 0.7, "route1": 0.3}
    ours = weighted_fusion(lists, weights, normalization=normalization, missing="zero")
    expected = _ranx_fuse(lists, "wsum", NORMS[normalization], weights=[0.7, 0.3])
    assert _ours(ours) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(8))
def test_rrf_matches_ranx(seed: int) -> None:
    lists = _random_lists(seed)
    ours = rrf({name: [c for c, _ in hits] for name, hits in lists.items()}, k=60)
    assert _ours(ours) == pytest.approx(_ranx_fuse(lists, "rrf", None, k=60))
