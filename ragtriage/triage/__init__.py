"""Triage of flagged requests: diagnosis, the labelling workflow, promotion and the monitor.

Diagnosis (`diagnose`, `rules`, `facts`, `counterfactual`): facts, gold journeys, root-cause rules
and the counterfactual replays that confirm them. The workflow (`workflow`, `bulk_labels`): labels, gold,
notes, confirm and dismiss with revisions and an audit trail. `promote` turns a confirmed case into an
eval case with PII redacted; `sampling` draws unflagged requests for review; `monitor` computes the
retrieval-health figures; `alias_mining` turns diagnoses into dictionary entries.
"""
