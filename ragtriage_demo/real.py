"""Answer keys and generated traffic: `ragtriage demo --real` (paraphrased Debian FAQ questions run
through the pipeline and logged) and small test traffic. The fixture demo does not generate traffic:
it ingests `fixtures/logs/requests.jsonl`, written by `scripts/gen_fixture_traffic.py`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from ragtriage.errors import InputError
from ragtriage.pipeline.types import RunOptions, Trace
from ragtriage.workspace import Workspace

#: Request times of generated traffic start here (fixed, so screenshots and tests do not drift).
TRAFFIC_START = datetime(2026, 11, 2, 8, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class AnswerKey:
    """One known question: its id, text and gold chunk ids ([] = the KB has no answer)."""

    qid: str
    query: str
    gold: list[str]
    tags: list[str] = field(default_factory=list)
    intended_label: str | None = None


def traffic_line(
    request_id: str, ts: datetime, trace: Trace, gold: Sequence[str], *, unhappy: bool = False
) -> str:
    """One request-log line (schema v1) recording `trace` as production served it.

    The user rates it down when no gold chunk reached the final context, or when the KB has no
    answer and the pipeline answered anyway: the honest signal a real user would give.
    """
    from ragtriage.logs.schema import RequestLog

    missed = not any(g in trace.final for g in gold) if gold else not trace.refused
    route_hits = {route.name: route.hits for route in trace.routes}
    record = RequestLog.model_validate(
        {
            "request_id": request_id,
            "ts": ts.isoformat(),
            "session": f"s-{request_id}",
            "raw_query": trace.query,
            "rewrite": {
                "normalized_query": trace.rewrite.normalized_query,
                "rewritten_query": trace.rewrite.rewritten_query,
                "sub_queries": trace.rewrite.sub_queries,
            },
            "stages": {
                "bm25": [{"chunk_id": h.chunk_id, "score": h.score} for h in route_hits.get("bm25_raw", [])],
                "dense": [
                    {"chunk_id": h.chunk_id, "score": h.score} for h in route_hits.get("dense_raw", [])
                ],
                "fused": [{"chunk_id": h.chunk_id, "score": h.score} for h in trace.fused],
                "reranked": [{"chunk_id": h.chunk_id, "score": h.score} for h in trace.reranked],
                "final_context": list(trace.final),
            },
            "citations": list(trace.final[:2]),
            "answer": "抱歉，没有找到相关内容。" if trace.refused else "(demo answer)",
            "feedback": {"rating": "down" if missed or unhappy else "up"},
            "config_hash": trace.config_hash,
        }
    )
    return record.to_line()


#: The deliberately imperfect "production" that served the `--real` traffic: few hits per route and
#: a short final context, like `fixtures/logs/production.toml`, so some answers miss and get flagged.
REAL_PRODUCTION = RunOptions(bm25_k=3, dense_k=3, candidate_pool=6, top_n=2)
#: Users also rate down answers whose retrieval was right (the answer was badly written): every
#: N-th generated request is rated down regardless, which diagnosis should call `generation_error`.
UNHAPPY_EVERY = 9


def generate_traffic(
    workspace: Workspace,
    keys: Sequence[AnswerKey],
    prefix: str,
    options: RunOptions | None = None,
    unhappy_every: int | None = None,
) -> list[str]:
    """Run every answer-key query through the pipeline once (with `options`) and log it, one a minute.

    With `unhappy_every`, every N-th request is rated down even when its gold was retrieved.
    """
    traces = workspace.pipeline.run_many([key.query for key in keys], options=options)
    return [
        traffic_line(
            f"{prefix}-{key.qid}",
            TRAFFIC_START + timedelta(minutes=i),
            trace,
            key.gold,
            unhappy=bool(unhappy_every) and i % unhappy_every == unhappy_every - 1,  # type: ignore[operator]
        )
        for i, (key, trace) in enumerate(zip(keys, traces, strict=True))
    ]


def real_kb_folder(home: Path, debs_dir: Path | None = None) -> Path:
    """The Debian FAQ HTML, extracted once into `<home>/debian/faq` (the Reference is left out: embedding time)."""
    from ragtriage_demo.debian_docs import DEFAULT_DEBS_DIR, ExtractError, extract

    target = home / "debian"
    faq = target / "faq"
    if faq.is_dir() and any(faq.iterdir()):
        return faq
    try:
        extract(debs_dir or DEFAULT_DEBS_DIR, target)
    except ExtractError as error:
        raise InputError(f"--real: {error}") from None
    return faq


#: Deterministic rewordings for paraphrased FAQ questions: (pattern, replacement), applied in turn.
PARAPHRASES: tuple[tuple[str, str], ...] = (
    ("如何", "怎么"),
    ("怎样", "怎么"),
    ("什么是", "请问什么是"),
    ("是否", "能不能"),
    ("可以", "能"),
)


def paraphrase(question: str, variant: int) -> str:
    """A simple deterministic paraphrase of an FAQ heading: drop numbering and `？`, apply one rewording."""
    text = re.sub(r"^[\d.\s]+", "", question).strip().rstrip("?？。")
    pattern, replacement = PARAPHRASES[variant % len(PARAPHRASES)]
    changed = text.replace(pattern, replacement, 1)
    return changed if changed != text else f"请问{text}"


def real_answer_keys(workspace: Workspace, limit: int = 120) -> list[AnswerKey]:
    """Paraphrased FAQ questions (section headings) with their section's chunks as gold."""
    from ragtriage.kb.service import list_chunks

    by_heading: dict[str, list[str]] = {}
    for chunk in list_chunks(workspace.engine, workspace.settings.kb.name):
        if chunk.heading_path and len(chunk.heading_path[-1]) >= 4:
            by_heading.setdefault(chunk.heading_path[-1], []).append(chunk.chunk_id)
    keys = [
        AnswerKey(f"faq{i:03d}", paraphrase(heading, i), gold, ["faq"])
        for i, (heading, gold) in enumerate(sorted(by_heading.items())[:limit])
    ]
    return keys
