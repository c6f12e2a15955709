"""The case screen: query and rewrite, gold journey, candidate pool, chunk preview, diagnosis, actions."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, ProgressBar
from textual.worker import Worker, get_current_worker

from ragtriage.pipeline.pipeline import RunCancelled
from ragtriage.pipeline.types import Trace
from ragtriage.triage.journey import gold_journey
from ragtriage.triage.rules import LABELS
from ragtriage.tui.case_data import CaseData, load_case, replay_case
from ragtriage.tui.messages import CaseLoaded, ReplayCancelled, ReplayFinished, ReplayProgress
from ragtriage.tui.screens.case_actions import CaseActions
from ragtriage.tui.screens.worker_failures import WorkerFailures
from ragtriage.tui.widgets.candidate_table import CandidateTable
from ragtriage.tui.widgets.chunk_preview import ChunkPreview
from ragtriage.tui.widgets.diagnosis_panel import DiagnosisPanel
from ragtriage.tui.widgets.journey_strip import JourneyStrip
from ragtriage.tui.widgets.query_panel import QueryPanel

if TYPE_CHECKING:
    from ragtriage.tui.app import TriageApp

#: Number keys 1–9 then 0 assign the default labels in DESIGN.md order.
LABEL_KEYS = ("1", "2", "3", "4", "5", "6", "7", "8", "9", "0")


def label_bindings() -> list[Binding]:
    """`1` → index_stale … `0` → label_error, each with its own id (`label-1` …) so it can be remapped."""
    return [
        Binding(
            key,
            f"assign_label('{label}')",
            label,
            id=f"label-{key}",
            show=False,
            tooltip=f"Label the case {label}",
        )
        for key, label in zip(LABEL_KEYS, LABELS, strict=False)
    ]


#: Below this many columns the chunk preview sits under the candidate table, not beside it.
NARROW_WIDTH = 100


class CaseScreen(CaseActions, WorkerFailures, Screen[None]):
    """One flagged request. Workers load, replay and save; handlers update the widgets."""

    BINDINGS = [
        Binding("escape", "cancel_or_back", "Back/cancel", id="back-or-cancel", priority=True),
        Binding("r", "replay", "Replay", id="replay-case", tooltip="Replay and diagnose in the background"),
        Binding("t", "toggle_source", "Logged/replayed", id="toggle-source"),
        Binding(
            "g", "toggle_gold", "Gold", id="toggle-gold", tooltip="Mark/unmark the highlighted chunk as gold"
        ),
        Binding("G", "search_gold", "Find gold", id="search-gold", tooltip="Search the KB for a gold chunk"),
        Binding("n", "note", "Note", id="add-note"),
        Binding("c", "confirm", "Confirm", id="confirm-case"),
        Binding("x", "dismiss_case", "Dismiss", id="dismiss-case"),
        Binding("p", "promote", "Promote", id="promote-case"),
        Binding("a", "add_alias", "Add alias", id="add-alias"),
        Binding("j", "cursor_down", "Down", id="case-cursor-down", show=False),
        Binding("k", "cursor_up", "Up", id="case-cursor-up", show=False),
        *label_bindings(),
    ]

    def __init__(self, request_id: str) -> None:
        super().__init__()
        self.request_id = request_id
        self.sub_title = f"case {request_id}"
        self.case: CaseData | None = None
        self.source = "logged"
        self.replay_worker: Worker[None] | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Vertical(id="case-body"):
            yield QueryPanel(id="query-panel")
            yield JourneyStrip(id="journey-strip")
            yield ProgressBar(id="replay-progress", show_eta=False)
            with Horizontal(id="case-main"):
                yield CandidateTable(id="candidate-table")
                with VerticalScroll(id="preview-scroll"):
                    yield ChunkPreview(id="chunk-preview")
            with VerticalScroll(id="diagnosis-scroll"):
                yield DiagnosisPanel(id="diagnosis-panel")
        yield Footer()

    @property
    def candidate_table(self) -> CandidateTable:
        return self.query_one(CandidateTable)

    @property
    def journey_strip(self) -> JourneyStrip:
        return self.query_one(JourneyStrip)

    @property
    def progress(self) -> ProgressBar:
        return self.query_one("#replay-progress", ProgressBar)

    def on_mount(self) -> None:
        self.progress.display = False
        self.set_class(self.app.size.width < NARROW_WIDTH, "-narrow")
        self.candidate_table.focus()
        self.load()

    def on_resize(self, event: events.Resize) -> None:
        # Side by side, a narrow terminal leaves the preview too few cells for a chunk id
        # (a UUID is 36): below NARROW_WIDTH the preview goes under the candidate table.
        self.set_class(event.size.width < NARROW_WIDTH, "-narrow")

    @work(thread=True, exclusive=True, exit_on_error=False, group="cases")
    def load(self) -> None:
        """Read the request, its record and its logged trace."""
        case = load_case(self.app.workspace, self.request_id)  # type: ignore[attr-defined]
        if not get_current_worker().is_cancelled:
            self.post_message(CaseLoaded(case))

    @on(CaseLoaded)
    def _show_case(self, message: CaseLoaded) -> None:
        previous = self.case
        self.case = message.case
        if previous is not None and previous.replayed is not None:
            # A reload after a save keeps the replay the triager already ran.
            self.case.replayed, self.case.diagnosis = previous.replayed, previous.diagnosis
            self.case.replayed.gold = self.case.gold
            self.case.chunks = {**previous.chunks, **self.case.chunks}
        self.refresh_case()

    @property
    def shown_trace(self) -> Trace | None:
        """The trace on screen: logged, or replayed when toggled and available."""
        if self.case is None:
            return None
        if self.source == "replayed" and self.case.replayed is not None:
            return self.case.replayed
        return self.case.logged

    def refresh_case(self) -> None:
        """Re-render every panel from `self.case` (called by handlers only)."""
        case, trace = self.case, self.shown_trace
        if case is None or trace is None:
            return
        source = "replayed" if trace is case.replayed else "logged"
        trace.gold = case.gold
        self.query_one(QueryPanel).show(case.request_id, trace, case.record, source, case.fidelity_line)
        journey = (
            gold_journey(trace, case.gold, "replay" if source == "replayed" else "logged")
            if case.gold
            else None
        )
        self.journey_strip.journey = journey
        self.candidate_table.show(trace, case.gold)
        self.query_one(DiagnosisPanel).show(case.diagnosis, case.gold)
        self.set_class(case.record is not None and bool(case.record.primary_label), "-labelled")
        self._preview(self.candidate_table.highlighted_chunk_id)

    @on(CandidateTable.CandidateHighlighted)
    def _preview_highlighted(self, message: CandidateTable.CandidateHighlighted) -> None:
        self._preview(message.chunk_id)

    def _preview(self, chunk_id: str | None) -> None:
        if self.case is None or chunk_id is None:
            return
        terms = self.case.diagnosis.key_terms if self.case.diagnosis is not None else self.case.query.split()
        left_out = self.candidate_table.left_out_text(chunk_id)
        self.query_one(ChunkPreview).show(self.case.chunks.get(chunk_id), terms, chunk_id, left_out)

    def action_toggle_source(self) -> None:
        if self.case is None:
            return
        if self.case.replayed is None:
            self.notify("no replay yet: press r to replay", severity="warning")
            return
        self.source = "logged" if self.source == "replayed" else "replayed"
        self.refresh_case()

    def action_replay(self) -> None:
        if self.case is None:
            return
        self.progress.update(total=3, progress=0)
        self.progress.display = True
        self.add_class("-replaying")
        self.replay_worker = self.replay(self.case)

    @work(thread=True, exclusive=True, exit_on_error=False, group="replays")
    def replay(self, case: CaseData) -> None:
        """Replay and diagnose in a thread; stops between stages when cancelled."""
        worker = get_current_worker()
        app = cast("TriageApp", self.app)
        app.pipeline_ready.wait()

        def stage(name: str, done: int, total: int) -> None:
            self.post_message(ReplayProgress(name, done, total))

        try:
            trace, diagnosis, chunks = replay_case(
                app.workspace,
                case,
                should_stop=lambda: worker.is_cancelled,
                on_stage=stage,
            )
        except RunCancelled:
            self.post_message(ReplayCancelled(case.request_id))
            return
        if worker.is_cancelled:
            self.post_message(ReplayCancelled(case.request_id))
            return
        from ragtriage.store.triage_repo import save_suggested_labels

        save_suggested_labels(
            app.workspace.engine, {case.request_id: diagnosis.suggestion.label or "unknown"}
        )
        self.post_message(ReplayFinished(case.request_id, trace, diagnosis, chunks))

    @on(ReplayProgress)
    def _show_progress(self, message: ReplayProgress) -> None:
        self.progress.update(total=message.total, progress=message.done)

    @on(ReplayFinished)
    def _show_replay(self, message: ReplayFinished) -> None:
        self._end_replay()
        if self.case is None:
            return
        self.case.replayed, self.case.diagnosis = message.trace, message.diagnosis
        self.case.chunks.update(message.chunks)
        self.source = "replayed"
        self.refresh_case()
        self.notify(f"replayed: suggested {message.diagnosis.suggestion.label or 'nothing'}", markup=False)

    @on(ReplayCancelled)
    def _replay_cancelled(self, _message: ReplayCancelled) -> None:
        self._end_replay()
        self.notify("replay cancelled", severity="warning")

    def _end_replay(self) -> None:
        self.progress.display = False
        self.remove_class("-replaying")
        self.replay_worker = None

    def on_worker_failed(self, worker: Worker[object]) -> None:
        if worker.group == "replays":
            self._end_replay()
        elif worker.group == "saves" and (dropped := self.drop_waiting()):
            plural = "es" if dropped > 1 else ""
            self.notify(f"{dropped} later key press{plural} not applied: press again", severity="warning")

    def action_cancel_or_back(self) -> None:
        # Pending counts too: escape pressed right after `r` cancels the replay, not the screen.
        if self.replay_worker is not None and not self.replay_worker.is_finished:
            self.replay_worker.cancel()
            return
        self.app.pop_screen()

    def action_cursor_down(self) -> None:
        self.candidate_table.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.candidate_table.action_cursor_up()
