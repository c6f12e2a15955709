"""Benchmark `eval run` against its floor and against a plain sequential loop, in one process.

    python scripts/bench_eval_run.py --home HOME [--cases 1000] [--workers 1] [--batch-size 32] [--json]

Cases are generated from the KB's chunks (heading, then first sentence; gold = that chunk) and
stored as dataset `bench-<N>`. Three timings on the same warm pipeline:

- floor: the query embeddings (batched, the texts the routes need) plus the BM25 searches, alone;
- eval run: `run_eval` (batched `run_many`, results stored per batch);
- sequential: `Pipeline.run(query)` once per case, nothing stored.

Targets (issue 5): eval run ≤ 1.5 × floor, and ≥ 3 × faster than the sequential loop.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from ragtriage.eval.cases import EvalCase
from ragtriage.eval.runner import run_eval
from ragtriage.kb.service import list_chunks
from ragtriage.pipeline.normalize import normalize_query, normalize_text
from ragtriage.store import eval_repo as eval_store
from ragtriage.workspace import Workspace

_SENTENCE_END = re.compile(r"(?<=[。！？!?.;；])\s*")


def make_cases(workspace: Workspace, n: int) -> list[EvalCase]:
    """`n` cases cycling over chunks: heading (last heading-path element or title), then first sentence."""
    chunks = [
        c
        for c in list_chunks(workspace.engine, workspace.settings.kb.name, include_content=True)
        if c.status == "published"
    ]
    if not chunks:
        raise SystemExit(
            f"{workspace.home}: the KB has no published chunks; add documents with `ragtriage kb add`"
        )
    queries: list[tuple[str, str]] = []
    for chunk in chunks:
        heading = (chunk.heading_path[-1] if chunk.heading_path else chunk.title).strip()
        if heading:
            queries.append((heading[:60], chunk.chunk_id))
    for chunk in chunks:
        first = next((s for s in _SENTENCE_END.split(normalize_text(chunk.content)) if len(s) >= 6), "")
        if first:
            queries.append((first[:80], chunk.chunk_id))
    return [
        EvalCase(
            case_id=f"b{i:05d}", query=queries[i % len(queries)][0], gold={queries[i % len(queries)][1]: 1}
        )
        for i in range(n)
    ]


def floor_seconds(workspace: Workspace, queries: list[str], batch_size: int) -> float:
    """Time only the query embeddings (batched) and the BM25 searches the configured routes need."""
    pipeline = workspace.pipeline
    settings = workspace.settings
    routes = set(settings.retrieval.routes)
    started = time.perf_counter()
    for start in range(0, len(queries), batch_size):
        dense_texts: list[str] = []
        bm25_texts: list[str] = []
        for query in queries[start : start + batch_size]:
            normalized = normalize_query(query)
            rewrite = pipeline.rules.rewrite(query, normalized)
            rewritten = normalize_text(rewrite.rewritten_query) or normalized
            if "dense_raw" in routes:
                dense_texts.append(normalized)
            if "bm25_raw" in routes:
                bm25_texts.append(normalized)
            if rewritten != normalized:
                if "dense_rewritten" in routes:
                    dense_texts.append(rewritten)
                if "bm25_rewritten" in routes:
                    bm25_texts.append(rewritten)
            if "dense_sub" in routes:
                dense_texts.extend(
                    s for s in map(normalize_text, rewrite.sub_queries) if s and s != normalized
                )
        if dense_texts and pipeline.embedder is not None:
            pipeline.embedder.embed_queries(list(dict.fromkeys(dense_texts)))
        if pipeline.bm25 is not None:
            for text in bm25_texts:
                pipeline.bm25.search(text, settings.retrieval.bm25_k)
    return time.perf_counter() - started


def main() -> None:
    """Parse arguments, run the three timings, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="Data folder with an indexed KB.")
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--sequential-cases",
        type=int,
        default=None,
        help="Time the sequential loop on this many cases and scale up [all].",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    workspace = Workspace.open(args.home, args.config)
    dataset = f"bench-{args.cases}"
    cases = make_cases(workspace, args.cases)
    eval_store.add_cases(workspace.engine, dataset, cases, provenance={"source": "bench_eval_run"})
    queries = [c.query for c in cases]
    pipeline = workspace.pipeline
    pipeline.run(queries[0])  # warm: model load, searcher open, chunk metadata

    floor = floor_seconds(workspace, queries, args.batch_size)
    tick = time.perf_counter()
    summary = run_eval(workspace, dataset, name="bench", workers=args.workers, batch_size=args.batch_size)
    eval_wall = time.perf_counter() - tick
    loop_cases = min(args.sequential_cases or len(queries), len(queries))
    tick = time.perf_counter()
    for query in queries[:loop_cases]:
        pipeline.run(query)
    sequential = (time.perf_counter() - tick) * len(queries) / loop_cases
    workspace.close()

    figures = {
        "home": str(args.home),
        "cases": len(cases),
        "kb_revision": summary.kb_revision,
        "workers": args.workers,
        "batch_size": args.batch_size,
        "status": summary.status,
        "floor_s": round(floor, 3),
        "eval_run_s": round(eval_wall, 3),
        "sequential_s": round(sequential, 3),
        "sequential_measured_cases": loop_cases,
        "eval_over_floor": round(eval_wall / floor, 3) if floor else None,
        "speedup_over_sequential": round(sequential / eval_wall, 3) if eval_wall else None,
        "recall@5": summary.aggregates.get("means", {}).get("recall@5"),
        "targets": {"eval_over_floor_max": 1.5, "speedup_over_sequential_min": 3.0},
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for key, value in figures.items():
        print(f"{key:28} {value}")
    # Machine-readable lines for scripts/bench.py (see docs/benchmarks.md).
    print(f"RESULT name=eval_run value={eval_wall:.2f} unit=s target=ratio<=1.5 "
          f"ratio={figures['eval_over_floor']} baseline=floor cases={len(cases)}")  # fmt: skip
    speedup = figures["speedup_over_sequential"]
    print(f"RESULT name=eval_run_speedup value={speedup} unit=x target=>=3 "
          f"ratio={speedup} baseline=sequential_loop cases={len(cases)}")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
