"""Evaluation: metrics (pure), the batch runner and stored runs, comparison and significance, the CI
gate, the tuning commands (refusal calibration, rerank fit, chunk sweep, ablation), eval file formats."""
