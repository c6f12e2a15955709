"""Triage of flagged requests: diagnosis (gold journey, root-cause rules, counterfactual replays),
labels and their workflow, promotion into the eval set, PII redaction, sampled review, the monitor."""
