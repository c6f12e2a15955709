"""A typed modal asking for a note: dismisses with the text, or None on escape or an empty note."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from ragtriage.tui.host import QUIT


def clean_note(text: str) -> str | None:
    """The note to save: stripped text, None when there is nothing to save."""
    stripped = text.strip()
    return stripped or None


class NoteModal(ModalScreen[str | None]):
    """`n` on the case screen: enter saves, escape cancels."""

    BINDINGS = [QUIT, Binding("escape", "cancel", "Cancel", id="cancel-note")]

    def compose(self) -> ComposeResult:
        with Vertical(id="note-dialog", classes="dialog"):
            yield Label("Note (enter saves, escape cancels)", markup=False)
            yield Input(placeholder="what did you find?", id="note-input")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(clean_note(event.value))

    def action_cancel(self) -> None:
        self.dismiss(None)
