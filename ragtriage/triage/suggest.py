"""Rule-based root-cause suggestion: deterministic, no LLM, first upstream failure wins.

Each rule reads `Facts` and returns a `Finding` (label, confidence, evidence a triager can read, and
the counterfactual replays that can confirm it) or None. The rules live by label group in
`rules_upstream.py`, `rules_recall.py` and `rules_outcome.py`; `RULES` lists them in pipeline order;
the first finding is the suggestion and the rest are alternatives.
"""

from __future__ import annotations

from collections.abc import Callable

from ragtriage.triage.facts import Facts
from ragtriage.triage.rules_common import LABELS, RELEVANT_COVERAGE, WEAK_COVERAGE, Finding
from ragtriage.triage.rules_outcome import (
    rule_generation_error,
    rule_label_error_content,
    rule_no_answer_in_kb,
)
from ragtriage.triage.rules_recall import rule_bm25_miss, rule_dense_drift, rule_fallback, rule_rerank_error
from ragtriage.triage.rules_upstream import (
    rule_alias_missing,
    rule_chunk_split_bad,
    rule_index_stale,
    rule_label_error_unknown,
    rule_rewrite_error,
)

__all__ = ["LABELS", "RELEVANT_COVERAGE", "RULES", "WEAK_COVERAGE", "Finding", "findings"]


#: Rules in precedence order: the first upstream failure wins.
RULES: tuple[Callable[[Facts], Finding | None], ...] = (
    rule_label_error_unknown,
    rule_index_stale,
    rule_chunk_split_bad,
    rule_rewrite_error,
    rule_alias_missing,
    rule_label_error_content,
    rule_bm25_miss,
    rule_dense_drift,
    rule_rerank_error,
    rule_generation_error,
    rule_no_answer_in_kb,
    rule_fallback,
)


def findings(facts: Facts) -> list[Finding]:
    """Every rule's finding, in precedence order, one per label (the first for a label wins)."""
    found: list[Finding] = []
    for rule in RULES:
        if rule is rule_fallback and found:
            break
        finding = rule(facts)
        if finding is not None and all(f.label != finding.label for f in found):
            found.append(finding)
    return found
