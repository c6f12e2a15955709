"""Messages that workers post back to their screens (workers never touch widgets themselves)."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from ragtriage.kb.types import ChunkRecord
from ragtriage.logs.queue import QueueCounts, QueuePage
from ragtriage.pipeline.types import Trace
from ragtriage.store.triage_repo import TriageRecord
from ragtriage.triage.diagnose import Diagnosis
from ragtriage.tui.case_data import CaseData


class QueueLoaded(Message):
    """One page of the queue and the counts per status and label."""

    def __init__(self, page: QueuePage, counts: QueueCounts) -> None:
        super().__init__()
        self.page = page
        self.counts = counts


class CaseLoaded(Message):
    """The case screen's data was read from the store."""

    def __init__(self, case: CaseData) -> None:
        super().__init__()
        self.case = case


class ReplayProgress(Message):
    """A replay moved to its next stage; bursts collapse into the latest one."""

    def __init__(self, stage: str, done: int, total: int) -> None:
        super().__init__()
        self.stage = stage
        self.done = done
        self.total = total

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ReplayProgress)


class ReplayFinished(Message):
    """A replay and its diagnosis finished."""

    def __init__(
        self, request_id: str, trace: Trace, diagnosis: Diagnosis, chunks: dict[str, ChunkRecord]
    ) -> None:
        super().__init__()
        self.request_id = request_id
        self.trace = trace
        self.diagnosis = diagnosis
        self.chunks = chunks


class ReplayCancelled(Message):
    """The triager cancelled a replay (escape)."""

    def __init__(self, request_id: str) -> None:
        super().__init__()
        self.request_id = request_id


class RecordSaved(Message):
    """A triage action was saved; `summary` says what happened (shown as a notification)."""

    def __init__(self, record: TriageRecord, summary: str) -> None:
        super().__init__()
        self.record = record
        self.summary = summary


class RecordConflict(Message):
    """Someone else changed the record meanwhile; nothing was written and the case reloads."""

    def __init__(self, request_id: str, detail: str) -> None:
        super().__init__()
        self.request_id = request_id
        self.detail = detail


class ActionFinished(Message):
    """A non-record action finished (promote, alias added); `summary` is shown to the triager."""

    def __init__(self, summary: str, *, replay: bool = False, detail: Any = None) -> None:
        super().__init__()
        self.summary = summary
        self.replay = replay
        self.detail = detail


class KBSearchFinished(Message):
    """Chunks found by the gold-search modal."""

    def __init__(self, query: str, hits: list[tuple[ChunkRecord, float]]) -> None:
        super().__init__()
        self.query = query
        self.hits = hits


class EvalProgress(Message):
    """An eval run progressed; bursts collapse into the latest one."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__()
        self.done = done
        self.total = total

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EvalProgress)


class EvalRunsLoaded(Message):
    """The runs list (newest first) as plain rows."""

    def __init__(self, runs: list[dict[str, Any]]) -> None:
        super().__init__()
        self.runs = runs


class EvalFinished(Message):
    """An eval run started from the TUI finished."""

    def __init__(self, run_id: int, status: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.status = status


class ComparisonReady(Message):
    """A comparison of two runs."""

    def __init__(self, comparison: Any) -> None:
        super().__init__()
        self.comparison = comparison
