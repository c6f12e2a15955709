"""What the service's handlers share: the workspace for reads, a factory for fresh ones, the runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fastapi import Request

from ragtriage.service.jobs import EvalJobs
from ragtriage.workspace import Workspace


@dataclass
class ServiceState:
    """One per app: `workspace` serves reads and triage writes (short store sessions); runs and
    diagnoses open a workspace of their own so their pipeline is closed when they end."""

    workspace: Workspace
    jobs: EvalJobs

    @classmethod
    def open(cls, home: Path | None, config_file: Path | None) -> ServiceState:
        """Read the settings once (a bad settings file fails here, before the server listens)."""
        workspace = Workspace.open(home, config_file)
        return cls(workspace, EvalJobs(lambda: Workspace.open(workspace.home, workspace.config_file)))

    def fresh_workspace(self) -> Workspace:
        """A new workspace on the same home and settings (close it when done)."""
        return Workspace.open(self.workspace.home, self.workspace.config_file)

    def close(self) -> None:
        """Stop the runs and release the store."""
        self.jobs.stop_all()
        self.workspace.close()


def service_state(request: Request) -> ServiceState:
    """FastAPI dependency: the app's `ServiceState`."""
    state: ServiceState = request.app.state.service
    return state
