"""Badcase flagging rules (configured in `settings.logs.flagging`). Pure: no I/O.

A request is flagged for a bad rating, an escalation to a human, a follow-up question from the
same session within N minutes (the *earlier* request is flagged), empty citations, or a refusal /
low-confidence answer. Reasons are short codes, listed in `REASONS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone

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


class FlagRules:
    """The rules, prepared once from the settings (called for every ingested batch)."""

    def __init__(self, settings: FlaggingSettings) -> None:
        self.follow_up_minutes = settings.follow_up_minutes
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

    def flags(
        self, new: list[LogLine], stored: list[tuple[str, str, datetime]]
    ) -> tuple[dict[str, list[str]], dict[str, datetime]]:
        """The reasons of each new line, by request_id (the per-line rules, and the follow-up rule
        within the batch and with `stored` requests `(session, request_id, ts)` near it), and the
        stored requests a new one follows up, with their time."""
        reasons = {line.request_id: self.reasons(line) for line in new}
        earlier: dict[str, datetime] = {}
        timeline = [
            (line.session, line.request_id, _us(line.ts))
            for line in new
            if line.session is not None and line.ts is not None
        ]
        if not timeline or self.follow_up_minutes <= 0:
            return reasons, earlier
        involving = {request_id for _, request_id, _ in timeline}
        timeline += [(session, request_id, _us(ts)) for session, request_id, ts in stored]
        stored_ts = {request_id: ts for _, request_id, ts in stored}
        for request_id in followed_up(timeline, self.follow_up_minutes, involving=involving):
            if request_id in reasons:
                if REASON_FOLLOW_UP not in reasons[request_id]:
                    reasons[request_id].append(REASON_FOLLOW_UP)
            elif request_id in stored_ts:
                earlier[request_id] = stored_ts[request_id]
        return reasons, earlier

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


def _us(moment: datetime) -> int:
    """Epoch microseconds of a time (naive means UTC): exact to compare."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - _EPOCH) // timedelta(microseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
