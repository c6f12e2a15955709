"""Which stored run a command works on: the one named, else the newest complete run of a dataset."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from ragtriage.errors import NotFoundError
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.eval_tables import EvalRunRow
from ragtriage.wording import quoted


def run_or_newest(engine: Engine, run_ref: str | None, dataset: str) -> EvalRunRow:
    """Run `run_ref` (id or name), or the newest complete run of `dataset`.

    Raises:
        NotFoundError: no such run, or `dataset` has no complete run.
    """
    if run_ref is not None:
        return eval_store.get_run(engine, run_ref)
    complete = [run for run in eval_store.list_runs(engine, dataset) if run.status == "complete"]
    if not complete:
        raise NotFoundError(
            f"eval set {quoted(dataset)} has no complete run; run `ragtriage eval run` first, or name one with --run"
        )
    return complete[0]
