"""`TriageApp`: the Textual face of ragtriage. Small on purpose: screens own their workers."""

from __future__ import annotations

import threading

from textual import work
from textual.app import App
from textual.binding import Binding

from ragtriage.tui.screens.eval_screen import EvalScreen
from ragtriage.tui.screens.help_screen import HelpScreen
from ragtriage.tui.screens.monitor_screen import MonitorScreen
from ragtriage.tui.screens.queue_screen import QueueScreen
from ragtriage.tui.screens.worker_failures import WorkerFailures
from ragtriage.workspace import Workspace


class TriageApp(App[None]):
    """Receives its services (the workspace) in the constructor; opens on the queue."""

    CSS_PATH = "app.tcss"
    TITLE = "ragtriage"
    SUB_TITLE = ""
    """Each screen names itself in the header (`queue`, `case REQUEST_ID`, `eval runs`)."""
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True, show=False),  # screens show q
        Binding("f1,question_mark", "help", "Help", id="help", tooltip="Show every key and its binding id"),
        Binding("e", "open_eval", "Eval", id="open-eval", tooltip="Runs, metrics and comparisons"),
        Binding(
            "m", "open_monitor", "Monitor", id="open-monitor", tooltip="Retrieval health per day or version"
        ),
    ]

    def __init__(self, workspace: Workspace, *, warm_up: bool = True) -> None:
        super().__init__()
        self.workspace = workspace
        self.pipeline_ready = threading.Event()
        """Set once the pipeline (indexes, embedder) is built; replay and eval workers wait for it."""
        self._warm_up = warm_up

    def on_mount(self) -> None:
        self.set_keymap(self.workspace.settings.keymap)
        self.push_screen(QueueScreen())
        if self._warm_up:
            self.warm_up()
        else:
            self.pipeline_ready.set()

    @work(thread=True, exclusive=True, exit_on_error=False, group="warm-up")
    def warm_up(self) -> None:
        """Open the indexes and load the embedder once, off the UI thread."""
        try:
            self.workspace.pipeline.warm_up()
        finally:
            self.pipeline_ready.set()

    def on_worker_state_changed(self, event: object) -> None:
        """The app's own worker (warm-up) reports failures like the screens do."""
        WorkerFailures.on_worker_state_changed(self, event)  # type: ignore[arg-type]

    def on_worker_failed(self, _worker: object) -> None:
        """Nothing to reset at the app level."""

    def action_help(self) -> None:
        # Keys as bound now (keymap overrides applied), by binding id; the class lists keep shadowed ones.
        current: dict[str, list[str]] = {}
        for active in self.screen.active_bindings.values():
            if active.binding.id:
                current.setdefault(active.binding.id, []).append(self.get_key_display(active.binding))
        declared = [b for b in (*type(self.screen).BINDINGS, *type(self).BINDINGS) if isinstance(b, Binding)]
        rows = [
            (", ".join(current.get(b.id or "", [b.key])), b.description or b.action, b.id or "")
            for b in declared
        ]
        self.push_screen(HelpScreen(rows))

    def action_open_eval(self) -> None:
        if not isinstance(self.screen, EvalScreen):
            self.push_screen(EvalScreen())

    def action_open_monitor(self) -> None:
        if not isinstance(self.screen, MonitorScreen):
            self.push_screen(MonitorScreen())

    def on_unmount(self) -> None:
        self.workspace.close()
