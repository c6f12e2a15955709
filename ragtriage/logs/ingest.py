"""Ingest request logs and traces into the triage store: in this process, streaming, idempotent.

Each file's lines are read and parsed one by one (`reader.parse_line`; trace files are first
assembled into one request line per trace, `formats.read`) and written in batches of
`batch_size` lines, each in one short `BEGIN IMMEDIATE` transaction, so memory stays constant
and a triager can write in between. Every line read is counted exactly once:

    read = ingested + merged + duplicates + conflicts + quarantined + blank

A request_id seen again is combined with the stored request by `merge.merge_request`: a line that
adds facts (feedback, annotations, scores, a stage the stored one lacks) is merged in (`log_merge`
keeps which line added what) and the flagging rules run again on the merged request; a line that
adds nothing is a duplicate (nothing changes); a line that differs in a field both have is a
conflict (the stored request is kept, the line goes to `log_conflict`). Feedback whose trace is
not in the ingest (`formats.assemble.Late`) is merged into the stored request its trace or root
span id names, or quarantined as `orphan_feedback`. Ctrl-C rolls back the batch being written: the
batches before it are stored, and ingesting the same files again finishes the job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, Field
from sqlalchemy.engine import Connection, Engine

from ragtriage.config.settings import FlaggingSettings, OtelSettings
from ragtriage.errors import InputError, LogFormatError
from ragtriage.logs import owners
from ragtriage.logs.flagging import FlagRules, reason_key
from ragtriage.logs.formats.assemble import Late
from ragtriage.logs.formats.detect import PlannedFile, plan_files
from ragtriage.logs.formats.read import NumberedLine, trace_lines
from ragtriage.logs.formats.tables import iter_csv_rows, iter_parquet_rows
from ragtriage.logs.line_files import iter_raw_lines, read_document
from ragtriage.logs.log_line import BadLine, LogLine, document_error
from ragtriage.logs.merge import Merge, merge_request
from ragtriage.logs.reader import parse_line
from ragtriage.store import ingest_sql

ProgressCallback = Callable[[int, int | None], None]


class IngestReport(BaseModel):
    """What one ingest did. `read` always equals the sum of the six outcomes."""

    files: list[str] = Field(default_factory=list)
    formats: dict[str, str] = Field(default_factory=dict)
    """The format each file was read in (`v1`, `flat`, `parquet`, `csv`, `otlp`, …), by file as given."""
    read: int = 0
    ingested: int = 0
    flagged: int = 0
    """Requests that entered the triage queue (new records, incl. earlier requests flagged as followed up)."""
    flagged_by_reason: dict[str, int] = Field(default_factory=dict)
    """`flagged` by why: each request under its reasons joined with `+` in `flagging.REASONS` order
    (`bad_rating`, `bad_rating+escalated`, `empty_citations`, …), so the counts add up to `flagged`."""
    merged: int = 0
    """Lines that added facts to a request already stored (or read earlier in this ingest):
    feedback, annotations, scores, stages it lacked."""
    duplicates: int = 0
    conflicts: int = 0
    quarantined: int = 0
    blank: int = 0
    recovered: int = 0
    """Ingested lines that were not UTF-8 and were decoded as GB18030."""
    quarantined_by_kind: dict[str, int] = Field(default_factory=dict)
    files_without_requests: list[str] = Field(default_factory=list)
    """Non-empty files that held no readable request (every line quarantined or blank; trace files
    are judged together): an ingest that read nothing usable from a file is a failure."""
    broken_documents: list[str] = Field(default_factory=list)
    """Files that start as one JSON document but do not parse (cut short, most often): each is one
    quarantined line naming the byte where it breaks, nothing in it is read, and it is listed in
    `files_without_requests` too (the trace files read with it are not blamed for it)."""
    stopped: bool = False
    seconds: float = 0.0

    def reconciles(self) -> bool:
        """True when every line read is accounted for exactly once."""
        return self.read == (
            self.ingested + self.merged + self.duplicates + self.conflicts + self.quarantined + self.blank
        )


def ingest_files(
    engine: Engine,
    paths: Sequence[Path],
    *,
    flagging: FlaggingSettings | None = None,
    strict: bool = False,
    batch_size: int = 10_000,
    on_progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
    log_format: str = "auto",
    otel: OtelSettings | None = None,
) -> IngestReport:
    """Ingest request logs and traces. `on_progress(lines_read, None)` is called after every batch.

    `log_format`: `auto` tells each file's format by its content (`formats.detect`), anything
    else names the format of every file. Schema v1 and the flat form are JSONL / JSONL.gz (or one
    JSON document of records), or Parquet / CSV exports read row by row; OTLP, Phoenix and
    Langfuse files are read together, mapped with `otel` (a trace's spans may be in several of
    them), and count one trace as one line. Every file is planned before anything is stored. A
    non-empty file that held no readable request is listed in `report.files_without_requests`
    (the CLI exits non-zero). `batch_size`: lines per write transaction.

    Raises:
        LogFormatError: strict mode and a bad line; the lines before it are stored.
        InputError: a file is missing, its gzip stream is corrupt, or its content matches no format.
    """
    planned = plan_files(paths, log_format)
    report = IngestReport(files=[str(p) for p in paths], formats={str(p.path): p.format for p in planned})
    started = time.perf_counter()
    ingest_sql.ensure_ingest_indexes(engine)
    writer = _Writer(
        engine, flagging or FlaggingSettings(), report, strict, batch_size, on_progress, should_stop
    )
    try:
        traces = [p for p in planned if p.is_trace and p.layout != "broken"]
        broken_traces = [str(p.path) for p in planned if p.is_trace and p.layout == "broken"]
        requests = 0
        specs = [(p.path, p.format, p.layout) for p in traces]
        for path, numbered in trace_lines(specs, otel or OtelSettings()) if traces else ():
            if broken_traces:
                numbered = _missing_from(numbered, broken_traces)
            requests += writer.ingest(str(path.resolve()), str(path), numbered)
            if report.stopped:
                return report
        report.broken_documents = [str(p.path) for p in planned if p.layout == "broken"]
        if traces and requests == 0 and not any(p.is_trace for p in planned if p.layout == "broken"):
            # One trace's spans and scores may sit in different files: judged together (when one
            # of them is cut short, the traces missing its spans are its fault, not theirs).
            report.files_without_requests.extend(str(p.path) for p in traces if _non_empty(p.path))
        for plan in planned:
            if plan.is_trace and plan.layout != "broken":
                continue
            requests = writer.ingest(str(plan.path.resolve()), str(plan.path), _numbered_lines(plan))
            if report.stopped:
                break
            if requests == 0 and _non_empty(plan.path):
                report.files_without_requests.append(str(plan.path))
    finally:
        report.seconds = round(time.perf_counter() - started, 3)
    return report


def ingest_lines(
    engine: Engine,
    lines: Iterable[bytes | str],
    *,
    source: str = "<memory>",
    flagging: FlaggingSettings | None = None,
    strict: bool = False,
    batch_size: int = 10_000,
) -> IngestReport:
    """Ingest log lines given in memory (tests, generators); `source` names them in messages."""
    report = IngestReport(files=[source])
    started = time.perf_counter()
    ingest_sql.ensure_ingest_indexes(engine)
    numbered = (
        (line_no, line.encode("utf-8") if isinstance(line, str) else line, False)
        for line_no, line in enumerate(lines, start=1)
    )
    _Writer(engine, flagging or FlaggingSettings(), report, strict, batch_size, None, None).ingest(
        source, source, numbered
    )
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def _non_empty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _missing_from(numbered: Iterable[NumberedLine], broken: list[str]) -> Iterator[NumberedLine]:
    """`numbered` with each rejected trace's fix naming the trace files of the ingest that were not
    read (`broken`): what the trace lacks may be in them."""
    names = ", ".join(broken)
    for line_no, raw, unterminated in numbered:
        if isinstance(raw, BadLine) and raw.kind != "invalid_json":
            raw.fix += (
                f"; or what it lacks was in {names}, not read (see its error): ingest again once it is whole"
            )
        yield line_no, raw, unterminated


def _numbered_lines(plan: PlannedFile) -> Iterator[NumberedLine]:
    """The records of a request-log or table file as numbered lines."""
    if plan.format == "parquet":
        return iter_parquet_rows(plan.path)
    if plan.format == "csv":
        return iter_csv_rows(plan.path)
    if plan.layout in ("document", "broken"):
        return _document_lines(plan.path)
    return iter_raw_lines(plan.path)


def _document_lines(path: Path) -> Iterator[NumberedLine]:
    """A whole JSON document of request-log records (an object, an array, or a `{"data": [...]}`
    page) as numbered lines: record N is line N. A document that does not parse is one bad line
    (`document_error`).

    Raises:
        InputError: the file cannot be read.
    """
    text = read_document(path)
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        yield 1, document_error(text, error), False
        return
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        document = document["data"]
    records = document if isinstance(document, list) else [document]
    for number, record in enumerate(records, start=1):
        yield number, orjson.dumps(record), False


@dataclass
class _Batch:
    """Lines parsed since the last write."""

    lines: list[LogLine] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    late: list[Late] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.lines) + len(self.bad) + len(self.late)


@dataclass
class _Classified:
    """A batch's lines against the store: new requests, merged ones, conflicting lines."""

    new: dict[str, LogLine] = field(default_factory=dict)
    merged: dict[str, LogLine] = field(default_factory=dict)
    """Stored requests (by id) with what later lines added, as the line of the merged body."""
    provenance: list[tuple[str, int, list[str]]] = field(default_factory=list)
    """`(request_id, line, paths added)` of every merging line."""
    conflicts: list[LogLine] = field(default_factory=list)


@dataclass
class _Writer:
    """Parses numbered lines and writes them a batch per transaction, counting into `report`."""

    engine: Engine
    flagging: FlaggingSettings
    report: IngestReport
    strict: bool
    batch_size: int
    on_progress: ProgressCallback | None
    should_stop: Callable[[], bool] | None
    rules: FlagRules = field(init=False)
    late_merged: int = 0
    """Late feedback items merged into a stored request so far."""

    def __post_init__(self) -> None:
        self.rules = FlagRules(self.flagging)

    def ingest(self, source: str, display: str, numbered: Iterable[NumberedLine]) -> int:
        """Store the lines of one file (`source` is stored with them, `display` names the file in
        messages); the number of valid requests read. Sets `report.stopped` when `should_stop`
        asked to stop between two batches.

        Raises:
            LogFormatError: strict mode and a bad line (the lines before it are stored).
            InputError: an unreadable gzip tail (the lines before it are stored).
        """
        report = self.report
        batch = _Batch()
        requests = 0
        late_before = self.late_merged
        try:
            for line_no, raw, unterminated in numbered:
                report.read += 1
                if isinstance(raw, Late):
                    batch.late.append(raw)
                    if len(batch) >= self.batch_size:
                        self._write(source, batch)
                        batch = _Batch()
                    continue
                parsed = (
                    raw if isinstance(raw, BadLine) else parse_line(raw, line_no, unterminated=unterminated)
                )
                if parsed is None:
                    report.blank += 1
                    continue
                if isinstance(parsed, LogLine):
                    batch.lines.append(parsed)
                    requests += 1
                elif self.strict:
                    self._write(source, batch)
                    good = len(batch.lines)
                    stored = f" ({good} valid {'line' if good == 1 else 'lines'} before it in this batch were stored;"
                    raise LogFormatError(
                        parsed.describe(display)
                        + (stored if good else " (")
                        + " ingest is idempotent: fix the line and re-run)"
                    )
                else:
                    batch.bad.append(parsed)
                if len(batch) >= self.batch_size:
                    self._write(source, batch)
                    batch = _Batch()
                    if self.should_stop is not None and self.should_stop():
                        report.stopped = True
                        return requests + self.late_merged - late_before
        except InputError:
            self._write(source, batch)  # a corrupt gzip tail must not lose the lines before it
            raise
        self._write(source, batch)
        return requests + self.late_merged - late_before

    def _write(self, source: str, batch: _Batch) -> None:
        """Store one batch in one transaction and count it; then report progress."""
        if batch:
            with ingest_sql.ingest_transaction(self.engine) as connection:
                refused = self._store(connection, source, batch)
            if refused is not None:
                raise LogFormatError(
                    refused.describe(source) + " (the batch without it was stored; ingest is idempotent: "
                    "fix it and re-run)"
                )
        if self.on_progress is not None:
            self.on_progress(self.report.read, None)

    def _store(self, connection: Connection, source: str, batch: _Batch) -> BadLine | None:
        """Store one batch and count it; in strict mode, the first late feedback that names no
        stored request is left out and returned (the caller raises once the batch is committed)."""
        report = self.report
        now = datetime.now(timezone.utc)
        keys = {key for item in batch.late for key in item.keys}
        keys |= {key for line in batch.lines for key in line.trace_keys if key.startswith("trace:")}
        traced = ingest_sql.requests_of_traces(connection, sorted(keys)) if keys else {}
        candidates = owners.late_owners(traced, batch.late)
        lines = [owners.known_as(line, traced) for line in batch.lines]
        timed = [
            (line.session, line.ts) for line in lines if line.session is not None and line.ts is not None
        ]
        stored, neighbours = ingest_sql.stored_for_batch(
            connection,
            [line.request_id for line in lines]
            + [rid for ids in candidates for rid in ids]
            + [traced[key] for line in lines for key in line.trace_keys if key in traced],
            sorted({session for session, _ in timed}),
            _windows([ts for _, ts in timed], self.flagging.follow_up_minutes),
        )
        renames = owners.renames(lines, traced, stored)
        late_lines, orphans = owners.late_lines(batch.late, candidates, stored)
        self.late_merged += len(late_lines)
        refused = orphans[0] if self.strict and orphans else None
        if refused is not None:
            orphans = []
        bad = batch.bad + orphans
        found = self._classify(lines + late_lines, stored, {new for _, new, _ in renames})
        merged = [line for rid, line in found.merged.items() if rid not in found.new]
        new = list(found.new.values())
        reasons, earlier = self.rules.flags(new + merged, neighbours)
        ts_of = {line.request_id: line.ts for line in new + merged}
        new_ids = set(found.new)
        flagged = ingest_sql.write_batch(
            connection,
            requests=[_request_row(line, source, now) for line in new],
            flags=[(rid, r, ts_of[rid]) for rid, r in reasons.items() if r and rid in new_ids],
            followed_up=dict(earlier),
            conflicts=[(line.request_id, source, line.line_no, line.body) for line in found.conflicts],
            quarantine=[(source, b.line_no, b.kind, f"{b.message} — {b.fix}", b.raw) for b in bad],
            now=now,
            merged=[
                (_merged_row(found.merged[rid]), source, line_no, added)
                for rid, line_no, added in found.provenance
            ],
            reflagged=[(rid, r, ts_of[rid]) for rid, r in reasons.items() if r and rid not in new_ids],
            trace_keys=[(key, line.request_id) for line in new + merged for key in line.trace_keys],
            renames=renames,
        )
        report.ingested += len(new)
        report.recovered += sum(line.recovered for line in new)
        report.conflicts += len(found.conflicts)
        report.quarantined += len(bad)
        report.flagged += len(flagged)
        _add_counts(report.flagged_by_reason, [reason_key(r) for r in flagged])
        _add_counts(report.quarantined_by_kind, [b.kind for b in bad])
        return refused

    def _classify(self, lines: list[LogLine], stored: Mapping[str, str], renamed: set[str]) -> _Classified:
        """Each line against the stored request of its id, or the one earlier in the batch
        (`merge.merge_request`): new, merged, a duplicate (counted in the report) or a conflict."""
        # Bytes on both sides: the same line ingested again is equal without being parsed.
        known = {request_id: body.encode("utf-8") for request_id, body in stored.items()}
        found = _Classified()
        renamed = set(renamed)
        for line in lines:
            body = known.get(line.request_id)
            if body is None:
                known[line.request_id] = line.body
                found.new[line.request_id] = line
                continue
            merge = merge_request(body, line.body)
            if line.request_id in renamed and merge.outcome == "duplicate":
                # The stored request now under its own id: its body says so too.
                merge = Merge("merged", body=body, added=["request_id"])
            renamed.discard(line.request_id)
            if merge.outcome == "duplicate":
                self.report.duplicates += 1
            elif merge.outcome == "conflict" or merge.body is None:
                found.conflicts.append(line)
            else:
                merged = parse_line(merge.body, line.line_no)
                if not isinstance(merged, LogLine):  # a merge of two valid requests validates
                    found.conflicts.append(line)
                    continue
                merged.recovered = line.recovered
                known[line.request_id] = merge.body
                if line.request_id in found.new:
                    found.new[line.request_id] = merged
                found.merged[line.request_id] = merged
                found.provenance.append((line.request_id, line.line_no, merge.added))
                self.report.merged += 1
        return found


def _merged_row(line: LogLine) -> dict[str, Any]:
    """The `request_log` columns a merge may change (not where the request was first read)."""
    row = _request_row(line, None, datetime.now(timezone.utc))
    for kept in ("source_file", "source_line", "recovered", "ingested_at"):
        row.pop(kept)
    return row


def _windows(times: list[datetime], minutes: float) -> list[tuple[datetime, datetime]]:
    """The follow-up windows around `times`, overlapping ones merged: logs come in time order, so
    a batch is one or a few stretches of the time index."""
    if minutes <= 0:
        return []
    window = timedelta(minutes=minutes)
    stretches: list[list[datetime]] = []
    for moment in sorted(set(times)):
        if stretches and moment - window <= stretches[-1][1]:
            stretches[-1][1] = moment + window
        else:
            stretches.append([moment - window, moment + window])
    return [(low, high) for low, high in stretches]


def _request_row(line: LogLine, source: str | None, now: datetime) -> dict[str, Any]:
    return {
        "request_id": line.request_id,
        "ts": line.ts,
        "kb": line.kb,
        "session_hash": line.session,
        "user_hash": line.user,
        "raw_query": line.raw_query,
        "rating": line.rating,
        "escalated": line.escalated,
        "body": line.body.decode("utf-8"),
        "source_file": source,
        "source_line": line.line_no,
        "recovered": line.recovered,
        "ingested_at": now,
        "pipeline_version": line.pipeline_version,
        "result_count": line.result_count,
        "rewrite_fired": line.rewrite_fired,
    }


def _add_counts(totals: dict[str, int], keys: list[str]) -> None:
    for key in keys:
        totals[key] = totals.get(key, 0) + 1
