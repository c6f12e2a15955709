"""CI gate over stored runs: metric floors, maximum drops against a baseline, no regressed badcases.

Rules are written as on the command line: `--min "recall@5=0.8"`, `--max-drop "mrr=0.02"` (an
absolute drop) or `--max-drop "mrr=5%"` (relative to the baseline), `--no-regress confirmed|all`.
A malformed rule raises `GateRuleError` (the CLI exits 2 naming it); a failed rule makes the gate
fail (exit 1) with one readable reason per rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from ragtriage.errors import InputError
from ragtriage.eval.compare import compare_runs
from ragtriage.eval.run_view import effective_status
from ragtriage.eval.specs import parse_metric
from ragtriage.store import eval_repo as eval_store
from ragtriage.wording import quoted

__all__ = ["GateCheck", "GateResult", "GateRule", "GateRuleError", "evaluate_gate", "parse_rule"]

#: Aggregates a rule may name besides the ranking metrics.
EXTRA_METRICS = ("refusal_accuracy",)


class GateRuleError(InputError):
    """A gate rule that cannot be parsed or cannot be checked (names the rule and the fix)."""

    title = "bad gate rule"


@dataclass(frozen=True)
class GateRule:
    """One parsed rule: `min` (floor on the run's mean) or `max_drop` (baseline − run ≤ value)."""

    kind: Literal["min", "max_drop"]
    metric: str
    value: float
    relative: bool
    text: str


class GateCheck(BaseModel):
    """The outcome of one rule, with the reason in words."""

    rule: str
    passed: bool
    reason: str


class GateResult(BaseModel):
    """Every check of one gate evaluation; `passed` only when all passed."""

    run_id: int
    baseline_id: int | None = None
    passed: bool
    checks: list[GateCheck] = Field(default_factory=list)


def parse_rule(text: str, kind: Literal["min", "max_drop"]) -> GateRule:
    """Parse `metric=value` (`value%` for a relative max drop).

    Raises:
        GateRuleError: no `=`, an unknown metric, or a value that is not a number.
    """
    option = "--min" if kind == "min" else "--max-drop"
    name, sep, raw_value = text.partition("=")
    if not sep or not name.strip() or not raw_value.strip():
        raise GateRuleError(
            f'{option} {quoted(text)}: write it as METRIC=VALUE, e.g. {option} "recall@5=0.8"'
        )
    name = name.strip()
    if name.lower() in EXTRA_METRICS:
        metric = name.lower()
    else:
        try:
            metric = parse_metric(name).label
        except ValueError as error:
            raise GateRuleError(f"{option} {quoted(text)}: {error}") from None
    raw_value = raw_value.strip()
    relative = raw_value.endswith("%")
    if relative and kind == "min":
        raise GateRuleError(f"{option} {quoted(text)}: a floor is an absolute value, e.g. {name}=0.8 (no %)")
    try:
        value = float(raw_value.rstrip("%"))
    except ValueError:
        raise GateRuleError(f"{option} {quoted(text)}: {quoted(raw_value)} is not a number") from None
    if relative:
        value /= 100.0
    if value < 0:
        raise GateRuleError(f"{option} {quoted(text)}: the value must not be negative")
    return GateRule(kind, metric, value, relative, text)


def _mean(aggregates: dict[str, object], metric: str) -> float | None:
    if metric == "refusal_accuracy":
        no_gold = aggregates.get("no_gold") or {}
        value = no_gold.get("refusal_accuracy") if isinstance(no_gold, dict) else None
        return None if value is None else float(value)
    means = aggregates.get("means") or {}
    value = means.get(metric) if isinstance(means, dict) else None
    return None if value is None else float(value)


def evaluate_gate(
    engine: Engine,
    run_ref: str | int,
    *,
    baseline_ref: str | int | None = None,
    mins: Sequence[str] = (),
    max_drops: Sequence[str] = (),
    no_regress: Literal["confirmed", "all"] | None = None,
    regress_metric: str | None = None,
) -> GateResult:
    """Check the rules against run `run_ref` (and `baseline_ref` for drops and regressions).

    Raises:
        GateRuleError: a malformed rule, a drop/regression rule without a baseline, or a metric the
            run does not have.
        NotFoundError: an unknown run.
    """
    rules = [parse_rule(t, "min") for t in mins] + [parse_rule(t, "max_drop") for t in max_drops]
    if not rules and no_regress is None:
        raise GateRuleError("no rules given; add --min, --max-drop or --no-regress")
    if baseline_ref is None and (no_regress is not None or any(r.kind == "max_drop" for r in rules)):
        raise GateRuleError("--max-drop and --no-regress compare with a baseline; add --baseline RUN")
    run = eval_store.get_run(engine, run_ref)
    baseline = eval_store.get_run(engine, baseline_ref) if baseline_ref is not None else None
    checks: list[GateCheck] = []
    for candidate in (run, baseline):
        if candidate is not None and effective_status(candidate) != "complete":
            checks.append(
                GateCheck(
                    rule="complete run",
                    passed=False,
                    reason=f"run {candidate.id} is {effective_status(candidate)} ({candidate.cases_done}/"
                    f"{candidate.case_count} cases); finish it with "
                    f"`ragtriage eval run --resume {candidate.id}`",
                )
            )
    for rule in rules:
        checks.append(
            _check(rule, run.aggregates or {}, baseline.aggregates if baseline else None, run.id, baseline)
        )
    if no_regress is not None and baseline is not None:
        comparison = compare_runs(engine, baseline.id or 0, run.id or 0, primary_metric=regress_metric)
        bad = [d for d in comparison.regressed if d.confirmed or no_regress == "all"]
        what = "confirmed badcases" if no_regress == "confirmed" else "cases"
        reason = (
            f"no {what} regressed on {comparison.primary_metric} against run {baseline.id}"
            if not bad
            else f"{len(bad)} {what} regressed on {comparison.primary_metric} against run {baseline.id}: "
            + ", ".join(f"{d.case_id} ({d.a:.3f} → {d.b:.3f})" for d in bad[:10])
            + (" …" if len(bad) > 10 else "")
        )
        checks.append(GateCheck(rule=f"--no-regress {no_regress}", passed=not bad, reason=reason))
    return GateResult(
        run_id=int(run.id or 0),
        baseline_id=baseline.id if baseline else None,
        passed=all(c.passed for c in checks),
        checks=checks,
    )


def _check(
    rule: GateRule,
    aggregates: dict[str, object],
    base: dict[str, object] | None,
    run_id: int | None,
    baseline: object,
) -> GateCheck:
    option = "--min" if rule.kind == "min" else "--max-drop"
    label = f"{option} {rule.text}"
    actual = _mean(aggregates, rule.metric)
    if actual is None:
        means = aggregates.get("means")
        known = ", ".join(sorted(means)) if isinstance(means, dict) else ""
        raise GateRuleError(f"{label}: run {run_id} has no {rule.metric} (it has: {known or 'no metrics'})")
    if rule.kind == "min":
        passed = actual >= rule.value - 1e-12
        verdict = "≥" if passed else "<"
        return GateCheck(
            rule=label, passed=passed, reason=f"{rule.metric} = {actual:.4f} {verdict} floor {rule.value:g}"
        )
    before = _mean(base or {}, rule.metric)
    if before is None:
        raise GateRuleError(f"{label}: the baseline has no {rule.metric}")
    drop = before - actual
    allowed = rule.value * before if rule.relative else rule.value
    passed = drop <= allowed + 1e-12
    shown = f"{rule.value * 100:g}% of {before:.4f} = {allowed:.4f}" if rule.relative else f"{allowed:g}"
    return GateCheck(
        rule=label,
        passed=passed,
        reason=f"{rule.metric} {before:.4f} → {actual:.4f} (drop {drop:+.4f}; allowed {shown})",
    )
