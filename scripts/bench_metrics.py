"""Benchmark: ragtriage's batch metrics against pytrec_eval on the same data, each in a cold process.

    .venv/bin/python scripts/bench_metrics.py [--queries 100000] [--candidates 100] [--repeat 1] [--json]

Each side runs in a fresh Python process that first builds the same seeded data in memory
(rankings as `{qid: [chunk ids]}`, qrels as `{qid: {chunk id: grade}}`; not timed) and then times,
end to end: importing the scorer, converting the input to what it takes (for pytrec_eval the
dict-of-dicts run with strictly decreasing scores), and computing P, recall, success and nDCG at
1, 3, 5, 10, 20 plus MRR for every query and their means. ragtriage is timed twice: up to the
means (what `eval score` and the runner need) and additionally materialising the per-query dicts
(the same shape pytrec_eval returns). The target is ragtriage ≤ 1/3 of pytrec_eval's time.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

KS = (1, 3, 5, 10, 20)
REPO_ROOT = Path(__file__).resolve().parent.parent


def build_data(
    n_queries: int, n_candidates: int, seed: int
) -> tuple[dict[str, list[str]], dict[str, dict[str, int]]]:
    """Seeded rankings and graded qrels; about half of each query's gold is retrieved, at varied ranks."""
    rng = random.Random(seed)
    corpus_size = 50 * n_candidates
    rankings: dict[str, list[str]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for query_index in range(n_queries):
        qid = f"q{query_index}"
        ranked = [f"c{n}" for n in rng.sample(range(corpus_size), n_candidates)]
        gold = {
            f"c{n}": rng.choice((1, 1, 1, 2, 3)) for n in rng.sample(range(corpus_size), rng.randint(0, 3))
        }
        for chunk_id in rng.sample(ranked, rng.randint(0, 3)):
            gold[chunk_id] = rng.choice((1, 1, 2))
        if not gold:
            gold[ranked[-1]] = 1
        rankings[qid] = ranked
        qrels[qid] = gold
    return rankings, qrels


def run_ours(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, object]:
    start = time.perf_counter()
    sys.path.insert(0, str(REPO_ROOT))
    from ragtriage.eval.scoring import score_rankings
    from ragtriage.eval.specs import default_specs

    scores = score_rankings(rankings, qrels, default_specs(KS))
    means = scores.means()
    to_means = time.perf_counter() - start
    per_query = scores.per_query()
    with_dicts = time.perf_counter() - start
    return {
        "seconds": to_means,
        "seconds_with_per_query": with_dicts,
        "means": means,
        "queries": len(per_query),
    }


def run_pytrec_eval(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, object]:
    start = time.perf_counter()
    import pytrec_eval

    # trec_eval orders by score (ties by doc id): strictly decreasing scores keep the given order.
    run = {
        qid: {chunk_id: float(len(ranked) - i) for i, chunk_id in enumerate(ranked)}
        for qid, ranked in rankings.items()
    }
    converted = time.perf_counter() - start
    cut = ",".join(map(str, KS))
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {f"P.{cut}", f"recall.{cut}", f"success.{cut}", f"ndcg_cut.{cut}", "recip_rank"}
    )
    results = evaluator.evaluate(run)
    names = {"P": "p", "recall": "recall", "success": "hit", "ndcg_cut": "ndcg"}
    means: dict[str, float] = {}
    for trec_name, name in names.items():
        for k in KS:
            means[f"{name}@{k}"] = sum(row[f"{trec_name}_{k}"] for row in results.values()) / len(results)
    means["mrr"] = sum(row["recip_rank"] for row in results.values()) / len(results)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "conversion_seconds": converted, "means": means, "queries": len(results)}


def worker(args: argparse.Namespace) -> None:
    rankings, qrels = build_data(args.queries, args.candidates, args.seed)
    result = run_ours(rankings, qrels) if args.worker == "ours" else run_pytrec_eval(rankings, qrels)
    print(json.dumps(result))


def cold_run(side: str, args: argparse.Namespace) -> dict[str, object]:
    command = [sys.executable, __file__, "--worker", side, "--queries", str(args.queries),
               "--candidates", str(args.candidates), "--seed", str(args.seed)]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1, help="cold runs per side; the fastest counts")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", choices=["ours", "pytrec_eval"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    ours_runs, trec_runs = [], []
    for _ in range(args.repeat):  # interleaved so that load on the machine hits both sides alike
        trec_runs.append(cold_run("pytrec_eval", args))
        ours_runs.append(cold_run("ours", args))
    ours = min(ours_runs, key=lambda r: r["seconds_with_per_query"])
    trec = min(trec_runs, key=lambda r: r["seconds"])
    max_diff = max(abs(ours["means"][name] - value) for name, value in trec["means"].items())
    summary = {
        "queries": args.queries,
        "candidates": args.candidates,
        "pytrec_eval_seconds": round(trec["seconds"], 3),
        "pytrec_eval_conversion_seconds": round(trec["conversion_seconds"], 3),
        "ragtriage_seconds": round(ours["seconds"], 3),
        "ragtriage_seconds_with_per_query_dicts": round(ours["seconds_with_per_query"], 3),
        "ratio": round(ours["seconds"] / trec["seconds"], 3),
        "ratio_with_per_query_dicts": round(ours["seconds_with_per_query"] / trec["seconds"], 3),
        "max_abs_difference_of_means": max_diff,
        "target_met": ours["seconds_with_per_query"] <= trec["seconds"] / 3,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(
        f"{args.queries:,} queries x {args.candidates} candidates, cold process each, best of {args.repeat}"
    )
    trec_line = f"pytrec_eval   {trec['seconds']:.3f} s"
    print(f"{trec_line}  (of which dict-of-dicts conversion {trec['conversion_seconds']:.3f} s)")
    ours_line = f"ragtriage     {ours['seconds']:.3f} s to means"
    print(f"{ours_line}; {ours['seconds_with_per_query']:.3f} s with per-query dicts")
    ratios = f"{summary['ratio']:.3f} (to means), {summary['ratio_with_per_query_dicts']:.3f} (with dicts)"
    print(f"ratio         {ratios}; target <= 0.333")
    print(f"means agree   max |difference| = {max_diff:.2e}")
    # Machine-readable line for scripts/bench.py (see docs/benchmarks.md).
    print(f"RESULT name=metrics_batch value={ours['seconds_with_per_query']:.3f} unit=s "
          "target=ratio<=0.333 "
          f"ratio={summary['ratio_with_per_query_dicts']} baseline=pytrec_eval "
          f"queries={args.queries}")  # fmt: skip


if __name__ == "__main__":
    main()
