"""Retrieval health from the stored logs and triage records, per day or per `pipeline_version`.

`compute_monitor` is the headless core the CLI (`ragtriage monitor`), the TUI monitor screen and
any report call; it returns a `MonitorReport`. A figure without data has `value` None and a
`reason`, never 0. Every definition is in `DEFINITIONS` (shown by `--help` and in the README).
Its SQL is in `store.monitor_sql`: counts run on a covering index, and only the few requests a
figure must look inside (confirmed cases, a bounded sample, requests that mention a new
document's chunk ids) have their bodies read here.

Rewrite gain comes from stored replays: a pair of complete eval runs on the same dataset version
that differ only in rewriting (the `eval ablate` runs `ablate:E` and `ablate:C`, or a run with
`rewrite_mode = "off"` and one with the same config hash and options otherwise), the later run's
finish day being the group; logged requests carry no replay with rewriting off. First-day recall:
for each document added or updated (its `updated_at`), the share of its published chunks that any
request retrieved within 24 hours; SQL keeps only requests whose body mentions the ids' common
prefix (or one of the ids when they share none), Python checks the stage lists exactly, and a
document whose first day is over is kept in `monitor_doc_recall` (computed again if logs for that
day arrive later).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Union

import msgspec
import orjson
from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from ragtriage.errors import InputError
from ragtriage.logs.log_line import NO_STAGE_LOGGED, request_facts
from ragtriage.logs.schema import STAGE_NAMES, RequestLog, map_flat_form
from ragtriage.store import eval_repo
from ragtriage.store import monitor_sql as sql
from ragtriage.store.eval_tables import EvalRunRow
from ragtriage.store.kb_repo import as_utc
from ragtriage.store.monitor_sql import GroupBy, GroupCounts
from ragtriage.wording import plural, quoted

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
FIRST_DAY = timedelta(days=1)
#: A common prefix shorter than this matches too much to be a useful filter: each id is searched.
MIN_PREFIX = 4
GAIN_METRICS = ("recall@10", "recall@5", "mrr")


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


def _shift_figure(tally: ShiftTally) -> Figure:
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
    if coverage_n < 1:
        raise InputError(f"--coverage-n must be at least 1, got {coverage_n}")
    if by not in ("day", "version"):
        raise InputError(f"--by {quoted(by)}: use day or version")
    started = time.perf_counter()
    until = now or datetime.now(timezone.utc)
    backfilled = backfill_monitor_columns(engine)
    day_keys: list[str] = []
    day_ranges: list[tuple[str, datetime, datetime]] = []
    if by == "day" and since is not None:
        day_keys = _days(since, until)
        for key in day_keys:
            start = datetime.fromisoformat(key).replace(tzinfo=timezone.utc)
            day_ranges.append((key, max(since, start), min(until, start + timedelta(days=1))))
    counts = sql.count_groups(engine, by, since, until, bad_ratings, day_ranges)
    keys = sorted(set(counts) | set(day_keys))
    confirmed = sql.confirmed_cases(engine, by, since, until, bad_ratings)

    shifts: dict[str, ShiftTally] = defaultdict(ShiftTally)
    covered: dict[str, list[bool]] = defaultdict(list)
    bodies = sql.bodies_of(engine, by, [c[0] for c in confirmed if c[2]])
    for request_id, _label, gold, _bad, _key in confirmed:
        if not gold or request_id not in bodies:
            continue
        group, body = bodies[request_id]
        lists = stage_lists(body)
        shifts[group].add(lists, gold)
        hit = covered_at(lists, gold, coverage_n)
        if hit is not None:
            covered[group].append(hit)
    with_stage = sum(c.with_stage for c in counts.values())
    if keys and with_stage:
        wanted = min(sample_per_group * len(keys), SAMPLE_MAX)
        step = max(1, math.ceil(with_stage / wanted))
        for group, request_id, body in sql.sample_bodies(engine, by, since, until, step, wanted):
            if request_id in bodies:
                continue
            lists = stage_lists(body)
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
    pooled_shift = ShiftTally()
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
    shift: ShiftTally,
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


class _Item(msgspec.Struct):
    chunk_id: str | None = None
    id: str | None = None
    doc_id: str | None = None


_Stage = Union[list[Union[str, _Item]], None]


class _Stages(msgspec.Struct):
    bm25: _Stage = None
    dense: _Stage = None
    fused: _Stage = None
    reranked: _Stage = None
    final_context: _Stage = None


class _Lists(msgspec.Struct):
    """Only the lists of a v1 body (msgspec skips every other field in C)."""

    stages: _Stages | None = None
    citations: _Stage = None


_DECODER = msgspec.json.Decoder(_Lists)
_FLAT_MARKERS = (b'"bm25_results"', b'"vector_results"', b'"dense_results"', b'"fused_results"')


def stage_lists(body: str | bytes) -> dict[str, list[str]]:
    """Chunk ids per logged stage (`bm25`, `dense`, `fused`, `reranked`, `final_context`) and
    `citations`, flat form mapped; a stage that was not logged is absent, a bad body gives {}."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    if not any(marker in raw for marker in _FLAT_MARKERS):
        try:
            decoded = _DECODER.decode(raw)
        except msgspec.DecodeError:
            pass  # an unusual shape (numeric ids, …): the general path below
        else:
            lists: dict[str, list[str]] = {}
            stages = decoded.stages
            for name in STAGE_NAMES:
                items = getattr(stages, name) if stages is not None else None
                if items is not None:
                    lists[name] = [_fast_id(item) for item in items]
            if decoded.citations is not None:
                lists["citations"] = [_fast_id(item) for item in decoded.citations]
            return lists
    return _general_lists(body)


def _fast_id(item: str | _Item) -> str:
    if isinstance(item, str):
        return item
    return item.chunk_id or item.id or item.doc_id or ""


def _general_lists(body: str | bytes) -> dict[str, list[str]]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(data, dict):
        return {}
    data = map_flat_form(data)
    stages = data.get("stages")
    if not isinstance(stages, dict):
        stages = {}
    lists: dict[str, list[str]] = {}
    for name, items in [*((s, stages.get(s)) for s in STAGE_NAMES), ("citations", data.get("citations"))]:
        if isinstance(items, list):
            lists[name] = [_chunk_id(item) for item in items if _chunk_id(item)]
    return lists


def _chunk_id(item: Any) -> str:
    if isinstance(item, dict):
        value = item.get("chunk_id", item.get("id", item.get("doc_id")))
        return "" if value is None else str(value)
    return "" if item is None else str(item)


@dataclass
class ShiftTally:
    """Rank shifts (fused rank − reranked rank; positive = the rerank moved the chunk up)."""

    shifts: list[int] = field(default_factory=list)
    dropped: int = 0
    """Judged chunks in the fused list but not in the reranked list."""
    requests: int = 0
    """Requests that contributed a pair or a drop."""

    def add(self, lists: dict[str, list[str]], judged: Sequence[str]) -> None:
        """Add the judged chunks of one request (gold, else its citations)."""
        fused, reranked = lists.get("fused"), lists.get("reranked")
        if not fused or not reranked:
            return
        before = _first_ranks(fused)
        after = _first_ranks(reranked)
        counted = False
        for chunk_id in dict.fromkeys(judged):
            if chunk_id not in before:
                continue
            counted = True
            if chunk_id in after:
                self.shifts.append(before[chunk_id] - after[chunk_id])
            else:
                self.dropped += 1
        self.requests += counted

    def merge(self, other: ShiftTally) -> None:
        """Pool another tally into this one."""
        self.shifts.extend(other.shifts)
        self.dropped += other.dropped
        self.requests += other.requests


def _first_ranks(ids: Sequence[str]) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for rank, chunk_id in enumerate(ids, start=1):
        ranks.setdefault(chunk_id, rank)
    return ranks


def covered_at(lists: dict[str, list[str]], gold: Iterable[str], n: int) -> bool | None:
    """Whether a gold chunk is among the first `n` fused candidates (before rerank); None when the
    request logged no fused list (then it says nothing about coverage)."""
    fused = lists.get("fused")
    if fused is None:
        return None
    first = set(list(dict.fromkeys(fused))[:n])
    return any(chunk_id in first for chunk_id in gold)


def retrieved_ids(lists: dict[str, list[str]]) -> set[str]:
    """Every chunk id a request retrieved at any logged stage (citations included)."""
    return {chunk_id for ids in lists.values() for chunk_id in ids}


def common_prefix(ids: Sequence[str]) -> str:
    """The longest common prefix of `ids` ('' for none)."""
    if not ids:
        return ""
    low, high = min(ids), max(ids)
    size = 0
    while size < min(len(low), len(high)) and low[size] == high[size]:
        size += 1
    return low[:size]


def _finished(run: EvalRunRow) -> datetime | None:
    return as_utc(run.finished_at) if run.finished_at is not None else None


def _pairs(runs: list[EvalRunRow]) -> list[tuple[EvalRunRow, EvalRunRow]]:
    """(with rewriting, without) pairs, newest first; each run in at most one pair."""
    complete = [r for r in runs if r.status == "complete"]
    pairs: list[tuple[EvalRunRow, EvalRunRow]] = []
    by_version: dict[tuple[str, int], dict[str, EvalRunRow]] = defaultdict(dict)
    for run in complete:  # newest first: the first run of a name per version wins
        if run.name in ("ablate:C", "ablate:E"):
            by_version[(run.dataset, run.dataset_version)].setdefault(run.name, run)
    for found in by_version.values():
        if "ablate:C" in found and "ablate:E" in found:
            pairs.append((found["ablate:E"], found["ablate:C"]))
    for off in complete:
        options: dict[str, Any] = dict(off.run_options or {})
        if options.pop("rewrite_mode", None) != "off":
            continue
        for on in complete:
            if (
                on.id != off.id
                and on.dataset == off.dataset
                and on.dataset_version == off.dataset_version
                and on.config_hash == off.config_hash
                and dict(on.run_options or {}) == options
            ):
                pairs.append((on, off))
                break
    return pairs


def rewrite_gains(
    engine: Engine, by: sql.GroupBy, since: datetime | None, until: datetime
) -> dict[str, Figure]:
    """Group key (a day; by version only `all`) → mean gain over the pairs finished in the window."""
    gains: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
    for with_rewrite, without in _pairs(eval_repo.list_runs(engine)):
        finished = max(filter(None, (_finished(with_rewrite), _finished(without))), default=None)
        if finished is None or finished >= until or (since is not None and finished < since):
            continue
        on = (with_rewrite.aggregates or {}).get("means", {})
        off = (without.aggregates or {}).get("means", {})
        metric = next((m for m in GAIN_METRICS if on.get(m) is not None and off.get(m) is not None), None)
        if metric is None:
            continue
        entry = (float(on[metric]) - float(off[metric]), metric, f"{with_rewrite.id}-{without.id}")
        if by == "day":
            gains[finished.date().isoformat()].append(entry)
        gains["all"].append(entry)
    return {
        key: Figure(
            value=sum(g for g, _, _ in entries) / len(entries),
            count=len(entries),
            total=len(entries),
            detail={"metric": entries[0][1], "run_pairs": [pair for _, _, pair in entries]},
        )
        for key, entries in gains.items()
    }


def _needles(chunk_ids: Sequence[str]) -> list[str]:
    """What a body mentioning one of `chunk_ids` contains: their common prefix, else each id as a
    JSON string; both as logged raw and with `\\u` escapes (a logger with ensure_ascii)."""
    prefix = common_prefix(chunk_ids)
    if len(prefix) >= MIN_PREFIX:
        return sorted({prefix, json.dumps(prefix)[1:-1]})
    return sorted({form for c in chunk_ids for form in (json.dumps(c, ensure_ascii=False), json.dumps(c))})


def _scan(engine: Engine, start: datetime, end: datetime, chunk_ids: Sequence[str]) -> set[str]:
    """The chunk ids some request in [start, end) retrieved; stops once all were seen."""
    wanted, found = set(chunk_ids), set()
    with closing(sql.mentioning(engine, "day", start, end, _needles(chunk_ids))) as rows:
        for _group, body in rows:
            found |= retrieved_ids(stage_lists(body)) & wanted
            if found == wanted:
                break
    return found


def document_recall(
    engine: Engine, kb: str, doc_id: str, updated_at: datetime, chunk_ids: list[str], mark: int | None
) -> set[str]:
    """The chunks of a document (first day over) retrieved in its first day, from the cache when
    nothing was ingested since (`mark`) or the window still holds as many requests."""
    end = updated_at + FIRST_DAY
    cached = sql.cached_doc_recall(engine, doc_id, kb)
    same = (
        cached is not None
        and as_utc(cached.updated_at) == updated_at
        and sorted(cached.chunk_ids) == chunk_ids
    )
    if cached is not None and same and mark is not None and cached.store_mark == mark:
        return {str(c) for c in cached.found}
    count = sql.count_window(engine, updated_at, end)
    if cached is not None and same and cached.window_requests == count:
        found = {str(c) for c in cached.found}
    else:
        found = _scan(engine, updated_at, end, chunk_ids) if count else set()
    sql.save_doc_recall(engine, kb, doc_id, updated_at, count, mark, chunk_ids, found)
    return found


def first_day_recall(
    engine: Engine,
    by: sql.GroupBy,
    since: datetime | None,
    until: datetime,
    *,
    kb: str,
    keys: Sequence[str] = (),
) -> dict[str, Figure]:
    """Group key (and `all`) → first-day recall, grouped by the day of `updated_at`. By version
    only `all` has a value: a document's first day is one window, whatever version served it."""
    documents = [d for d in sql.new_documents(engine, since, until, kb) if d[2]]
    chunks_by_day: dict[str, int] = defaultdict(int)
    found_by_day: dict[str, int] = defaultdict(int)
    docs_by_day: dict[str, int] = defaultdict(int)
    pending_by_day: dict[str, int] = defaultdict(int)
    mark = sql.store_mark(engine)
    for doc_id, updated_at, chunk_ids in documents:
        day = updated_at.date().isoformat()
        if updated_at + FIRST_DAY > until:
            pending_by_day[day] += 1
            continue
        chunks_by_day[day] += len(chunk_ids)
        docs_by_day[day] += 1
        found_by_day[day] += len(document_recall(engine, kb, doc_id, updated_at, chunk_ids, mark))
    for counter in (chunks_by_day, found_by_day, docs_by_day, pending_by_day):
        counter["all"] = sum(counter.values())
    figures: dict[str, Figure] = {}
    groups = sorted(set(chunks_by_day) | set(pending_by_day)) if by == "day" else ["all"]
    for key in groups:
        if chunks_by_day[key] == 0:
            waiting = pending_by_day[key]
            reason = (
                f"{plural(waiting, 'new document')} still in their first 24 h"
                if waiting
                else "no document was added or updated in this group"
            )
            figures[key] = Figure(reason=reason, detail={"pending": waiting})
            continue
        figures[key] = Figure(
            value=found_by_day[key] / chunks_by_day[key],
            count=found_by_day[key],
            total=chunks_by_day[key],
            detail={"documents": docs_by_day[key], "pending": pending_by_day[key]},
        )
    for key in keys if by == "version" else ():
        figures[key] = Figure(reason="counted per document, not per pipeline_version; see the `all` row")
    return figures


def backfill_monitor_columns(engine: Engine, batch: int = 5000) -> int:
    """Compute the monitor columns of requests stored before they existed; returns how many."""
    done = 0
    while rows := sql.bodies_missing_columns(engine, batch):
        updates: list[tuple[str, str | None, int, bool | None]] = []
        for request_id, body in rows:
            try:
                record = RequestLog.model_validate_json(body)
            except ValueError:
                # Stored before validation got stricter: counted as logging no stage, never retried.
                updates.append((request_id, None, NO_STAGE_LOGGED, None))
                continue
            count, fired = request_facts(record.raw_query, record.rewrite, record.stages)
            updates.append((request_id, record.pipeline_version, count, fired))
        sql.set_monitor_columns(engine, updates)
        done += len(updates)
    return done
