"""Group spans by trace across lines and files, in bounded memory.

Spans of one trace may sit on different lines or in different files of one ingest (the Collector
writes batches as they come and rotates files), and feedback may arrive long after the trace. So
no trace is complete before the input ends: spans are kept in memory up to `memory_spans`, then
spilled to a temporary SQLite file and read back grouped by trace id (one index, one ordered
scan). Memory is bounded by `memory_spans` plus the largest single trace.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ragtriage.logs.formats.spans import KIND_EVALUATOR, Note, Span

_SPAN, _NOTE = 0, 1


class TraceCollector:
    """Collects spans and notes; `traces()` yields each trace's spans and notes once, in the order
    of each trace's first span in the input (so requests follow the files they came from)."""

    def __init__(self, *, memory_spans: int = 5_000, spill_dir: Path | None = None) -> None:
        self.memory_spans = memory_spans
        self.spill_dir = spill_dir
        self._spans: list[tuple[str, Span]] = []
        self._notes: list[Note] = []
        self._db: sqlite3.Connection | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._seq = 0
        self.spans_added = 0

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
            self._spill()

    def add_note(self, note: Note) -> None:
        """Keep one note (a Phoenix annotation or a Langfuse score)."""
        self._notes.append(note)

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="ragtriage-traces-", dir=self.spill_dir)
            self._db = sqlite3.connect(Path(self._tmp.name) / "spans.sqlite", isolation_level=None)
            self._db.execute("PRAGMA journal_mode = OFF")
            self._db.execute("PRAGMA synchronous = OFF")
            self._db.execute("PRAGMA cache_size = -65536")  # 64 MB of page cache
            self._db.execute(
                "CREATE TABLE item (trace_id TEXT NOT NULL, seq INTEGER NOT NULL, span_id TEXT NOT NULL,"
                " data BLOB NOT NULL)"
            )
            self._db.execute("BEGIN")
        return self._db

    def _spill(self) -> None:
        db = self._connect()
        start = self._seq
        db.executemany(
            "INSERT INTO item VALUES (?, ?, ?, ?)",
            [
                (trace_id, start + i, span.span_id, span.pack())
                for i, (trace_id, span) in enumerate(self._spans)
            ],
        )
        self._seq += len(self._spans)
        self._spans = []

    def traces(self) -> Iterator[tuple[str, list[Span], list[Note]]]:
        """Every trace once, in order of first appearance: `(trace_id, spans, notes)`.

        Notes that name only a span id join the trace of that span; notes whose trace has no span
        are yielded with an empty span list (the caller quarantines them).
        """
        notes_by_trace = self._notes_by_trace()
        try:
            for trace_id, spans in self._grouped():
                yield trace_id, spans, notes_by_trace.pop(trace_id, [])
            for trace_id in sorted(notes_by_trace):
                yield trace_id, [], notes_by_trace[trace_id]
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
            if self._db is not None:
                if self._spans:
                    self._spill()  # one place to look
                self._db.execute("CREATE INDEX IF NOT EXISTS item_span ON item (span_id)")
                wanted = sorted(unresolved)
                for start in range(0, len(wanted), 500):
                    chunk = wanted[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    query = f"SELECT trace_id, span_id FROM item WHERE span_id IN ({marks})"
                    span_traces.update(
                        (span_id, trace_id) for trace_id, span_id in self._db.execute(query, chunk)
                    )
        grouped: dict[str, list[Note]] = {}
        for note in self._notes:
            trace_id = note.trace_id or span_traces.get(note.span_id or "") or f"span:{note.span_id}"
            grouped.setdefault(trace_id, []).append(note)
        return grouped

    def _grouped(self) -> Iterator[tuple[str, list[Span]]]:
        if self._db is None:
            by_trace: dict[str, list[Span]] = {}
            for trace_id, span in self._spans:
                by_trace.setdefault(trace_id, []).append(span)
            self._spans = []
            for trace_id in list(by_trace):
                yield trace_id, by_trace.pop(trace_id)
            return
        if self._spans:
            self._spill()
        db = self._db
        db.execute("COMMIT")
        db.execute("CREATE INDEX item_trace ON item (trace_id, seq)")
        db.execute("CREATE TABLE first AS SELECT trace_id, MIN(seq) AS seq FROM item GROUP BY trace_id")
        current: str | None = None
        group: list[Span] = []
        query = (
            "SELECT item.trace_id, item.data FROM first JOIN item ON item.trace_id = first.trace_id "
            "ORDER BY first.seq, item.seq"
        )
        for trace_id, data in db.execute(query):
            if trace_id != current:
                if current is not None:
                    yield current, group
                current, group = trace_id, []
            group.append(Span.unpack(data))
        if current is not None:
            yield current, group

    def close(self) -> None:
        """Drop the spill file."""
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
