"""Badcase flagging rules (configured in `settings.logs.flagging`). Pure: no I/O.

A request is flagged for a bad rating, an escalation to a human, a follow-up question from the
same session within N minutes (the *earlier* request is flagged), empty citations, or a refusal /
low-confidence answer. Reasons are short codes, listed in `REASONS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import timedelta

from ragtriage.config.settings import FlaggingSettings
from ragtriage.logs.log_line import LogLine

REASON_BAD_RATING = "bad_rating"
REASON_ESCALATED = "escalated"
REASON_FOLLOW_UP = "follow_up"
REASON_EMPTY_CITATIONS = "empty_citations"
REASON_REFUSAL = "refusal"
REASON_LOW_CONFIDENCE = "low_confidence"
REASONS = (
    REASON_BAD_RATING,
    REASON_ESCALATED,
    REASON_FOLLOW_UP,
    REASON_EMPTY_CITATIONS,
    REASON_REFUSAL,
    REASON_LOW_CONFIDENCE,
)


def reason_key(reasons: Iterable[str]) -> str:
    """The reasons of one flagged request as one key: `REASONS` order, joined with `+`
    (`bad_rating+escalated`); a reason outside `REASONS` goes last."""
    order = {reason: index for index, reason in enumerate(REASONS)}
    return "+".join(sorted(set(reasons), key=lambda reason: (order.get(reason, len(order)), reason)))


class LineRules:
    """The per-line rules, prepared once from the settings (called for every ingested line)."""

    def __init__(self, settings: FlaggingSettings) -> None:
        self.bad_ratings = frozenset(r.strip().lower() for r in settings.bad_ratings)
        self.escalation = settings.escalation
        self.empty_citations = settings.empty_citations
        self.refusal_markers = tuple(m for m in settings.refusal_markers if m)
        # One scan of the answer for all markers.
        self._refusal = (
            re.compile("|".join(map(re.escape, self.refusal_markers))) if self.refusal_markers else None
        )
        self.min_confidence = settings.min_confidence
        self.follow_up_marker = settings.follow_up_marker

    def reasons(self, line: LogLine) -> list[str]:
        """Reasons this line is a badcase on its own (the session follow-up rule is separate)."""
        reasons = []
        if line.rating is not None and line.rating.strip().lower() in self.bad_ratings:
            reasons.append(REASON_BAD_RATING)
        if self.escalation and line.escalated:
            reasons.append(REASON_ESCALATED)
        if line.follow_up_marked and self.follow_up_marker:
            reasons.append(REASON_FOLLOW_UP)
        if self.empty_citations and line.citations_empty:
            reasons.append(REASON_EMPTY_CITATIONS)
        answer = line.answer
        if answer and self._refusal is not None and self._refusal.search(answer):
            reasons.append(REASON_REFUSAL)
        if (
            self.min_confidence is not None
            and line.confidence is not None
            and line.confidence < self.min_confidence
        ):
            reasons.append(REASON_LOW_CONFIDENCE)
        return reasons


def followed_up(
    requests: Iterable[tuple[str, str, int]], minutes: float, *, involving: set[str] | None = None
) -> set[str]:
    """Request ids followed by another request of the same session within `minutes`.

    `requests` are `(session, request_id, ts)` with `ts` in integer microseconds since the epoch
    (exact, unlike float seconds); within a session they are ordered by (ts, request_id) and each
    consecutive pair at most the window apart flags its earlier request.
    With `involving`, only pairs with at least one of those ids count (the rest were judged before).
    """
    if minutes <= 0:
        return set()
    # One sort puts each session's requests next to each other in (ts, request_id) order.
    timeline = sorted((session, ts, request_id) for session, request_id, ts in requests)
    window = timedelta(minutes=minutes) // timedelta(microseconds=1)
    flagged: set[str] = set()
    for (session, earlier_ts, earlier_id), (later_session, later_ts, later_id) in zip(
        timeline, timeline[1:], strict=False
    ):
        if session != later_session or earlier_id == later_id or later_ts - earlier_ts > window:
            continue
        if involving is None or earlier_id in involving or later_id in involving:
            flagged.add(earlier_id)
    return flagged
