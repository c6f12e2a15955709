"""Help: every key of the screen underneath with its binding id (for `[keymap]` in the settings)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ragtriage.tui.host import QUIT


def bindings_table(rows: list[tuple[str, str, str]]) -> Table:
    """Key, action description and binding id per row."""
    table = Table(title=Text('keys (remap with [keymap] binding-id = "keys" in config.toml)'), expand=True)
    table.add_column("key", no_wrap=True)
    table.add_column("does")
    table.add_column("binding id", style="dim")
    for key, description, binding_id in rows:
        table.add_row(Text(key), Text(description), Text(binding_id))
    return table


class HelpScreen(ModalScreen[None]):
    """Modal list of keys; escape or ? closes it, q quits."""

    BINDINGS = [QUIT, Binding("escape,question_mark,f1", "dismiss", "Close", id="close-help")]

    def __init__(self, rows: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(bindings_table(self.rows), markup=False)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)
