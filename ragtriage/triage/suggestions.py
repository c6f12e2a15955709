"""Store the root cause diagnosis suggested for flagged requests, so the queue can show and filter it.

The suggestion is machine-made: it is written without a revision bump or an audit row, so it never
conflicts with a triager's change to the same record.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from ragtriage.store.db import read_session, write_session
from ragtriage.store.log_tables import TriageRow


def save_suggested_labels(engine: Engine, suggestions: Mapping[str, str | None]) -> int:
    """Set `suggested_label` of each request id (None clears it); returns how many records exist and changed."""
    table = TriageRow.__table__  # type: ignore[attr-defined]
    changed = 0
    with write_session(engine) as session:
        for request_id, label in suggestions.items():
            result = session.execute(
                update(table).where(table.c.request_id == request_id).values(suggested_label=label)
            )
            changed += int(getattr(result, "rowcount", 0) or 0)
    return changed


def undiagnosed_request_ids(engine: Engine, limit: int | None = None) -> list[str]:
    """Flagged request ids without a suggested label, oldest first."""
    table = TriageRow.__table__  # type: ignore[attr-defined]
    statement = (
        select(table.c.request_id)
        .where(table.c.suggested_label.is_(None))
        .order_by(table.c.request_ts, table.c.request_id)
    )
    if limit is not None:
        statement = statement.limit(limit)
    with read_session(engine) as session:
        return [row[0] for row in session.execute(statement)]
