"""Retrieval health from the stored logs and triage records, per day or per `pipeline_version`.

`compute_monitor` is the headless core the CLI (`ragtriage monitor`), the TUI monitor screen and
any report call; it returns a `MonitorReport`. A figure without data has `value` None and a
`reason`, never 0. Every definition is in `DEFINITIONS` (shown by `--help` and in the README).
"""

from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.engine import Engine

from ragtriage.store import monitor_sql as sql
from ragtriage.store.db import read_session
from ragtriage.store.gold import gold_ids
from ragtriage.store.log_tables import RequestLogRow, TriageRow
from ragtriage.store.monitor_sql import GroupBy, GroupCounts
from ragtriage.triage import monitor_logged as logged
from ragtriage.triage.monitor_new_docs import first_day_recall
from ragtriage.triage.monitor_replays import rewrite_gains
from ragtriage.wording import quoted

__all__ = ["DEFINITIONS", "FIGURES", "Figure", "MonitorGroup", "MonitorReport", "compute_monitor"]

#: Figure name → its definition (the CLI's --help and the README print these).
DEFINITIONS: dict[str, str] = {
    "empty_result_rate": "requests whose last logged stage (final_context, else reranked, fused, dense, "
    "bm25) is an empty list ÷ requests that logged any stage",
    "rewrite_trigger_rate": "requests whose logged rewrite changed the query (rewritten query ≠ normalized "
    "or raw query, or sub-queries or aliases added) ÷ requests that logged a rewrite",
    "rewrite_gain": "recall@10 with rewriting minus without, from stored replays of the same eval set "
    "version: `eval ablate` runs E (raw + rewritten) − C (raw only), or a run with rewrite off against "
    "the run with it on; grouped by the day the later run finished",
    "rank_shift": "mean over judged chunks of (rank in the logged fused list − rank in the logged "
    "reranked list), + = the rerank moved it up; judged = the gold of confirmed cases, else the cited "
    "chunks of an every-k-th sample of about 500 requests per group (5,000 at most); chunks the rerank cut are "
    "counted apart as dropped",
    "bad_feedback_share": "requests with a bad rating ([logs.flagging] bad_ratings) or an escalation ÷ "
    "all requests; per label: bad-feedback requests confirmed with that primary root-cause label ÷ all "
    "bad-feedback requests; the rest are counted as not labelled, so the per-label counts sum to "
    "the bad-feedback requests",
    "coverage": "confirmed cases whose gold chunk is among the first N logged fused candidates (before "
    "rerank) ÷ confirmed cases with gold that logged a fused list",
    "first_day_recall": "chunks of documents added or updated that day (their updated_at) that any "
    "request retrieved (any logged stage or citation) within 24 h of updated_at ÷ those documents' "
    "chunks; documents whose first 24 h are not over are left out (pending)",
}
FIGURES: tuple[str, ...] = tuple(DEFINITIONS)
#: Requests sampled per group for the rank shift (the gold of confirmed cases is always read),
#: and at most in all.
SAMPLE_PER_GROUP = 500
SAMPLE_MAX = 5000


class Figure(BaseModel):
    """One figure of one group: `value` = `count` ÷ `total` (or a mean), or None with a reason."""

    value: float | None = None
    count: int = 0
    total: int = 0
    reason: str | None = None
    """Why there is no value (`n/a`)."""
    detail: dict[str, Any] = Field(default_factory=dict)


class MonitorGroup(BaseModel):
    """The figures of one day / pipeline_version (or of the whole window: key `all`)."""

    key: str
    requests: int = 0
    figures: dict[str, Figure] = Field(default_factory=dict)
    bad_feedback_by_label: dict[str, Figure] = Field(default_factory=dict)
    bad_feedback_not_labelled: Figure | None = None
    """Bad-feedback requests with no confirmed primary label (unconfirmed, or confirmed without
    one) ÷ all bad-feedback requests: with `bad_feedback_by_label` the counts sum to the total.
    None when the group has no bad-feedback request."""


class MonitorReport(BaseModel):
    """`groups` in key order, `overall` over the window, and the definitions used."""

    by: GroupBy
    since: datetime | None
    until: datetime
    coverage_n: int
    groups: list[MonitorGroup] = Field(default_factory=list)
    overall: MonitorGroup
    definitions: dict[str, str] = Field(default_factory=lambda: dict(DEFINITIONS))
    backfilled: int = 0
    """Requests stored by an earlier version whose monitor columns were computed on this call."""
    elapsed_ms: float = 0.0


def ratio(count: int, total: int, reason: str) -> Figure:
    """`count / total`, or n/a with `reason` when `total` is 0."""
    if total <= 0:
        return Figure(reason=reason)
    return Figure(value=count / total, count=count, total=total)


def _shift_figure(tally: logged.ShiftTally) -> Figure:
    if not tally.shifts:
        if tally.dropped > 1:
            reason = f"the rerank cut all {tally.dropped:,} judged chunks"
        elif tally.dropped:
            reason = "the rerank cut the only judged chunk"
        else:
            reason = "no read request logged both fused and reranked lists containing a gold or cited chunk"
        return Figure(reason=reason, detail={"dropped": tally.dropped})
    moved_up = sum(1 for s in tally.shifts if s > 0)
    return Figure(
        value=sum(tally.shifts) / len(tally.shifts),
        count=len(tally.shifts),
        total=len(tally.shifts) + tally.dropped,
        detail={
            "median": statistics.median(tally.shifts),
            "moved_up": moved_up,
            "moved_down": sum(1 for s in tally.shifts if s < 0),
            "dropped": tally.dropped,
            "requests": tally.requests,
        },
    )


def _days(since: datetime, until: datetime) -> list[str]:
    day, last = since.date(), (until - timedelta(microseconds=1)).date()
    keys = []
    while day <= last:
        keys.append(day.isoformat())
        day += timedelta(days=1)
    return keys


def compute_monitor(
    engine: Engine,
    *,
    by: GroupBy = "day",
    since: datetime | None = None,
    now: datetime | None = None,
    bad_ratings: Sequence[str] = ("down", "thumbs_down", "bad", "-1", "1", "2"),
    coverage_n: int = 30,
    kb: str = "default",
    sample_per_group: int = SAMPLE_PER_GROUP,
) -> MonitorReport:
    """Every figure of `DEFINITIONS` per group and overall for requests with `since` ≤ ts < `now`.

    Raises:
        InputError: `coverage_n` below 1 or an unknown `by`.
    """
    from ragtriage.errors import InputError

    if coverage_n < 1:
        raise InputError(f"--coverage-n must be at least 1, got {coverage_n}")
    if by not in ("day", "version"):
        raise InputError(f"--by {quoted(by)}: use day or version")
    started = time.perf_counter()
    until = now or datetime.now(timezone.utc)
    backfilled = sql.backfill_monitor_columns(engine).rows
    day_keys: list[str] = []
    day_ranges: list[tuple[str, datetime, datetime]] = []
    if by == "day" and since is not None:
        day_keys = _days(since, until)
        for key in day_keys:
            start = datetime.fromisoformat(key).replace(tzinfo=timezone.utc)
            day_ranges.append((key, max(since, start), min(until, start + timedelta(days=1))))
    counts = sql.count_groups(engine, by, since, until, bad_ratings, day_ranges)
    keys = sorted(set(counts) | set(day_keys))
    confirmed = _confirmed(engine, by, since, until, bad_ratings)

    shifts: dict[str, logged.ShiftTally] = defaultdict(logged.ShiftTally)
    covered: dict[str, list[bool]] = defaultdict(list)
    bodies = sql.bodies_of(engine, by, [c[0] for c in confirmed if c[2]])
    for request_id, _label, gold, _bad, _key in confirmed:
        if not gold or request_id not in bodies:
            continue
        group, body = bodies[request_id]
        lists = logged.stage_lists(body)
        shifts[group].add(lists, gold)
        hit = logged.covered_at(lists, gold, coverage_n)
        if hit is not None:
            covered[group].append(hit)
    with_stage = sum(c.with_stage for c in counts.values())
    if keys and with_stage:
        wanted = min(sample_per_group * len(keys), SAMPLE_MAX)
        step = max(1, math.ceil(with_stage / wanted))
        for group, request_id, body in sql.sample_bodies(engine, by, since, until, step, wanted):
            if request_id in bodies:
                continue
            lists = logged.stage_lists(body)
            shifts[group].add(lists, lists.get("citations") or [])

    gains = rewrite_gains(engine, by, since, until)
    recall = first_day_recall(engine, by, since, until, kb=kb, keys=keys)
    by_label: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for _request_id, label, _gold, bad, group in confirmed:
        if bad and label:
            by_label[group][label] += 1

    groups = [
        _make_group(
            key, counts.get(key, GroupCounts()), shifts[key], covered[key], gains, recall, by_label[key], by
        )
        for key in keys
    ]
    total = GroupCounts()
    for item in counts.values():
        for name in vars(total):
            setattr(total, name, getattr(total, name) + getattr(item, name))
    pooled_shift = logged.ShiftTally()
    for tally in shifts.values():
        pooled_shift.merge(tally)
    pooled_labels: dict[str, int] = defaultdict(int)
    for labels in by_label.values():
        for label, count in labels.items():
            pooled_labels[label] += count
    overall = _make_group(
        "all",
        total,
        pooled_shift,
        [hit for hits in covered.values() for hit in hits],
        gains,
        recall,
        pooled_labels,
        by,
    )
    return MonitorReport(
        by=by,
        since=since,
        until=until,
        coverage_n=coverage_n,
        groups=groups,
        overall=overall,
        backfilled=backfilled,
        elapsed_ms=(time.perf_counter() - started) * 1000,
    )


def _no_gain_reason(key: str, by: GroupBy, gains: dict[str, Figure]) -> str:
    """Why a group has no rewrite gain: the gain is per eval-set run, and runs carry no
    pipeline_version, so a version group points at the `all` row, when that row has one."""
    no_pair = "no pair of replays with and without rewriting (run `ragtriage eval ablate`)"
    if by != "version" or key == "all":
        return no_pair
    if "all" in gains:
        return "eval runs carry no pipeline_version; see the `all` row"
    return f"eval runs carry no pipeline_version, and there is {no_pair}"


def _make_group(
    key: str,
    counts: GroupCounts,
    shift: logged.ShiftTally,
    covered: list[bool],
    gains: dict[str, Figure],
    recall: dict[str, Figure],
    labels: dict[str, int],
    by: GroupBy,
) -> MonitorGroup:
    no_requests = "no stored request in this group"
    figures = {
        "empty_result_rate": ratio(
            counts.empty,
            counts.with_stage,
            no_requests if not counts.requests else "no request logged a stage",
        ),
        "rewrite_trigger_rate": ratio(
            counts.rewrite_fired,
            counts.with_rewrite,
            no_requests if not counts.requests else "no request logged a rewrite",
        ),
        "rewrite_gain": gains.get(key) or Figure(reason=_no_gain_reason(key, by, gains)),
        "rank_shift": _shift_figure(shift) if counts.requests else Figure(reason=no_requests),
        "bad_feedback_share": ratio(counts.bad, counts.requests, no_requests),
        "coverage": ratio(
            sum(covered),
            len(covered),
            "no confirmed case with gold chunks whose request logged a fused list "
            "(mark gold and confirm cases: `ragtriage label REQUEST_ID LABEL --gold CHUNK_ID`, "
            "`ragtriage confirm REQUEST_ID`)",
        ),
        "first_day_recall": recall.get(key)
        or Figure(reason="no document was added or updated in this group"),
    }
    bad_labels = {
        label: Figure(value=count / counts.bad, count=count, total=counts.bad)
        for label, count in sorted(labels.items())
        if counts.bad
    }
    rest = max(0, counts.bad - sum(labels.values()))
    not_labelled = Figure(value=rest / counts.bad, count=rest, total=counts.bad) if counts.bad else None
    return MonitorGroup(
        key=key,
        requests=counts.requests,
        figures=figures,
        bad_feedback_by_label=bad_labels,
        bad_feedback_not_labelled=not_labelled,
    )


def _confirmed(
    engine: Engine, by: GroupBy, since: datetime | None, until: datetime | None, bad_ratings: Sequence[str]
) -> list[tuple[str, str | None, list[str], bool, str]]:
    """`(request_id, primary label, gold ids, bad feedback, group)` of confirmed triage records."""
    triage = TriageRow.__table__  # type: ignore[attr-defined]
    requests = RequestLogRow.__table__  # type: ignore[attr-defined]
    statement = (
        select(
            triage.c.request_id,
            triage.c.primary_label,
            triage.c.gold_chunk_ids,
            sql.bad_feedback(bad_ratings),
            sql.group_key(engine, by),
        )
        .join(requests, requests.c.request_id == triage.c.request_id)
        .where(triage.c.status == "confirmed", *sql.window(since, until))
    )
    with read_session(engine) as session:
        return [
            (row[0], row[1], gold_ids(row[2] or []), bool(row[3]), str(row[4]))
            for row in session.execute(statement)
        ]
