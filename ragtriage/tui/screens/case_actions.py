"""Triage actions of the case screen: gold, labels, note, confirm, dismiss, promote, add alias.

Every action is saved at once through the triage repository with the revision on screen; a
`ConflictError` (someone else changed the record) is shown and the case reloads, nothing is
overwritten. Saves run in thread workers and talk back with messages. Keys pressed while this
screen's own save is in flight wait for it and then apply in order, each on the saved record:
a quick "label, confirm, promote" is the triager's own sequence, not a conflict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import work

from ragtriage.store import triage_repo
from ragtriage.store.triage_repo import ConflictError, TriageRecord
from ragtriage.tui.messages import ActionFinished, RecordConflict, RecordSaved

if TYPE_CHECKING:
    from ragtriage.tui.case_data import CaseData
    from ragtriage.workspace import Workspace


class CaseActions:
    """Mixin of `CaseScreen` (expects `case`, `request_id`, `candidate_table`, `load`, `action_replay`)."""

    case: CaseData | None
    request_id: str
    _save_in_flight: bool = False
    _waiting_actions: list[Callable[[], object]] | None = None

    @property
    def workspace(self) -> Workspace:
        return self.app.workspace  # type: ignore[attr-defined, no-any-return]

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
            self.post_message(RecordConflict(self.request_id, str(error)))  # type: ignore[attr-defined]
            return
        self.post_message(RecordSaved(record, summary))  # type: ignore[attr-defined]

    def on_record_saved(self, message: RecordSaved) -> None:
        """Show the saved record (method-name handlers: `@on` is not collected from a mixin)."""
        if self.case is not None:
            self.case.record = message.record
        self.notify(message.summary, markup=False)  # type: ignore[attr-defined]
        self.refresh_case()  # type: ignore[attr-defined]
        self._run_waiting()

    def on_record_conflict(self, message: RecordConflict) -> None:
        """Say who changed the record meanwhile and reload it; nothing was written."""
        dropped = self.drop_waiting()
        later = (
            f" ({dropped} later key press{'es' if dropped > 1 else ''} not applied: press again)"
            if dropped
            else ""
        )
        self.notify(  # type: ignore[attr-defined]
            message.detail + later,
            title="changed meanwhile: reloaded",
            severity="error",
            timeout=10,
            markup=False,
        )
        self.load()  # type: ignore[attr-defined]

    def on_action_finished(self, message: ActionFinished) -> None:
        """Notify; replay when the action asks for it (alias added)."""
        self.notify(message.summary, markup=False, timeout=8)  # type: ignore[attr-defined]
        if message.replay:
            self.action_replay()  # type: ignore[attr-defined]

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
        chunk_id = self.candidate_table.highlighted_chunk_id  # type: ignore[attr-defined]
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
        from ragtriage.tui.screens.gold_search_modal import GoldSearchModal

        def chosen(chunk_id: str | None) -> None:
            if chunk_id is not None:
                self.set_gold_member(chunk_id)

        query = self.case.query if self.case is not None else ""
        self.app.push_screen(GoldSearchModal(self.workspace, query), chosen)  # type: ignore[attr-defined]

    def action_note(self) -> None:
        from ragtriage.tui.screens.note_modal import NoteModal

        def written(text: str | None) -> None:
            if text is not None:
                self.in_turn(lambda: self.save("note saved", triage_repo.add_note, text))

        self.app.push_screen(NoteModal(), written)  # type: ignore[attr-defined]

    def action_confirm(self) -> None:
        self.in_turn(lambda: self.save("confirmed", triage_repo.set_status, "confirmed"))

    def action_dismiss_case(self) -> None:
        self.in_turn(lambda: self.save("dismissed", triage_repo.set_status, "dismissed"))

    def action_promote(self) -> None:
        # After the saves in flight: "confirm, promote" pressed quickly promotes the confirmed case.
        self.in_turn(self._promote)

    @work(thread=True, exclusive=True, exit_on_error=False, group="promotions")
    def _promote(self) -> None:
        from ragtriage.triage.promote import promote_request

        result = promote_request(self.workspace, self.request_id)
        if result.created:
            summary = f"promoted as eval case {result.case_id} ({result.dataset} v{result.dataset_version})"
        else:
            summary = f"already an eval case: {result.case_id} (same query and gold; nothing added)"
        self.post_message(ActionFinished(summary, detail=result))  # type: ignore[attr-defined]

    def action_add_alias(self) -> None:
        """After a confirmation, add the diagnosis' first alias proposal to the alias file and replay."""
        from ragtriage.triage.alias_mining import DEFAULT_ALIAS_FILE
        from ragtriage.tui.screens.confirm_modal import ConfirmModal

        diagnosis = self.case.diagnosis if self.case is not None else None
        pairs = diagnosis.suggestion.alias_pairs if diagnosis is not None else []
        if not pairs:
            self.notify("no alias proposal: replay an alias_missing case first (r)", severity="warning")  # type: ignore[attr-defined]
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
                self.notify(f"alias {term} = {synonym} not added")  # type: ignore[attr-defined]

        # The alias file is shared by everyone who replays: one key press must not change it.
        question = f"Add the alias {term} = {synonym} to {path} and replay?"
        self.app.push_screen(ConfirmModal(question), confirmed)  # type: ignore[attr-defined]

    @work(thread=True, exclusive=True, exit_on_error=False, group="aliases")
    def _add_alias(self, term: str, synonym: str) -> None:
        from ragtriage.pipeline.factory import build_rule_rewriter
        from ragtriage.triage.alias_mining import DEFAULT_ALIAS_FILE, add_aliases

        workspace = self.workspace
        configured = workspace.resolve_path(workspace.settings.rewrite.alias_file)
        path = configured if configured is not None else workspace.home / DEFAULT_ALIAS_FILE
        change = add_aliases(path, term, [synonym])
        if configured is None:
            summary = f"added {term} = {synonym} to {path}, but rewrite.alias_file is unset: the pipeline ignores it"
            self.post_message(ActionFinished(summary))  # type: ignore[attr-defined]
            return
        # The long-lived pipeline re-reads the dictionary, so the replay uses the new alias.
        workspace.pipeline.rules = build_rule_rewriter(workspace.settings, workspace.resolve_path)
        added = ", ".join(change.added) or "nothing new"
        self.post_message(ActionFinished(f"alias {term}: added {added}; replaying", replay=True))  # type: ignore[attr-defined]
