"""How far two ranked lists of the same stage agree: overlap@k and rank-biased overlap (pure).

Used by `replay.fidelity` to compare a logged stage with its replay. Both functions de-duplicate the
lists by first occurrence (a chunk counts once, at its best rank) and never mutate their inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

#: The persistence of RBO used by the fidelity report: the top 10 ranks carry about 86% of the weight.
DEFAULT_RBO_P = 0.9


def _dedup(ranked: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


def overlap_at_k(logged: Sequence[str], replayed: Sequence[str], k: int) -> int:
    """|logged[:k] ∩ replayed[:k]|: how many of the top k items both lists share (order ignored).

    Raises:
        ValueError: k < 0.
    """
    if k < 0:
        raise ValueError(f"k must be zero or more, got {k}")
    return len(set(_dedup(logged)[:k]) & set(_dedup(replayed)[:k]))


def rbo_ext(first: Sequence[str], second: Sequence[str], p: float = DEFAULT_RBO_P) -> float:
    """Extrapolated rank-biased overlap RBO_ext of two finite, possibly uneven rankings, in [0, 1].

    Webber, Moffat & Zobel (2010), "A similarity measure for indefinite rankings", ACM TOIS 28(4),
    Eq. (32). With S the shorter list (length s), L the longer (length l) and X_d the overlap of
    their prefixes of depth d (for d > s, all of S against L[:d]):

        RBO_ext = (1-p)/p · [ Σ_{d=1..l} (X_d/d)·p^d + Σ_{d=s+1..l} X_s·(d-s)/(s·d)·p^d ]
                  + [ (X_l - X_s)/l + X_s/s ] · p^l

    This is the point estimate that assumes the agreement seen at the end of the lists continues
    below them (not the lower bound RBO_min, not the residual RBO_res). Identical lists score 1.0;
    two empty lists score 1.0; one empty list against a non-empty one scores 0.0.

    Raises:
        ValueError: p outside (0, 1).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBO persistence p must be in (0, 1), got {p}")
    a, b = _dedup(first), _dedup(second)
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, l_ = len(short), len(long_)
    seen_short: set[str] = set()
    seen_long: set[str] = set()
    overlap = 0
    overlaps = [0] * (l_ + 1)
    """overlaps[d] = X_d, the overlap at depth d (1-based)."""
    for depth in range(1, l_ + 1):
        item_long = long_[depth - 1]
        if depth <= s:
            item_short = short[depth - 1]
            if item_short == item_long:
                overlap += 1
            else:
                overlap += item_short in seen_long
                overlap += item_long in seen_short
            seen_short.add(item_short)
        else:
            overlap += item_long in seen_short
        seen_long.add(item_long)
        overlaps[depth] = overlap
    x_s, x_l = overlaps[s], overlaps[l_]
    total = sum(overlaps[d] / d * p**d for d in range(1, l_ + 1))
    total += sum(x_s * (d - s) / (s * d) * p**d for d in range(s + 1, l_ + 1))
    score = (1 - p) / p * total + ((x_l - x_s) / l_ + x_s / s) * p**l_
    # Floating-point sums can land a hair outside [0, 1].
    return min(1.0, max(0.0, score))
