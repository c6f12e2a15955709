"""The one place worker failures are turned into notifications (the app keeps running)."""

from __future__ import annotations

from textual.worker import Worker, WorkerState

from ragtriage.errors import RagtriageError


class WorkerFailures:
    """Mixin for screens that own workers: a failed worker becomes an error notification."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Notify on `ERROR`; expected errors show their one-line message, bugs their type too."""
        if event.state != WorkerState.ERROR or event.worker.error is None:
            return
        error = event.worker.error
        if isinstance(error, RagtriageError):
            message = f"{error.title}: {error}"
        else:
            message = f"{type(error).__name__}: {error}"
        # A mixin of Screen (and TriageApp): `app` comes from the Textual class it is mixed into.
        self.app.notify(  # type: ignore[attr-defined]
            message,
            title=f"{event.worker.name or 'worker'} failed",
            severity="error",
            timeout=8,
            markup=False,
        )
        self.on_worker_failed(event.worker)

    def on_worker_failed(self, worker: Worker[object]) -> None:
        """Hook for screens to reset their state (hide progress, …) after a failure."""
