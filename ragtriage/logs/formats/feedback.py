"""Feedback from annotations, evaluations and scores: which are user feedback, which are bad,
which escalate (the `[logs.otel]` names and labels decide)."""

from __future__ import annotations

from typing import Any

from ragtriage.config.settings import OtelSettings
from ragtriage.logs.formats.spans import Note, Span, indexed

_TRUE_LABELS = frozenset(("true", "yes", "1", "escalated"))
#: Flattened lists of feedback on a span: prefix, and the prefix of each item's fields.
_LISTS = (
    ("annotations", "annotation."),
    ("evaluations", "evaluation."),
    ("trace.annotations", "annotation."),
    ("trace.evaluations", "evaluation."),
)
_LIST_STARTS = tuple(prefix + "." for prefix, _ in _LISTS)


def root_annotations(root: Span, carriers: list[Span], notes: list[Note]) -> list[dict[str, Any]]:
    """Feedback on the request: annotations and evaluations on the root span, on EVALUATOR
    carrier spans linked to it, and notes on the root span or the whole trace."""
    found: list[dict[str, Any]] = []
    for span in [root, *(c for c in carriers if any(sid == root.span_id for _, sid in c.links))]:
        listed = {k: v for k, v in span.attributes.items() if k.startswith(_LIST_STARTS)}
        if not listed:
            continue
        for prefix, suffix in _LISTS:
            for item in indexed(listed, prefix):
                fields = {k[len(suffix) :]: v for k, v in item.items() if k.startswith(suffix)}
                if "name" in fields:
                    fields.pop("metadata", None)
                    found.append({**fields, "span_id": span.span_id})
    for note in notes:
        if note.span_id is None or note.span_id == root.span_id:
            found.append({**note.as_annotation(), "span_id": root.span_id})
    return found


def _matches(name: Any, needles: list[str]) -> bool:
    lower = str(name).lower()
    return any(n.lower() in lower for n in needles if n)


def _is_bad(annotation: dict[str, Any], otel: OtelSettings) -> bool:
    label = annotation.get("label")
    if label not in (None, ""):
        return str(label).strip().lower() in {b.lower() for b in otel.bad_labels}
    score = annotation.get("score")
    return (
        otel.bad_score_at_most is not None
        and isinstance(score, (int, float))
        and not isinstance(score, bool)
        and score <= otel.bad_score_at_most
    )


def feedback_of(annotations: list[dict[str, Any]], otel: OtelSettings) -> dict[str, Any]:
    """The v1 `feedback` section: `rating` `down` when any user-feedback annotation is bad
    (`bad_labels`, or a score at most `bad_score_at_most`), else `up`; the chosen annotation's
    name, label and score; `escalated` from an escalation annotation. Empty when none applies."""
    feedback: dict[str, Any] = {}
    user = [a for a in annotations if _matches(a.get("name"), otel.feedback_names)]
    if user:
        bad = [a for a in user if _is_bad(a, otel)]
        chosen = bad[0] if bad else user[0]
        feedback["rating"] = "down" if bad else "up"
        feedback["name"] = chosen.get("name")
        for key in ("label", "score"):
            if chosen.get(key) is not None:
                feedback[key] = chosen[key]
        if chosen.get("explanation"):
            feedback["reason"] = chosen["explanation"]
    for annotation in annotations:
        if not _matches(annotation.get("name"), otel.escalation_names):
            continue
        label, score = annotation.get("label"), annotation.get("score")
        if str(label).strip().lower() in _TRUE_LABELS or (
            isinstance(score, (int, float)) and not isinstance(score, bool) and score > 0
        ):
            feedback["escalated"] = True
    return feedback
