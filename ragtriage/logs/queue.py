"""The triage queue: flagged requests newest first, filtered and paged, with the true total."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from ragtriage.errors import InputError
from ragtriage.store.db import read_session
from ragtriage.store.fidelity_tables import ReplayFidelityRow
from ragtriage.store.log_tables import RequestLogRow, TriageRow
from ragtriage.store.triage_repo import triage_filters
from ragtriage.wording import quoted

NOT_DIAGNOSED = "-"
"""Key of `QueueCounts.by_suggested` for records no diagnosis has run on."""
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$")
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


class QueueItem(BaseModel):
    """One row of the queue."""

    request_id: str
    ts: datetime | None
    raw_query: str
    reasons: list[str] = Field(default_factory=list)
    status: str
    primary_label: str | None = None
    labels: list[str] = Field(default_factory=list)
    assignee: str | None = None
    revision: int
    pipeline_version: str | None = None
    """The logged request's pipeline_version (None: the log carried none)."""
    suggested_label: str | None = None
    """Root cause suggested by diagnosis, when one ran."""
    fidelity: str | None = None
    """The replay's fidelity line (`bm25 3/3 · dense 3/3 · …`), when `ragtriage fidelity` measured it."""
    fidelity_rbo: float | None = None
    """Lowest rank-biased overlap over the logged stages (1.0: every stage in the logged order)."""
    fidelity_diverged: int | None = None
    """Logged stages the replay did not reproduce exactly (None: not measured)."""

    @property
    def fidelity_cell(self) -> str:
        """Short form for a queue column: `exact`, `0.62, 3 off` (lowest RBO, stages that differ), or
        `-` when not measured."""
        if self.fidelity_diverged is None or self.fidelity_rbo is None:
            return "-"
        if self.fidelity_diverged == 0:
            return "exact"
        return f"{self.fidelity_rbo:.2f}, {self.fidelity_diverged} off"


#: Sort keys of the queue: name → (column name, descending). `newest` is the indexed default.
QUEUE_SORTS: dict[str, tuple[str, bool]] = {
    "newest": ("request_ts", True),
    "oldest": ("request_ts", False),
    "status": ("status", False),
    "label": ("primary_label", False),
    "suggested": ("suggested_label", False),
    "request_id": ("request_id", False),
    "fidelity": ("min_rbo", False),
}
"""`fidelity` puts the least faithful replays first (lowest RBO); requests never measured come last."""

#: Fidelity filters: name → what a record must show.
FIDELITY_FILTERS = ("exact", "diverged", "unexplained", "unmeasured")


class QueueCounts(BaseModel):
    """Records per status, per primary label and per suggested label (None = unlabelled)."""

    total: int = 0
    by_status: dict[str, int] = Field(default_factory=dict)
    by_label: dict[str, int] = Field(default_factory=dict)
    by_suggested: dict[str, int] = Field(default_factory=dict)


class QueuePage(BaseModel):
    """One page of the queue and the number of records matching the filters."""

    total: int
    offset: int
    limit: int
    items: list[QueueItem] = Field(default_factory=list)


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """`30m`, `12h`, `7d`, `2w` (ago), or an ISO date/time (no zone: UTC) → an aware UTC datetime.

    Raises:
        InputError: anything else.
    """
    match = _RELATIVE.match(text)
    if match:
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        return (now or datetime.now(timezone.utc)) - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(
            f"--since {quoted(text)}: give a duration like 30m, 12h, 7d, 2w "
            "or a date/time like 2026-11-02 or 2026-11-02T08:00"
        ) from None
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def list_queue(
    engine: Engine,
    *,
    status: str | None = None,
    label: str | None = None,
    reason: str | None = None,
    assignee: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
    text: str | None = None,
    suggested: str | None = None,
    undiagnosed: bool = False,
    sort: str = "newest",
    fidelity: str | None = None,
    version: str | None = None,
) -> QueuePage:
    """One page of triage records (newest request first) joined with their query text.

    The page uses the (status, request_ts, request_id) index and stops after `limit` rows; the
    total is an index-only count (a scan of the JSON text only with --label / --reason).

    `text` keeps queries containing it (a scan of the joined query text); `suggested` filters on the
    diagnosis' suggested label, `undiagnosed` keeps the records no diagnosis has run on; `sort` is a
    key of `QUEUE_SORTS` (request_id breaks ties); `fidelity` keeps replays measured `exact` (every
    logged stage reproduced), `diverged` (some stage differs), `unexplained` (a stage differs for no
    documented reason) or `unmeasured`; `version` keeps the requests production logged with that
    pipeline_version (exact match: a canary's cases).

    Raises:
        InputError: an unknown status, sort or fidelity filter, or a negative limit/offset.
    """
    if limit < 0 or offset < 0:
        raise InputError("--limit and --offset must be zero or more")
    if sort not in QUEUE_SORTS:
        raise InputError(f"unknown sort {quoted(sort)}; use one of {', '.join(QUEUE_SORTS)}")
    if fidelity is not None and fidelity not in FIDELITY_FILTERS:
        raise InputError(
            f"unknown fidelity filter {quoted(fidelity)}; use one of {', '.join(FIDELITY_FILTERS)}"
        )
    conditions = triage_filters(status=status, label=label, reason=reason, assignee=assignee, since=since)
    triage = TriageRow.__table__  # type: ignore[attr-defined]
    requests = RequestLogRow.__table__  # type: ignore[attr-defined]
    measured = ReplayFidelityRow.__table__  # type: ignore[attr-defined]
    joins_fidelity = fidelity is not None or sort == "fidelity"
    if fidelity is not None:
        conditions.append(_fidelity_condition(measured, fidelity))
    if suggested is not None:
        conditions.append(triage.c.suggested_label == suggested)
    if undiagnosed:
        conditions.append(triage.c.suggested_label.is_(None))
    if version is not None:
        conditions.append(requests.c.pipeline_version == version)
    if text:
        escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        conditions.append(requests.c.raw_query.like(f"%{escaped}%", escape="\\"))
    column_name, descending = QUEUE_SORTS[sort]
    sort_column = measured.c[column_name] if sort == "fidelity" else triage.c[column_name]
    order = [sort_column.desc() if descending else sort_column.asc()]
    if sort == "fidelity":
        # Unmeasured requests last, then the most unexplained stages first.
        order = [sort_column.is_(None), measured.c.unexplained.desc(), *order]
    if column_name != "request_ts":
        order.append(triage.c.request_ts.desc())
    order.append(triage.c.request_id.desc() if descending else triage.c.request_id.asc())
    with read_session(engine) as session:
        counted = select(func.count()).select_from(triage)
        if text or version is not None:
            counted = counted.join(requests, requests.c.request_id == triage.c.request_id)
        if joins_fidelity:
            counted = counted.outerjoin(measured, measured.c.request_id == triage.c.request_id)
        total = session.execute(counted.where(*conditions)).scalar_one()
        rows = session.execute(
            select(
                triage.c.request_id,
                triage.c.request_ts,
                requests.c.raw_query,
                triage.c.reasons,
                triage.c.status,
                triage.c.primary_label,
                triage.c.labels,
                triage.c.assignee,
                triage.c.revision,
                requests.c.pipeline_version,
                triage.c.suggested_label,
                measured.c.line,
                measured.c.min_rbo,
                (measured.c.stages_compared - measured.c.exact_stages).label("diverged"),
            )
            .join(requests, requests.c.request_id == triage.c.request_id)
            .outerjoin(measured, measured.c.request_id == triage.c.request_id)
            .where(*conditions)
            .order_by(*order)
            .limit(limit)
            .offset(offset)
        ).all()
    items = [
        QueueItem(
            request_id=row.request_id,
            ts=row.request_ts,
            raw_query=row.raw_query,
            reasons=list(row.reasons or []),
            status=row.status,
            primary_label=row.primary_label,
            labels=list(row.labels or []),
            assignee=row.assignee,
            revision=row.revision,
            pipeline_version=row.pipeline_version,
            suggested_label=row.suggested_label,
            fidelity=row.line,
            fidelity_rbo=row.min_rbo,
            fidelity_diverged=row.diverged,
        )
        for row in rows
    ]
    return QueuePage(total=total, offset=offset, limit=limit, items=items)


def _fidelity_condition(measured: Any, name: str) -> Any:
    if name == "unmeasured":
        return measured.c.request_id.is_(None)
    if name == "exact":
        return measured.c.exact_stages == measured.c.stages_compared
    if name == "diverged":
        return measured.c.exact_stages < measured.c.stages_compared
    return measured.c.unexplained > 0


def queue_counts(engine: Engine) -> QueueCounts:
    """How many triage records there are per status, primary label and suggested label (indexed counts)."""
    triage = TriageRow.__table__  # type: ignore[attr-defined]
    counts = QueueCounts()
    with read_session(engine) as session:
        for column, target in (
            (triage.c.status, counts.by_status),
            (triage.c.primary_label, counts.by_label),
            (triage.c.suggested_label, counts.by_suggested),
        ):
            for value, count in session.execute(select(column, func.count()).group_by(column)):
                target[NOT_DIAGNOSED if value is None else str(value)] = int(count)
    counts.total = sum(counts.by_status.values())
    return counts


def queue_versions(engine: Engine) -> dict[str, int]:
    """Flagged requests per logged pipeline_version, most first (requests without one are left out)."""
    triage = TriageRow.__table__  # type: ignore[attr-defined]
    requests = RequestLogRow.__table__  # type: ignore[attr-defined]
    version = requests.c.pipeline_version
    statement = (
        select(version, func.count())
        .select_from(triage.join(requests, requests.c.request_id == triage.c.request_id))
        .where(version.is_not(None))
        .group_by(version)
        .order_by(func.count().desc(), version)
    )
    with read_session(engine) as session:
        return {str(name): int(count) for name, count in session.execute(statement)}
