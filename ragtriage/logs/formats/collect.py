"""Group spans by trace across lines and files, in bounded memory.

Spans of one trace may sit on different lines or in different files of one ingest (the Collector
writes batches as they come and rotates files), and feedback may arrive long after the trace. So
no trace is complete before the input ends: spans are kept in memory up to `memory_spans`, then
spilled to a temporary SQLite file, one row per trace and spill (its spans packed together), and
read back grouped by trace id (one index, one ordered scan). Memory is bounded by `memory_spans`
plus the largest single trace.

A spill row also holds the `digest` of its spans (the assembled request): when the row turns out
to hold all of its trace's spans and no note names the trace, which is the usual case, the digest
is the result and the spans are not read back. So the assembly happens where the spans are read,
in parallel when several processes read (`formats.parallel`).

Several processes may spill into one file (`formats.parallel`): each opens it with `attach`, numbers
its spans from the `order` of the piece of input it reads, and commits each spill on its own.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from ragtriage.logs.formats.spans import KIND_EVALUATOR, Note, Span

#: A piece of input numbers its spans from `piece_index << ORDER_BITS`, so that spans spilled by
#: several processes sort in input order.
ORDER_BITS = 40
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS item (trace_id TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL,"
    " digest BLOB)",
    "CREATE TABLE IF NOT EXISTS span (span_id TEXT NOT NULL, trace_id TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS reject (seq INTEGER NOT NULL, data BLOB NOT NULL)",
)
_PACK = msgspec.msgpack.Encoder().encode
Digest = Callable[[str, list[Span]], bytes]
_UNPACK = msgspec.msgpack.Decoder(list).decode


class TraceCollector:
    """Collects spans and notes; `traces()` yields each trace's spans and notes once, in the order
    of each trace's first span in the input (so requests follow the files they came from).

    `index_spans`: keep a span id → trace id index in the spill file, which notes that name only a
    span id (Phoenix annotations) need; OTLP alone has no such notes.

    `digest(trace_id, spans)`: what a trace with exactly these spans and no notes comes to (bytes),
    computed for each spill row; `traces()` hands it over instead of the spans when it holds.
    """

    def __init__(
        self,
        *,
        memory_spans: int = 5_000,
        spill_dir: Path | None = None,
        index_spans: bool = True,
        digest: Digest | None = None,
    ) -> None:
        self.memory_spans = memory_spans
        self.spill_dir = spill_dir
        self.index_spans = index_spans
        self.digest = digest
        self._spans: list[tuple[str, Span]] = []
        self._notes: list[Note] = []
        self._db: sqlite3.Connection | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._path: Path | None = None
        self._shared = False
        self._rejected: list[tuple[int, bytes]] = []
        self.seq = 0
        """Order number of the next span read."""
        self.spans_added = 0

    @classmethod
    def attach(
        cls, path: Path, *, memory_spans: int, index_spans: bool, digest: Digest | None
    ) -> TraceCollector:
        """A collector that spills into the file `spill_path()` of another one gave (in another
        process); it commits each spill, so several may write in turn. It never reads back."""
        collector = cls(memory_spans=memory_spans, index_spans=index_spans, digest=digest)
        collector._path, collector._shared = path, True
        return collector

    @staticmethod
    def trace_of(span: Span) -> str:
        """The trace a span belongs to: an EVALUATOR carrier span joins the trace it links to."""
        if span.kind == KIND_EVALUATOR and span.links:
            return span.links[0][0]
        return span.trace_id

    def add_span(self, span: Span) -> None:
        """Keep one span (spills to disk when memory holds `memory_spans`)."""
        self._spans.append((self.trace_of(span), span))
        self.spans_added += 1
        if len(self._spans) >= self.memory_spans:
            self.flush()

    def add_note(self, note: Note) -> None:
        """Keep one note (a Phoenix annotation or a Langfuse score)."""
        self._notes.append(note)

    def add_notes(self, notes: list[Note]) -> None:
        """Keep notes read elsewhere (by a reading process)."""
        self._notes.extend(notes)

    @property
    def notes(self) -> list[Note]:
        """The notes kept so far."""
        return self._notes

    def spill_path(self) -> Path:
        """The spill file (created, empty, on first call), for `attach` in other processes."""
        if self._path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="ragtriage-traces-", dir=self.spill_dir)
            self._path = Path(self._tmp.name) / "spans.sqlite"
            with contextlib.closing(self._open()) as db:
                for statement in _SCHEMA:
                    db.execute(statement)
        return self._path

    def _open(self) -> sqlite3.Connection:
        assert self._path is not None
        db = sqlite3.connect(self._path, isolation_level=None, timeout=600)
        db.execute("PRAGMA journal_mode = OFF")  # a scratch file: nothing to recover
        db.execute("PRAGMA synchronous = OFF")
        # 64 MB of page cache to read back; 8 MB to append (each reading process has one).
        db.execute(f"PRAGMA cache_size = {-8192 if self._shared else -65536}")
        return db

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self.spill_path()
            self._db = self._open()
            for statement in _SCHEMA:
                self._db.execute(statement)
            if not self._shared:
                self._db.execute("BEGIN")  # one transaction: nobody else writes
        return self._db

    def add_rejected(self, values: tuple[Any, ...]) -> None:
        """Keep an unreadable record's quarantine entry (spilled with the spans, in input order)."""
        self._rejected.append((self.seq + len(self._spans), _PACK(values)))

    def rejected_rows(self, before: int | None = None) -> Iterator[list[Any]]:
        """The values `add_rejected` kept (in any process), in input order; only those read
        before order number `before` when given."""
        if self._path is None:
            return
        db = self._connect()
        query = "SELECT data FROM reject WHERE seq < ? ORDER BY seq, rowid"
        for (data,) in db.execute(query, (1 << 62 if before is None else before,)):
            yield _UNPACK(data)

    def flush(self) -> None:
        """Spill the spans (and quarantine entries) held in memory: one row per trace, its spans
        in input order."""
        if not self._spans and not self._rejected:
            return
        db = self._connect()
        groups: dict[str, tuple[int, list[Span]]] = {}
        seq = self.seq
        for offset, (trace_id, span) in enumerate(self._spans):
            group = groups.get(trace_id)
            if group is None:
                groups[trace_id] = (seq + offset, [span])
            else:
                group[1].append(span)
        self.seq += len(self._spans)
        digest = self.digest
        rows = []
        for trace_id, (first, spans) in groups.items():
            data = Span.pack_many(spans)
            rows.append((trace_id, first, data, None if digest is None else digest(trace_id, spans)))
        if self._shared:
            db.execute("BEGIN IMMEDIATE")  # only now: the other readers spill meanwhile
        db.executemany("INSERT INTO item VALUES (?, ?, ?, ?)", rows)
        if self.index_spans:
            db.executemany("INSERT INTO span VALUES (?, ?)", [(s.span_id, t) for t, s in self._spans])
        if self._rejected:
            db.executemany("INSERT INTO reject VALUES (?, ?)", self._rejected)
            self._rejected = []
        if self._shared:
            db.execute("COMMIT")
        self._spans = []

    def traces(self) -> Iterator[tuple[str, list[Span], list[Note], bytes | None]]:
        """Every trace once, in order of first appearance: `(trace_id, spans, notes, digest)`.

        `digest` is the `digest` of the trace's spans when one spill row holds them all and no
        note names the trace; then `spans` and `notes` are empty. Notes that name only a span id
        join the trace of that span; notes whose trace has no span are yielded with an empty span
        list and no digest (the caller quarantines them).
        """
        notes_by_trace = self._notes_by_trace()
        try:
            for trace_id, spans, digest in self._grouped(notes_by_trace):
                yield trace_id, spans, notes_by_trace.pop(trace_id, []), digest
            for trace_id in sorted(notes_by_trace):
                yield trace_id, [], notes_by_trace[trace_id], None
        finally:
            self.close()

    def _notes_by_trace(self) -> dict[str, list[Note]]:
        """Notes keyed by trace id, span-only notes resolved through the spans' ids."""
        if not self._notes:
            return {}
        unresolved = {n.span_id for n in self._notes if n.trace_id is None and n.span_id}
        span_traces: dict[str, str] = {}
        if unresolved:
            for trace_id, span in self._spans:
                if span.span_id in unresolved:
                    span_traces[span.span_id] = trace_id
            if self._path is not None:
                if self._spans:
                    self.flush()  # one place to look
                db = self._connect()
                db.execute("CREATE INDEX IF NOT EXISTS span_id ON span (span_id)")
                wanted = sorted(unresolved)
                for start in range(0, len(wanted), 500):
                    chunk = wanted[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    query = f"SELECT trace_id, span_id FROM span WHERE span_id IN ({marks})"
                    span_traces.update((span_id, trace_id) for trace_id, span_id in db.execute(query, chunk))
        grouped: dict[str, list[Note]] = {}
        for note in self._notes:
            trace_id = note.trace_id or span_traces.get(note.span_id or "") or f"span:{note.span_id}"
            grouped.setdefault(trace_id, []).append(note)
        return grouped

    def _grouped(self, noted: dict[str, list[Note]]) -> Iterator[tuple[str, list[Span], bytes | None]]:
        if self._path is None:
            by_trace: dict[str, list[Span]] = {}
            for trace_id, span in self._spans:
                by_trace.setdefault(trace_id, []).append(span)
            self._spans = []
            for trace_id in list(by_trace):
                yield trace_id, by_trace.pop(trace_id), None
            return
        self.flush()
        db = self._connect()
        if db.in_transaction:
            db.execute("COMMIT")
        db.execute("CREATE INDEX item_trace ON item (trace_id, seq)")
        db.execute(
            "CREATE TABLE first AS SELECT trace_id, MIN(seq) AS seq, COUNT(*) AS rows FROM item GROUP BY trace_id"
        )
        current: str | None = None
        group: list[Span] = []
        # A trace in one row: its digest, and its spans only when notes name it.
        query = (
            "SELECT item.trace_id, first.rows, item.digest, "
            "CASE WHEN first.rows > 1 OR item.digest IS NULL OR ? THEN item.data END "
            "FROM first JOIN item ON item.trace_id = first.trace_id ORDER BY first.seq, item.seq"
        )
        for trace_id, rows, digest, data in db.execute(query, (bool(noted),)):
            if trace_id != current:
                if current is not None:
                    yield current, group, None
                current, group = None, []
                if rows == 1 and digest is not None and trace_id not in noted:
                    yield trace_id, [], digest
                    continue
                current = trace_id
            group.extend(Span.unpack_many(data))
        if current is not None:
            yield current, group, None

    def close(self) -> None:
        """Drop the spill file (the collector that made it) or the connection to it."""
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
            self._path = None
