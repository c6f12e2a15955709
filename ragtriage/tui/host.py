"""What the screens need of the app (its workspace, the pipeline-ready event, the quit key), as a
Protocol and a binding: screens reach `TriageApp` through `self.app` without importing the app
module that imports them."""

from __future__ import annotations

import threading
from typing import Protocol, cast

from textual.binding import Binding

from ragtriage.workspace import Workspace


class TriageHost(Protocol):
    """The services `TriageApp` holds for its screens."""

    workspace: Workspace
    pipeline_ready: threading.Event
    """Set once the pipeline is built; replay and eval workers wait for it."""


def host(app: object) -> TriageHost:
    """`app` (a screen's `self.app`) as the `TriageApp` it is."""
    return cast(TriageHost, app)


#: First in every screen's bindings, so the footer shows it even at 80 columns (app bindings come
#: last there, and a modal screen hides them). A focused text input types the q instead.
QUIT = Binding("q", "app.quit", "Quit", id="quit-q", tooltip="Quit ragtriage (ctrl+q also quits)")
