"""Store runs with chosen per-case metrics in a SQLite file, for compare and gate tests."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from ragtriage.eval.cases import EvalCase
from ragtriage.eval.runner import summarize_run
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.db import make_engine, sqlite_url
from ragtriage.store.eval_tables import EvalRunCaseRow, EvalRunRow


def engine_with_cases(tmp_path: Path, case_ids: list[str], confirmed: tuple[str, ...] = ()) -> Engine:
    """A store with dataset `default` holding one case per id (`confirmed` ones promoted from triage)."""
    engine = make_engine(sqlite_url(tmp_path / "eval.db"))
    cases = [EvalCase(case_id=c, query=f"query {c}", gold={f"g-{c}": 1}, tags=["t"]) for c in case_ids]
    provenances = [
        {"source": "promote", "request_id": f"req-{c}"} if c in confirmed else {"source": "file"}
        for c in case_ids
    ]
    eval_store.add_cases(engine, "default", cases, provenances=provenances)
    return engine


def store_run(
    engine: Engine, per_case: dict[str, dict[str, float]], *, name: str, complete: bool = True
) -> int:
    """A run whose cases scored `per_case`; its aggregates are computed the way the runner does."""
    run = eval_store.create_run(
        engine,
        EvalRunRow(
            name=name, dataset="default", dataset_version=1, case_count=len(per_case), status="running"
        ),
    )
    run_id = int(run.id or 0)
    rows = [
        EvalRunCaseRow(
            run_id=run_id, case_id=case_id, metrics=metrics, buckets=["tag:t", f"case:{case_id[-1]}"]
        )
        for case_id, metrics in per_case.items()
    ]
    eval_store.save_case_results(engine, run_id, rows)
    summary = summarize_run(engine, eval_store.get_run(engine, run_id))
    eval_store.update_run(
        engine,
        run_id,
        status="complete" if complete else "incomplete",
        case_count=len(per_case) + (0 if complete else 1),
        **summary,
    )
    return run_id
