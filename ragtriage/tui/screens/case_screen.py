"""The case screen: query and rewrite, gold journey, candidate pool, chunk preview, diagnosis, and
the triage actions (gold, labels, note, confirm, dismiss, promote, add alias).

Every action is saved at once through the triage repository with the revision on screen; a
`ConflictError` (someone else changed the record) is shown and the case reloads, nothing is
overwritten. Saves run in thread workers and talk back with messages. Keys pressed while this
screen's own save is in flight wait for it and then apply in order, each on the saved record:
a quick "label, confirm, promote" is the triager's own sequence, not a conflict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, ProgressBar
from textual.worker import Worker, get_current_worker

from ragtriage.pipeline.factory import build_rule_rewriter
from ragtriage.pipeline.pipeline import RunCancelled
from ragtriage.pipeline.types import Trace
from ragtriage.store import triage_repo
from ragtriage.store.triage_repo import ConflictError, TriageRecord
from ragtriage.triage.alias_mining import DEFAULT_ALIAS_FILE, add_aliases
from ragtriage.triage.diagnose import save_suggestions
from ragtriage.triage.journey import gold_journey
from ragtriage.triage.promote import promote_request
from ragtriage.triage.rules import LABELS
from ragtriage.tui.case_data import CaseData, load_case, replay_case
from ragtriage.tui.host import QUIT, host
from ragtriage.tui.messages import (
    ActionFinished,
    CaseLoaded,
    RecordConflict,
    RecordSaved,
    ReplayCancelled,
    ReplayFinished,
    ReplayProgress,
)
from ragtriage.tui.screens.confirm_modal import ConfirmModal
from ragtriage.tui.screens.gold_search_modal import GoldSearchModal
from ragtriage.tui.screens.note_modal import NoteModal
from ragtriage.tui.screens.worker_failures import WorkerFailures
from ragtriage.tui.widgets.candidate_table import CandidateTable
from ragtriage.tui.widgets.chunk_preview import ChunkPreview
from ragtriage.tui.widgets.diagnosis_panel import DiagnosisPanel
from ragtriage.tui.widgets.journey_strip import JourneyStrip
from ragtriage.tui.widgets.query_panel import QueryPanel
from ragtriage.workspace import Workspace

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


#: Below this many columns the chunk preview sits under the candidate table, not beside it: beside
#: it, the preview is at least 46 cells wide (app.tcss), so ids of up to 43 cells (a UUID is 36)
#: start their own line and never break, and the table keeps its chunk id and rank columns.
NARROW_WIDTH = 130
#: Below this many rows (an 80×24 terminal) the panels drop their rules, the journey cells take one
#: line and the query panel three, so the candidate table keeps at least 8 rows.
SHORT_HEIGHT = 32


class CaseScreen(WorkerFailures, Screen[None]):
    """One flagged request. Workers load, replay and save; handlers update the widgets."""

    BINDINGS = [
        QUIT,
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
        self.set_class(self.app.size.height < SHORT_HEIGHT, "-short")
        self.candidate_table.focus()
        self.load()

    def on_resize(self, event: events.Resize) -> None:
        # Side by side, a narrow terminal leaves the preview too few cells for a chunk id
        # (a UUID is 36): below NARROW_WIDTH the preview goes under the candidate table.
        self.set_class(event.size.width < NARROW_WIDTH, "-narrow")
        self.set_class(event.size.height < SHORT_HEIGHT, "-short")

    @work(thread=True, exclusive=True, exit_on_error=False, group="cases")
    def load(self) -> None:
        """Read the request, its record and its logged trace."""
        case = load_case(host(self.app).workspace, self.request_id)
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
        app = host(self.app)
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

        save_suggestions(app.workspace.engine, [diagnosis])
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

    # ------------------------------------------------------------------ triage actions

    _save_in_flight: bool = False
    _waiting_actions: list[Callable[[], object]] | None = None

    @property
    def workspace(self) -> Workspace:
        return host(self.app).workspace

    def _revision(self) -> int | None:
        return self.case.record.revision if self.case is not None and self.case.record is not None else None

    def in_turn(self, action: Callable[[], object]) -> None:
        """Run `action` now, or after this screen's save in flight has come back.

        An action reads the record on screen (its revision, its gold list) when it runs, so
        waiting its turn makes it apply on top of the save before it instead of conflicting.
        """
        if self._save_in_flight:
            if self._waiting_actions is None:
                self._waiting_actions = []
            self._waiting_actions.append(action)
        else:
            action()

    def _run_waiting(self) -> None:
        self._save_in_flight = False
        while self._waiting_actions and not self._save_in_flight:
            self._waiting_actions.pop(0)()

    def drop_waiting(self) -> int:
        """Forget the actions waiting for a save that failed or conflicted; returns how many."""
        dropped = len(self._waiting_actions or [])
        self._waiting_actions = None
        self._save_in_flight = False
        return dropped

    def save(self, summary: str, change: Callable[..., TriageRecord], *args: Any, **kwargs: Any) -> None:
        """Run `change(engine, request_id, *args, expected_revision=…)` in a worker."""
        self._save_in_flight = True
        self._save(summary, change, args, kwargs, self._revision())

    @work(thread=True, exclusive=False, exit_on_error=False, group="saves")
    def _save(
        self,
        summary: str,
        change: Callable[..., TriageRecord],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        revision: int | None,
    ) -> None:
        try:
            record = change(
                self.workspace.engine, self.request_id, *args, expected_revision=revision, **kwargs
            )
        except ConflictError as error:
            self.post_message(RecordConflict(self.request_id, str(error)))
            return
        self.post_message(RecordSaved(record, summary))

    def on_record_saved(self, message: RecordSaved) -> None:
        """Show the saved record."""
        if self.case is not None:
            self.case.record = message.record
        self.notify(message.summary, markup=False)
        self.refresh_case()
        self._run_waiting()

    def on_record_conflict(self, message: RecordConflict) -> None:
        """Say who changed the record meanwhile and reload it; nothing was written."""
        dropped = self.drop_waiting()
        later = (
            f" ({dropped} later key press{'es' if dropped > 1 else ''} not applied: press again)"
            if dropped
            else ""
        )
        self.notify(
            message.detail + later,
            title="changed meanwhile: reloaded",
            severity="error",
            timeout=10,
            markup=False,
        )
        self.load()

    def on_action_finished(self, message: ActionFinished) -> None:
        """Notify; replay when the action asks for it (alias added)."""
        self.notify(message.summary, markup=False, timeout=8)
        if message.replay:
            self.action_replay()

    # ------------------------------------------------------------------ actions

    def action_assign_label(self, label: str) -> None:
        """Make `label` the primary label (other labels are kept after it)."""
        if self.case is None:
            return
        self.in_turn(lambda: self._assign_label(label))

    def _assign_label(self, label: str) -> None:
        if self.case is None:
            return
        others = [lbl for lbl in (self.case.record.labels if self.case.record else []) if lbl != label]
        self.save(f"label: {label}", triage_repo.set_labels, [label, *others])

    def action_toggle_gold(self) -> None:
        """Add the highlighted candidate to the gold, or take it out."""
        chunk_id = self.candidate_table.highlighted_chunk_id
        if self.case is None or chunk_id is None:
            return
        self.in_turn(lambda: self._set_gold_member(chunk_id, remove=chunk_id in self._gold()))

    def set_gold_member(self, chunk_id: str, *, remove: bool = False) -> None:
        """Save the gold with `chunk_id` added (or removed), after any save in flight."""
        self.in_turn(lambda: self._set_gold_member(chunk_id, remove=remove))

    def _gold(self) -> list[str]:
        return list(self.case.gold) if self.case is not None else []

    def _set_gold_member(self, chunk_id: str, *, remove: bool) -> None:
        if self.case is None or (chunk_id in self.case.gold) != remove:
            return  # already as asked (an earlier key in the same burst did it)
        gold = [g for g in self.case.gold if g != chunk_id] if remove else [*self.case.gold, chunk_id]
        self.save(f"gold {'-' if remove else '+'} {chunk_id}", triage_repo.set_gold, gold)

    def action_search_gold(self) -> None:
        def chosen(chunk_id: str | None) -> None:
            if chunk_id is not None:
                self.set_gold_member(chunk_id)

        query = self.case.query if self.case is not None else ""
        self.app.push_screen(GoldSearchModal(self.workspace, query), chosen)

    def action_note(self) -> None:
        def written(text: str | None) -> None:
            if text is not None:
                self.in_turn(lambda: self.save("note saved", triage_repo.add_note, text))

        self.app.push_screen(NoteModal(), written)

    def action_confirm(self) -> None:
        self.in_turn(lambda: self.save("confirmed", triage_repo.set_status, "confirmed"))

    def action_dismiss_case(self) -> None:
        self.in_turn(lambda: self.save("dismissed", triage_repo.set_status, "dismissed"))

    def action_promote(self) -> None:
        # After the saves in flight: "confirm, promote" pressed quickly promotes the confirmed case.
        self.in_turn(self._promote)

    @work(thread=True, exclusive=True, exit_on_error=False, group="promotions")
    def _promote(self) -> None:
        result = promote_request(self.workspace, self.request_id)
        if result.created:
            summary = f"promoted as eval case {result.case_id} ({result.dataset} v{result.dataset_version})"
        else:
            summary = f"already an eval case: {result.case_id} (same query and gold; nothing added)"
        self.post_message(ActionFinished(summary, detail=result))

    def action_add_alias(self) -> None:
        """After a confirmation, add the diagnosis' first alias proposal to the alias file and replay."""
        diagnosis = self.case.diagnosis if self.case is not None else None
        pairs = diagnosis.suggestion.alias_pairs if diagnosis is not None else []
        if not pairs:
            self.notify("no alias proposal: replay an alias_missing case first (r)", severity="warning")
            return
        term, synonym = pairs[0].term, pairs[0].synonym
        workspace = self.workspace
        path = (
            workspace.resolve_path(workspace.settings.rewrite.alias_file)
            or workspace.home / DEFAULT_ALIAS_FILE
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._add_alias(term, synonym)
            else:
                self.notify(f"alias {term} = {synonym} not added")

        # The alias file is shared by everyone who replays: one key press must not change it.
        question = f"Add the alias {term} = {synonym} to {path} and replay?"
        self.app.push_screen(ConfirmModal(question), confirmed)

    @work(thread=True, exclusive=True, exit_on_error=False, group="aliases")
    def _add_alias(self, term: str, synonym: str) -> None:
        workspace = self.workspace
        configured = workspace.resolve_path(workspace.settings.rewrite.alias_file)
        path = configured if configured is not None else workspace.home / DEFAULT_ALIAS_FILE
        change = add_aliases(path, term, [synonym])
        if configured is None:
            summary = f"added {term} = {synonym} to {path}, but rewrite.alias_file is unset: the pipeline ignores it"
            self.post_message(ActionFinished(summary))
            return
        # The long-lived pipeline re-reads the dictionary, so the replay uses the new alias.
        workspace.pipeline.rules = build_rule_rewriter(workspace.settings, workspace.resolve_path)
        added = ", ".join(change.added) or "nothing new"
        self.post_message(ActionFinished(f"alias {term}: added {added}; replaying", replay=True))
