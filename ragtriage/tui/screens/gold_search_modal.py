"""A typed modal that searches the KB (the pipeline's BM25 index) and returns the chosen chunk id."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Label
from textual.worker import get_current_worker

from ragtriage.tui.case_data import search_kb
from ragtriage.tui.host import QUIT
from ragtriage.tui.messages import KBSearchFinished
from ragtriage.tui.screens.worker_failures import WorkerFailures
from ragtriage.workspace import Workspace


class GoldSearchModal(WorkerFailures, ModalScreen[str | None]):
    """Type words, enter searches; enter on a result (or `g`) chooses it; escape returns None."""

    BINDINGS = [QUIT, Binding("escape", "cancel", "Cancel", id="cancel-search", priority=True)]

    def __init__(self, workspace: Workspace, query: str = "") -> None:
        super().__init__()
        self.workspace = workspace
        self.initial_query = query

    def compose(self) -> ComposeResult:
        with Vertical(id="search-dialog", classes="dialog"):
            yield Label(
                "Search the KB for the gold chunk (enter: search / choose, escape: cancel)", markup=False
            )
            yield Input(value=self.initial_query, id="search-input")
            yield DataTable(id="search-results", cursor_type="row")

    def on_mount(self) -> None:
        self.results.add_columns("chunk_id", "title", "score", "text")
        if self.initial_query:
            self.search(self.initial_query)

    @property
    def results(self) -> DataTable[Text]:
        return self.query_one("#search-results", DataTable)

    @on(Input.Submitted, "#search-input")
    def _search_submitted(self, event: Input.Submitted) -> None:
        self.search(event.value)

    @work(thread=True, exclusive=True, exit_on_error=False, group="searches")
    def search(self, text: str) -> None:
        """BM25 search in a thread (Whoosh blocks)."""
        hits = search_kb(self.workspace, text)
        if not get_current_worker().is_cancelled:
            self.post_message(KBSearchFinished(text, hits))

    @on(KBSearchFinished)
    def _show_hits(self, message: KBSearchFinished) -> None:
        self.results.clear()
        for chunk, score in message.hits:
            snippet = chunk.content.replace("\n", " ")[:60]
            self.results.add_row(
                Text(chunk.chunk_id),
                Text(chunk.title),
                Text(f"{score:.2f}"),
                Text(snippet),
                key=chunk.chunk_id,
            )
        if message.hits:
            self.results.focus()

    @on(DataTable.RowSelected, "#search-results")
    def _choose(self, event: DataTable.RowSelected) -> None:
        self.dismiss(str(event.row_key.value))

    def action_cancel(self) -> None:
        self.dismiss(None)
