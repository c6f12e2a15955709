"""A yes/no modal for actions that change shared files: enter confirms, escape cancels."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label

from ragtriage.tui.host import QUIT


class ConfirmModal(ModalScreen[bool]):
    """Shows what will change; dismisses with True on enter, False on escape."""

    BINDINGS = [
        QUIT,
        Binding("enter", "confirm", "Confirm", id="confirm"),
        Binding("escape", "cancel", "Cancel", id="cancel-confirm"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog", classes="dialog"):
            yield Label(self.question, markup=False)
            yield Label("enter confirms · escape cancels", markup=False)

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)
