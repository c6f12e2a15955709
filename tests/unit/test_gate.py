"""CI gate: rule parsing, floors, maximum drops, no-regression of confirmed badcases."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtriage.eval.gate import GateRuleError, evaluate_gate, parse_rule
from tests.unit.eval_run_helpers import engine_with_cases, store_run

BASE = {"c1": {"mrr": 1.0, "recall@5": 1.0}, "c2": {"mrr": 0.5, "recall@5": 1.0}}
NEW = {"c1": {"mrr": 0.5, "recall@5": 1.0}, "c2": {"mrr": 0.5, "recall@5": 0.0}}


def test_parse_rules() -> None:
    rule = parse_rule("Recall@5=0.8", "min")
    assert (rule.metric, rule.value, rule.relative) == ("recall@5", 0.8, False)
    relative = parse_rule("mrr=5%", "max_drop")
    assert relative.relative and relative.value == pytest.approx(0.05)


@pytest.mark.parametrize(
    "text, kind, message",
    [
        ("recall@5", "min", "METRIC=VALUE"),
        ("recal@5=0.8", "min", "did you mean recall@5"),
        ("mrr=abc", "max_drop", "not a number"),
        ("mrr=5%", "min", "absolute"),
        ("mrr=-0.1", "max_drop", "negative"),
    ],
)
def test_malformed_rules_name_the_rule(text: str, kind: str, message: str) -> None:
    with pytest.raises(GateRuleError, match=message) as error:
        parse_rule(text, kind)  # type: ignore[arg-type]
    assert text in str(error.value)


@pytest.fixture
def runs(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = engine_with_cases(tmp_path, ["c1", "c2"], confirmed=("c1",))
    return engine, store_run(engine, BASE, name="base"), store_run(engine, NEW, name="new")


def test_floor_passes_and_fails_with_reasons(runs) -> None:  # type: ignore[no-untyped-def]
    engine, _, new = runs
    passed = evaluate_gate(engine, new, mins=["mrr=0.5"])
    assert passed.passed and "mrr = 0.5000 ≥ floor 0.5" in passed.checks[0].reason
    failed = evaluate_gate(engine, new, mins=["recall@5=0.8"])
    assert not failed.passed
    assert failed.checks[0].reason == "recall@5 = 0.5000 < floor 0.8"


def test_max_drop_absolute_and_relative(runs) -> None:  # type: ignore[no-untyped-def]
    engine, base, new = runs
    # mrr 0.75 → 0.5: a drop of 0.25.
    assert not evaluate_gate(engine, new, baseline_ref=base, max_drops=["mrr=0.2"]).passed
    assert evaluate_gate(engine, new, baseline_ref=base, max_drops=["mrr=0.25"]).passed
    assert evaluate_gate(engine, new, baseline_ref=base, max_drops=["mrr=34%"]).passed
    assert not evaluate_gate(engine, new, baseline_ref=base, max_drops=["mrr=33%"]).passed


def test_no_regress_confirmed_names_the_case(runs) -> None:  # type: ignore[no-untyped-def]
    engine, base, new = runs
    result = evaluate_gate(engine, new, baseline_ref=base, no_regress="confirmed")
    assert not result.passed
    assert "c1 (1.000 → 0.500)" in result.checks[0].reason
    # On recall@5 only c2 (not confirmed) regressed.
    assert evaluate_gate(
        engine, new, baseline_ref=base, no_regress="confirmed", regress_metric="recall@5"
    ).passed
    assert not evaluate_gate(
        engine, new, baseline_ref=base, no_regress="all", regress_metric="recall@5"
    ).passed


def test_rules_needing_a_baseline_or_an_unknown_metric_are_malformed(runs) -> None:  # type: ignore[no-untyped-def]
    engine, _, new = runs
    with pytest.raises(GateRuleError, match="--baseline"):
        evaluate_gate(engine, new, max_drops=["mrr=0.1"])
    with pytest.raises(GateRuleError, match="has no ndcg@10"):
        evaluate_gate(engine, new, mins=["ndcg@10=0.5"])
    with pytest.raises(GateRuleError, match="no rules"):
        evaluate_gate(engine, new)


def test_incomplete_run_fails_the_gate(tmp_path: Path) -> None:
    engine = engine_with_cases(tmp_path, ["c1", "c2"])
    run = store_run(engine, BASE, name="partial", complete=False)
    result = evaluate_gate(engine, run, mins=["mrr=0.1"])
    assert not result.passed
    assert "incomplete" in result.checks[0].reason and "--resume" in result.checks[0].reason
