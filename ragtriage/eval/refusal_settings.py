"""Doctor findings about the refusal settings: a threshold on another score's scale.

A `[rerank] refusal_threshold` is a value on the scale of the score it was calibrated for
(`refusal_threshold_score`). When the configuration refuses by another kind (a cross-encoder was
added, `refusal_score` changed), refusal does not judge any request (`pipeline.refusal`); when a
settings file gives a threshold without its kind, the threshold applies to whatever score the run
has, as before the kind was recorded, and nothing checks its scale.
"""

from __future__ import annotations

from ragtriage.config.settings import RerankSettings
from ragtriage.eval.doctor import Finding

__all__ = ["refusal_findings"]

CALIBRATE = "run `ragtriage eval run`, then `ragtriage eval calibrate-refusal --write`"


def refusal_findings(rerank: RerankSettings) -> list[Finding]:
    """Warnings (no case items) about `refusal_threshold` and the score it judges; [] when sound."""
    threshold, calibrated_for, kind = (
        rerank.refusal_threshold,
        rerank.refusal_threshold_score,
        rerank.refusal_kind(),
    )
    if threshold is None or not rerank.enabled or calibrated_for == kind:
        return []
    if calibrated_for is None:
        return [
            Finding(
                kind="refusal_threshold_score_unknown",
                severity="warning",
                summary=(
                    f"[rerank] refusal_threshold {threshold:g} does not say which score it was calibrated "
                    f"for; it is applied to the {kind} score as it is"
                ),
                fix=(
                    f'add refusal_threshold_score = "{kind}" to [rerank] if it was calibrated for that score, '
                    f"else {CALIBRATE} (it records the kind)"
                ),
            )
        ]
    return [
        Finding(
            kind="refusal_threshold_scale",
            severity="warning",
            summary=(
                f"[rerank] refusal_threshold {threshold:g} was calibrated for {calibrated_for}, but this "
                f"configuration refuses by {kind}: refusal judges no request (the traces say "
                "`refusal not judged`)"
            ),
            fix=f'{CALIBRATE} (it writes the threshold and its kind), or set refusal_threshold = "off"',
        )
    ]
