"""Benchmark: the production knobs on production's own route lists (issue 25 item 1, 3, 4).

Feeds each request's logged routes of the hand-written production (`tests/plain_production.py`,
built in `--root`) to ragtriage's weighted fusion (per-route normalisation, keep 10) and its
features-only rerank (`title_match = "tokens"`), and counts the requests whose fused list, reranked
list and final context equal production's. BM25 differences (document-side analysis, no knob) take
no part. Usage:

    .venv/bin/python scripts/bench_knobs.py --root /tmp/knobs-prod   # built once if absent (~1.5 min)
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("/tmp/knobs-prod"))
    args = parser.parse_args()

    from ragtriage.config.settings import RerankSettings
    from ragtriage.index.analyzer import normalize_text, query_terms
    from ragtriage.pipeline.fusion import weighted_fusion
    from ragtriage.pipeline.normalize import normalize_query
    from ragtriage.pipeline.rerank import Reranker, RerankItem
    from tests.plain_production import CANARY, FIXTURES_DIR, MAIN, TITLE_WEIGHT, build

    if not (args.root / "prod_rag" / "search.py").exists():
        build(args.root)
    sys.path.insert(0, str(args.root))
    search = importlib.import_module("prod_rag.search")
    lines = (FIXTURES_DIR / "debian_queries" / "faq.jsonl").read_text(encoding="utf-8").splitlines()
    stop = frozenset(normalize_text(w) for w in search.STOP_WORDS)
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    counts = {v: {"requests": 0, "fused": 0, "reranked": 0, "final": 0} for v in (MAIN, CANARY)}
    for number, line in enumerate(lines):
        query = json.loads(line)["query"]
        version = CANARY if number % 3 == 2 else MAIN
        routes, fused, reranked, final = search.serve(query, TITLE_WEIGHT[version])
        mine = weighted_fusion(
            routes,
            {"dense_raw": 0.7, "bm25_raw": 0.3},
            normalization={"dense_raw": "none", "bm25_raw": "max"},
            top_n=10,
        )
        weights = {"rrf": 1.0, "title_hit": TITLE_WEIGHT[version], "freshness": 0.0, "product_line": 0.0}
        weights.update(key_terms=0.0, bm25_score=0.0, dense_score=0.0)
        reranker = Reranker(RerankSettings(title_match="tokens", weights=weights), now=lambda: now)  # type: ignore[arg-type]
        keywords = query_terms(normalize_query(query), segmentation="search", stop_words=stop)
        items = [
            RerankItem(chunk_id=c.chunk_id, rrf_score=c.score, title=search.titles()[c.chunk_id])
            for c in mine
        ]
        ranked = [c.chunk_id for c in reranker.rerank(query, keywords, items, now=now).reranked]
        count = counts[version]
        count["requests"] += 1
        count["fused"] += [c.chunk_id for c in mine] == [c for c, _ in fused]
        count["reranked"] += ranked == [c for c, _ in reranked]
        count["final"] += ranked[:3] == list(final)
    print(json.dumps(counts, indent=2))


if __name__ == "__main__":
    main()
