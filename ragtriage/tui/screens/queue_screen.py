"""The queue: flagged requests, filtered by status, label, reason, suggestion, pipeline version and
free text, paged."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static
from textual.worker import get_current_worker

from ragtriage.logs.flagging import REASONS
from ragtriage.logs.queue import (
    FIDELITY_FILTERS,
    QUEUE_SORTS,
    QueueCounts,
    list_queue,
    queue_counts,
    queue_versions,
)
from ragtriage.store.log_tables import TRIAGE_STATUSES
from ragtriage.triage.rules import LABELS
from ragtriage.triage.sampling import SAMPLED_REASON
from ragtriage.tui.host import QUIT, host
from ragtriage.tui.messages import QueueLoaded
from ragtriage.tui.screens.case_screen import CaseScreen
from ragtriage.tui.screens.worker_failures import WorkerFailures
from ragtriage.tui.widgets.counts_bar import CountsBar
from ragtriage.tui.widgets.queue_table import QueueTable

PAGE_SIZE = 100
#: Actions bound to plain letters: they must not fire while the filter input has focus (it types them).
LETTER_ACTIONS = {
    "cycle_status",
    "cycle_label",
    "cycle_reason",
    "cycle_suggested",
    "cycle_fidelity",
    "cycle_version",
    "cycle_sort",
    "next_page",
    "previous_page",
    "cursor_down",
    "cursor_up",
}


def cycle(options: tuple[str | None, ...], current: str | None) -> str | None:
    """The option after `current` (None = no filter comes first and after the last)."""
    index = options.index(current) if current in options else 0
    return options[(index + 1) % len(options)]


class QueueScreen(WorkerFailures, Screen[None]):
    """Opens first. Pages are read in a worker and shown with one clear + batch add."""

    BINDINGS = [
        QUIT,
        Binding("enter", "open_case", "Open", id="open-case", tooltip="Open the highlighted request"),
        Binding("slash", "filter_text", "Filter", id="filter-text", tooltip="Filter by query text"),
        Binding("s", "cycle_status", "Status", id="filter-status", tooltip="Cycle the status filter"),
        Binding("b", "cycle_label", "Label", id="filter-label", tooltip="Cycle the label filter"),
        Binding("w", "cycle_reason", "Reason", id="filter-reason", tooltip="Cycle the flag-reason filter"),
        Binding(
            "u",
            "cycle_suggested",
            "Suggested",
            id="filter-suggested",
            tooltip="Cycle the suggested-root-cause filter",
        ),
        Binding(
            "f",
            "cycle_fidelity",
            "Fidelity",
            id="filter-fidelity",
            tooltip="Cycle the replay-fidelity filter (exact, diverged, unexplained, unmeasured)",
            show=False,  # the footer is full at 100 columns; the help screen lists it
        ),
        Binding(
            "v",
            "cycle_version",
            "Version",
            id="filter-version",
            tooltip="Cycle the pipeline_version filter over the versions production logged (a canary's cases)",
            show=False,  # the footer is full at 100 columns; the help screen lists it
        ),
        Binding("o", "cycle_sort", "Sort", id="sort-queue", tooltip="Cycle the sort order"),
        Binding("right_square_bracket,pagedown", "next_page", "Next page", id="next-page"),
        Binding("left_square_bracket,pageup", "previous_page", "Prev page", id="previous-page"),
        Binding("f5,ctrl+r", "reload", "Reload", id="reload-queue"),
        Binding("j", "cursor_down", "Down", id="cursor-down", show=False),
        Binding("k", "cursor_up", "Up", id="cursor-up", show=False),
        Binding("escape", "clear_filters", "Clear filters", id="clear-filters", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.status: str | None = None
        self.label: str | None = None
        self.reason: str | None = None
        self.suggested: str | None = None
        self.fidelity: str | None = None
        self.version: str | None = None
        self.versions: tuple[str, ...] = ()
        """The pipeline versions of flagged requests, most requests first (`v` cycles them)."""
        self.text_filter: str | None = None
        self.sort = "newest"
        self.page_offset = 0
        self.total = 0
        self.counts = QueueCounts()

    SUB_TITLE = "queue"

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield CountsBar(id="queue-counts")
        yield Input(placeholder="filter by query text (enter applies, escape clears)", id="queue-filter")
        yield QueueTable(id="queue-table")
        yield Static(id="queue-preview", markup=False)
        yield Footer()

    @property
    def queue_table(self) -> QueueTable:
        return self.query_one(QueueTable)

    @property
    def filter_input(self) -> Input:
        return self.query_one("#queue-filter", Input)

    def on_mount(self) -> None:
        self.filter_input.display = False
        self.queue_table.focus()
        self.reload()

    def on_screen_resume(self) -> None:
        if self.is_mounted and self.queue_table.row_count:
            self.reload()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Letter keys do nothing while the filter input has focus (known fault 24)."""
        if action in LETTER_ACTIONS and isinstance(self.focused, Input):
            return False
        return True

    def filters_text(self) -> str:
        """The active filters and sort, for the counts line."""
        parts = [
            f"{name}={value}"
            for name, value in (
                ("status", self.status),
                ("label", self.label),
                ("reason", self.reason),
                ("suggested", self.suggested),
                ("fidelity", self.fidelity),
                ("version", self.version),
                ("text", self.text_filter),
            )
            if value
        ]
        if self.sort != "newest":
            parts.append(f"sort={self.sort}")
        return " ".join(parts)

    def reload(self, offset: int | None = None, *, counts: bool = True) -> None:
        """Read the page at `offset` (default: the current one) in a worker; `counts` re-counts too."""
        if offset is not None:
            self.page_offset = max(0, offset)
        self.load_page(self.page_offset, counts)

    @work(thread=True, exclusive=True, exit_on_error=False, group="queue")
    def load_page(self, offset: int, with_counts: bool = True) -> None:
        """One page (plus the counts unless only the page changed), read in a thread."""
        engine = host(self.app).workspace.engine
        page = list_queue(
            engine,
            status=self.status,
            label=self.label,
            reason=self.reason,
            suggested=self.suggested,
            text=self.text_filter,
            sort=self.sort,
            fidelity=self.fidelity,
            version=self.version,
            limit=PAGE_SIZE,
            offset=offset,
        )
        counts = queue_counts(engine) if with_counts else self.counts
        versions = tuple(queue_versions(engine)) if with_counts else self.versions
        if not get_current_worker().is_cancelled:
            self.post_message(QueueLoaded(page, counts, versions))

    @on(QueueLoaded)
    def _show_page(self, message: QueueLoaded) -> None:
        page = message.page
        self.total, self.counts, self.page_offset = page.total, message.counts, page.offset
        self.versions = message.versions
        self.queue_table.show_page(page.items)
        self.show_preview(self.queue_table.highlighted_request_id)
        self.query_one(CountsBar).show(
            message.counts, page.total, page.offset, len(page.items), self.filters_text()
        )

    @on(DataTable.RowHighlighted, "#queue-table")
    def _preview_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_preview(str(event.row_key.value) if event.row_key is not None else None)

    def show_preview(self, request_id: str | None) -> None:
        """The highlighted row whole on the line under the table: its query, flag reasons,
        suggested cause and label (a narrow table leaves some of them out)."""
        preview = self.query_one("#queue-preview", Static)
        item = self.queue_table.item(request_id) if request_id is not None else None
        if item is None:
            preview.update(Text("no flagged request matches; escape clears the filters", style="dim"))
            return
        line = Text(f"{item.request_id}: ", style="bold")
        line.append(item.raw_query)
        details = [f"flagged: {', '.join(item.reasons)}"]
        if item.pipeline_version:
            details.append(f"version {item.pipeline_version}")
        if item.suggested_label:
            details.append(f"suggested {item.suggested_label}")
        details.append(f"label {item.primary_label}" if item.primary_label else "no label")
        line.append(f"  ({'; '.join(details)})", style="italic")
        preview.update(line)

    @on(DataTable.RowSelected, "#queue-table")
    def _open_selected(self, event: DataTable.RowSelected) -> None:
        self.open_case(str(event.row_key.value))

    def action_open_case(self) -> None:
        request_id = self.queue_table.highlighted_request_id
        if request_id is not None:
            self.open_case(request_id)

    def open_case(self, request_id: str) -> None:
        """Push the case screen of `request_id`."""
        self.app.push_screen(CaseScreen(request_id))

    def action_filter_text(self) -> None:
        self.filter_input.display = True
        self.filter_input.focus()

    @on(Input.Submitted, "#queue-filter")
    def _apply_text(self, event: Input.Submitted) -> None:
        self.text_filter = event.value.strip() or None
        if self.text_filter is None:
            self.filter_input.display = False
        self.queue_table.focus()
        self.reload(0)

    def action_clear_filters(self) -> None:
        self.status = self.label = self.reason = self.suggested = self.fidelity = None
        self.version = self.text_filter = None
        self.filter_input.value = ""
        self.filter_input.display = False
        self.queue_table.focus()
        self.reload(0)

    def action_cycle_status(self) -> None:
        self.status = cycle((None, *TRIAGE_STATUSES), self.status)
        self.reload(0)

    def action_cycle_label(self) -> None:
        self.label = cycle((None, *LABELS), self.label)
        self.reload(0)

    def action_cycle_reason(self) -> None:
        # Besides the flag rules: requests drawn by `queue sample`.
        self.reason = cycle((None, *REASONS, SAMPLED_REASON), self.reason)
        self.reload(0)

    def action_cycle_suggested(self) -> None:
        self.suggested = cycle((None, *LABELS, "unknown"), self.suggested)
        self.reload(0)

    def action_cycle_fidelity(self) -> None:
        self.fidelity = cycle((None, *FIDELITY_FILTERS), self.fidelity)
        self.reload(0)

    def action_cycle_version(self) -> None:
        if not self.versions and self.version is None:
            self.notify("no flagged request logged a pipeline_version", markup=False)
            return
        self.version = cycle((None, *self.versions), self.version)
        self.reload(0)

    def action_cycle_sort(self) -> None:
        self.sort = str(cycle(tuple(QUEUE_SORTS), self.sort))
        self.reload(0)

    def action_next_page(self) -> None:
        if self.page_offset + PAGE_SIZE < self.total:
            self.reload(self.page_offset + PAGE_SIZE, counts=False)

    def action_previous_page(self) -> None:
        if self.page_offset > 0:
            self.reload(self.page_offset - PAGE_SIZE, counts=False)

    def action_reload(self) -> None:
        self.reload()

    def action_cursor_down(self) -> None:
        self.queue_table.action_cursor_down()

    def action_cursor_up(self) -> None:
        self.queue_table.action_cursor_up()
