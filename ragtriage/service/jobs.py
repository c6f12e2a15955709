"""Evaluation runs started over HTTP: each runs `run_eval` in a background thread of the server.

`start` opens a fresh workspace (its own pipeline), checks what can fail up front — an unknown
dataset, indexes held by another process — and returns as soon as the runner has written the run
row, so the caller gets the run id at once. Progress is the stored `cases_done` (readable from any
process) plus what this server saw; stopping the server stops its runs between batches and leaves
them `incomplete`, resumable with `ragtriage eval run --resume RUN`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ragtriage.config.profiles import resolve_profile
from ragtriage.errors import RagtriageError
from ragtriage.eval.runner import run_eval
from ragtriage.store import eval_repo as eval_store
from ragtriage.wording import quoted
from ragtriage.workspace import Workspace

logger = logging.getLogger(__name__)

#: How long `start` waits for the runner to write the run row (opening the indexes comes before).
START_TIMEOUT_S = 120.0


@dataclass
class EvalJob:
    """One run this server started: its id, progress as the runner reported it, and how it ended."""

    dataset: str
    run_id: int | None = None
    cases_done: int = 0
    case_count: int = 0
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    error: str | None = None
    """The CLI's line for a run that stopped on an error (`title: message`)."""
    failure: BaseException | None = field(default=None, repr=False)
    thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def alive(self) -> bool:
        """True while the background thread still works on the run."""
        return self.thread is not None and self.thread.is_alive()


class EvalJobs:
    """The runs started by this server process."""

    def __init__(self, open_workspace: Callable[[], Workspace]) -> None:
        self._open_workspace = open_workspace
        self._jobs: dict[int, EvalJob] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def start(
        self,
        dataset: str,
        *,
        name: str | None = None,
        workers: int = 1,
        batch_size: int = 32,
        profile: str | None = None,
    ) -> EvalJob:
        """Start evaluating `dataset` and return once the run has an id.

        Raises:
            NotFoundError: unknown dataset or profile. IndexLockedError: the indexes are held by
                another process.
            RagtriageError: anything else the runner refuses before the run exists.
        """
        workspace = self._open_workspace()
        try:
            eval_store.dataset_version(workspace.engine, dataset)
            if profile is not None:
                workspace.pipeline_for(resolve_profile(workspace.settings, None, profile))
            else:
                _ = workspace.pipeline  # opens the indexes now: a held folder is a 409, not a dead run
        except BaseException:
            workspace.close()
            raise
        job = EvalJob(dataset=dataset)
        started = threading.Event()

        def on_started(run_id: int) -> None:
            job.run_id = run_id
            with self._lock:
                self._jobs[run_id] = job
            started.set()

        def on_progress(done: int, total: int) -> None:
            job.cases_done, job.case_count = done, total

        def work() -> None:
            try:
                run_eval(
                    workspace,
                    dataset,
                    name=name,
                    workers=workers,
                    batch_size=batch_size,
                    profile=profile,
                    on_started=on_started,
                    on_progress=on_progress,
                    should_stop=self._stopping.is_set,
                )
            except RagtriageError as error:
                job.error, job.failure = f"{error.title}: {error}", error
            except Exception as error:  # a bug: keep it in the log and on the run's view
                logger.exception("evaluation run %s failed", job.run_id)
                job.error, job.failure = f"internal error: {type(error).__name__}: {error}", error
            finally:
                job.finished_at = time.time()
                workspace.close()
                started.set()

        job.thread = threading.Thread(target=work, name=f"eval-{dataset}", daemon=True)
        job.thread.start()
        started.wait(START_TIMEOUT_S)
        if job.run_id is None:
            if job.failure is not None:
                raise job.failure
            raise RagtriageError(
                f"the evaluation of {quoted(dataset)} did not start within {START_TIMEOUT_S:.0f} s"
            )
        return job

    def get(self, run_id: int) -> EvalJob | None:
        """The job of a run this server started, or None."""
        with self._lock:
            return self._jobs.get(run_id)

    def stop_all(self, timeout_s: float = 30.0) -> None:
        """Ask every run to stop after its current batch and wait for them (server shutdown)."""
        self._stopping.set()
        with self._lock:
            threads = [job.thread for job in self._jobs.values() if job.thread is not None]
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
