"""Benchmark the service face on stored runs: one API page of case results and the HTML comparison report.

Two runs of N cases with 30 candidates each are written straight into a fresh store (what the
runner would store; no replay, so the figures are the face's own cost). Then:
- `api_page_ms`: `GET /api/v1/retrieval/evaluations/{run}?limit=50` through FastAPI's test client
  (p50 of 20), against the in-run baseline of reading the same 50 rows with `run_case_results`
  (target: the API's own work at most 5 x that read);
- `report_s`: `render_report(A, compare=B)` (charts, significance test, worst cases) against the
  in-run baseline of `compare_runs` alone, the core comparison the report shows (target: the report
  costs at most as much again as that comparison).

    .venv/bin/python scripts/bench_service.py --cases 1000 --workdir /tmp/ragtriage-bench
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from ragtriage.eval.cases import EvalCase
from ragtriage.eval.runner import summarize_run
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.eval_tables import EvalRunCaseRow, EvalRunRow
from ragtriage.workspace import Workspace

ROUTES = ("bm25_raw", "dense_raw", "dense_rewritten")
TAGS = ("财务", "人事", "it", "行政", "法务")


def _snapshot(rng: random.Random, gold: str, strength: float) -> tuple[dict[str, float], dict[str, object]]:
    """Metrics and a 30-candidate snapshot where gold sits higher the larger `strength` is."""
    pool = [f"chunk-{rng.randrange(50_000):05d}" for _ in range(29)]
    gold_rank = max(1, min(30, int(rng.expovariate(strength)) + 1))
    pool.insert(gold_rank - 1, gold)
    final = pool[:6]
    candidates = []
    for rank, chunk_id in enumerate(pool, start=1):
        routes = {r: [rng.randint(1, 10), round(rng.random(), 6)] for r in ROUTES if rng.random() < 0.6}
        candidates.append(
            {
                "chunk_id": chunk_id,
                "doc_id": chunk_id.split("-")[0],
                "routes": routes,
                "fused": [rank, round(1 / (60 + rank), 6)],
                "reranked": [rank, round(1 - rank / 31, 6)] if rank <= 20 else None,
                "final_rank": rank if rank <= 6 else None,
                "is_selected": rank <= 6,
                "is_relevant": chunk_id == gold,
            }
        )
    hit = gold_rank <= 6
    metrics = {
        "recall@5": float(gold_rank <= 5),
        "mrr": 1 / gold_rank if hit else 0.0,
        "ndcg@10": 1 / (1 + gold_rank).bit_length() if gold_rank <= 10 else 0.0,
        "hit@5": float(gold_rank <= 5),
    }
    shift = rng.randint(-3, 3)
    snapshot = {
        "final": final,
        "candidates": candidates,
        "rank_shift": [{"id": gold, "before": gold_rank + shift, "after": gold_rank, "shift": shift}],
    }
    return metrics, snapshot


def fill(workspace: Workspace, cases: int) -> tuple[int, int]:
    """A dataset of `cases` cases and two complete runs of it; returns the run ids."""
    rng = random.Random(7)
    engine = workspace.engine
    eval_cases = [
        EvalCase(
            case_id=f"q{i:05d}", query=f"第 {i} 个问题怎么办", gold={f"gold-{i}": 1}, tags=[rng.choice(TAGS)]
        )
        for i in range(cases)
    ]
    version = eval_store.add_cases(engine, "bench", eval_cases).dataset_version
    run_ids = []
    for name, strength in (("before", 0.6), ("after", 0.7)):
        run = eval_store.create_run(
            engine, EvalRunRow(name=name, dataset="bench", dataset_version=version, case_count=cases)
        )
        rows = []
        for case in eval_cases:
            metrics, snapshot = _snapshot(rng, next(iter(case.gold)), strength)
            rows.append(
                EvalRunCaseRow(
                    run_id=0,
                    case_id=case.case_id,
                    metrics=metrics,
                    snapshot=snapshot,
                    buckets=[f"tag:{case.tags[0]}"],
                )
            )
        eval_store.save_case_results(engine, int(run.id or 0), rows)
        stored = eval_store.get_run(engine, int(run.id or 0))
        eval_store.update_run(engine, int(run.id or 0), status="complete", **summarize_run(engine, stored))
        run_ids.append(int(run.id or 0))
    return run_ids[0], run_ids[1]


def _p50(samples: list[float]) -> float:
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    from fastapi.testclient import TestClient

    from ragtriage.eval.compare import compare_runs
    from ragtriage.service.app import create_app
    from ragtriage.service.report import render_report

    root = Path(tempfile.mkdtemp(prefix="bench-service-", dir=args.workdir))
    workspace = Workspace.open(root / "home", None)
    run_a, run_b = fill(workspace, args.cases)
    engine = workspace.engine

    direct = []
    for _ in range(20):
        started = time.perf_counter()
        eval_store.run_case_results(engine, run_a, offset=args.cases // 2, limit=50)
        direct.append((time.perf_counter() - started) * 1000)
    with TestClient(create_app(root / "home")) as client:
        api = []
        for _ in range(20):
            started = time.perf_counter()
            response = client.get(
                f"/api/v1/retrieval/evaluations/{run_a}", params={"offset": args.cases // 2}
            )
            api.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200 and len(response.json()["cases"]["items"]) == 50
    render_report(engine, run_a, compare=run_b)  # warm: imports matplotlib and Jinja2 once
    started = time.perf_counter()
    compare_runs(engine, run_a, run_b)
    compare_s = time.perf_counter() - started
    started = time.perf_counter()
    html = render_report(engine, run_a, compare=run_b)
    report_s = time.perf_counter() - started
    workspace.close()
    print(
        f"RESULT name=api_page_ms value={_p50(api):.1f} unit=ms target=ratio<=5 "
        f"ratio={_p50(api) / _p50(direct):.1f} baseline=run_case_results_page_{_p50(direct):.1f}ms "
        f"cases={args.cases} page=50"
    )
    print(
        f"RESULT name=report_s value={report_s:.2f} unit=s target=ratio<=2 ratio={report_s / compare_s:.1f} "
        f"baseline=compare_runs_{compare_s:.2f}s cases={args.cases} html_kb={len(html.encode()) // 1024}"
    )


if __name__ == "__main__":
    main()
