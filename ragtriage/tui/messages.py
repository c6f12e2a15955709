"""Messages that workers post back to their screens (workers never touch widgets themselves);
dataclasses, as Textual allows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from ragtriage.kb.types import ChunkRecord
from ragtriage.logs.queue import QueueCounts, QueuePage
from ragtriage.pipeline.types import Trace
from ragtriage.store.triage_repo import TriageRecord
from ragtriage.triage.diagnose import Diagnosis
from ragtriage.tui.case_data import CaseData


@dataclass(eq=False)
class QueueLoaded(Message):
    """One page of the queue, the counts per status and label, and the logged pipeline versions."""

    page: QueuePage
    counts: QueueCounts
    versions: tuple[str, ...] = ()


@dataclass(eq=False)
class CaseLoaded(Message):
    """The case screen's data was read from the store."""

    case: CaseData


@dataclass(eq=False)
class ReplayProgress(Message):
    """A replay moved to its next stage; bursts collapse into the latest one."""

    stage: str
    done: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ReplayProgress)


@dataclass(eq=False)
class ReplayFinished(Message):
    """A replay and its diagnosis finished."""

    request_id: str
    trace: Trace
    diagnosis: Diagnosis
    chunks: dict[str, ChunkRecord]


@dataclass(eq=False)
class ReplayCancelled(Message):
    """The triager cancelled a replay (escape)."""

    request_id: str


@dataclass(eq=False)
class RecordSaved(Message):
    """A triage action was saved; `summary` says what happened (shown as a notification)."""

    record: TriageRecord
    summary: str


@dataclass(eq=False)
class RecordConflict(Message):
    """Someone else changed the record meanwhile; nothing was written and the case reloads."""

    request_id: str
    detail: str


@dataclass(eq=False)
class ActionFinished(Message):
    """A non-record action finished (promote, alias added); `summary` is shown to the triager."""

    summary: str
    replay: bool = False
    detail: Any = None


@dataclass(eq=False)
class KBSearchFinished(Message):
    """Chunks found by the gold-search modal."""

    query: str
    hits: list[tuple[ChunkRecord, float]]


@dataclass(eq=False)
class EvalProgress(Message):
    """An eval run progressed; bursts collapse into the latest one."""

    done: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EvalProgress)


@dataclass(eq=False)
class EvalRunsLoaded(Message):
    """The runs list (newest first) as plain rows."""

    runs: list[dict[str, Any]]


@dataclass(eq=False)
class EvalFinished(Message):
    """An eval run started from the TUI finished."""

    run_id: int
    status: str


@dataclass(eq=False)
class ComparisonReady(Message):
    """A comparison of two runs."""

    comparison: Any
