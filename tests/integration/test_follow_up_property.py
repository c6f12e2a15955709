"""The follow-up rule over a real SQLite store equals its definition applied to all requests at once.

Definition: within a session, requests ordered by (time, request_id); each consecutive pair at
most the window apart flags the earlier request. Ingest sees the requests split into files and
small batches, in any order, and must reach the same set whatever the split.
"""

from __future__ import annotations

import json
import random
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from ragtriage.config.settings import FlaggingSettings
from ragtriage.logs.flagging import followed_up
from ragtriage.logs.ingest import ingest_lines
from ragtriage.store.db import make_engine, read_session, sqlite_url
from ragtriage.store.log_tables import TriageRow

WINDOW_MINUTES = 5
START = datetime(2026, 11, 2, 8, 0, tzinfo=timezone.utc)

_requests = st.lists(
    st.tuples(st.sampled_from(["s1", "s2", "s3"]), st.integers(0, 40)),  # session, minute
    min_size=1,
    max_size=30,
)


def _by_definition(requests: list[tuple[str, str, int]]) -> set[str]:
    """Earlier requests of consecutive same-session pairs at most the window apart (O(n²) on purpose)."""
    flagged = set()
    for session, request_id, minute in requests:
        later = [(m, rid) for s, rid, m in requests if s == session and (m, rid) > (minute, request_id)]
        if later and min(later)[0] - minute <= WINDOW_MINUTES:
            flagged.add(request_id)
    return flagged


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_requests, st.randoms(use_true_random=False), st.integers(1, 4), st.integers(1, 7))
def test_follow_ups_do_not_depend_on_file_order_or_batch_size(
    requests: list[tuple[str, int]], shuffle: random.Random, files: int, batch_size: int
) -> None:
    numbered = [(session, f"r{i:02d}", minute) for i, (session, minute) in enumerate(requests)]
    expected = _by_definition(numbered)
    # The pure rule agrees with the definition too.
    as_us = [(s, rid, m * 60_000_000) for s, rid, m in numbered]
    assert followed_up(as_us, WINDOW_MINUTES) == expected

    order = list(numbered)
    shuffle.shuffle(order)
    with tempfile.TemporaryDirectory() as home:
        engine = make_engine(sqlite_url(Path(home) / "store.db"))
        flagging = FlaggingSettings(follow_up_minutes=WINDOW_MINUTES, follow_up_marker=False)
        for part in range(files):
            lines = [
                json.dumps(
                    {
                        "request_id": rid,
                        "raw_query": "q",
                        "session": session,
                        "ts": (START + timedelta(minutes=minute)).isoformat(),
                    }
                )
                for session, rid, minute in order[part::files]
            ]
            ingest_lines(engine, lines, flagging=flagging, batch_size=batch_size)
        with read_session(engine) as session:
            records = session.execute(select(TriageRow.request_id, TriageRow.reasons)).all()
        engine.dispose()
    assert {rid for rid, reasons in records if "follow_up" in reasons} == expected
    assert all(reasons == ["follow_up"] for _rid, reasons in records)
