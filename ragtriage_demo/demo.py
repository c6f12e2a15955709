"""The headless core of `ragtriage demo`: build (or reuse) a home with a KB, traffic, diagnoses and an eval run.

Fixture demo: the KB under `fixtures/kb`, a copy of `fixtures/aliases.toml` as the alias file, the
request logs in `fixtures/logs/requests.jsonl` (or, without that file, traffic replayed from
`fixtures/queries.jsonl` through the pipeline), and the designed queries as the eval set. Real demo:
the Debian FAQ extracted from its `.deb` and traffic over paraphrased FAQ questions. Every step
reuses what the home already holds, so a second run only checks. Nothing here prints.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import func, select

from ragtriage import locations
from ragtriage.errors import InputError
from ragtriage.logs.queue import NOT_DIAGNOSED
from ragtriage.workspace import Workspace
from ragtriage_demo.real import (  # noqa: F401  (re-exported: small test traffic)
    REAL_PRODUCTION,
    TRAFFIC_START,
    UNHAPPY_EVERY,
    AnswerKey,
    generate_traffic,
    real_answer_keys,
    real_kb_folder,
    traffic_line,
)
from ragtriage_demo.summary import DemoSummary, demo_summary  # noqa: F401  (re-exported)

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "fixtures"
FIXTURE_DATASET = "default"
REAL_DATASET = "default"
BASELINE_RUN = "demo-baseline"
DEMO_USER = "demo"
#: Flagged requests diagnosed up front (about 0.5–2 s each); the rest are diagnosed on replay in the TUI.
DEMO_DIAGNOSES = 40
StepCallback = Callable[[str], None]


class DemoReport(BaseModel):
    """What `prepare_demo` did, step by step (`reused` names the steps that found their work done)."""

    home: str
    dataset: str
    documents_added: int = 0
    chunks: int = 0
    requests_ingested: int = 0
    flagged: int = 0
    diagnosed: int = 0
    eval_cases: int = 0
    eval_run_id: int | None = None
    reused: list[str] = Field(default_factory=list)
    seconds: dict[str, float] = Field(default_factory=dict)


def write_demo_config(home: Path, alias_source: Path | None) -> Path:
    """`<home>/config.toml` pointing `rewrite.alias_file` at a copy of the alias file (kept when present).

    The alias file is copied so adding an alias from the TUI never edits the repository's fixture.
    """
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    if config.exists():
        return config
    lines = ["# Written by `ragtriage demo`.\n"]
    if alias_source is not None:
        shutil.copyfile(alias_source, home / "aliases.toml")
        lines += ["[rewrite]\n", 'alias_file = "aliases.toml"\n']
    config.write_text("".join(lines), encoding="utf-8")
    return config


def seed_embedding_cache(workspace: Workspace, folder: Path = FIXTURES / "embeddings") -> int:
    """Load shipped vectors (`<embedder name>.npz`: `hashes`, `vectors`) into the home's embedding cache.

    Vectors are keyed by the hash of the exact passage text, so a changed chunk simply misses and is
    embedded again: a stale file costs time, never correctness. Returns how many vectors were loaded.
    """
    import numpy as np

    from ragtriage.index.dense_sync import CACHE_FILE
    from ragtriage.index.embed_cache import EmbeddingCache

    settings = workspace.settings.embedder
    path = folder / f"{settings.backend}-{settings.model}.npz"
    if not path.exists():
        return 0
    data = np.load(path, allow_pickle=False)
    name = str(data["embedder"])
    cache = EmbeddingCache(locations.cache_dir(workspace.home) / CACHE_FILE)
    try:
        if cache.count(name) >= len(data["hashes"]):
            return 0
        cache.put_many(name, list(zip((str(h) for h in data["hashes"]), data["vectors"], strict=True)))
    finally:
        cache.close()
    return int(len(data["hashes"]))


def fixture_answer_keys(workspace: Workspace, path: Path = FIXTURES / "queries.jsonl") -> list[AnswerKey]:
    """The designed queries with gold chunk ids: chunks of `gold_doc` whose heading path ends in a gold section."""
    from ragtriage.kb.service import list_chunks

    by_section: dict[tuple[str, str], list[str]] = {}
    for chunk in list_chunks(workspace.engine, workspace.settings.kb.name):
        if chunk.heading_path:
            by_section.setdefault((chunk.doc_id, chunk.heading_path[-1]), []).append(chunk.chunk_id)
    keys = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        gold = [
            chunk_id
            for section in item.get("gold_sections") or []
            for chunk_id in by_section.get((item["gold_doc"], section), [])
        ]
        tags = [item["kind"]] + (["holdout"] if item.get("holdout") else [])
        keys.append(AnswerKey(item["qid"], item["query"], gold, tags, item.get("intended_label")))
    return keys


def eval_cases_from_keys(keys: Sequence[AnswerKey]) -> list[Any]:
    """Eval cases (chunk granularity) from answer keys; keys whose gold section was not found are left out."""
    from ragtriage.eval.cases import EvalCase

    return [
        EvalCase(case_id=key.qid, query=key.query, gold={g: 1 for g in key.gold}, tags=list(key.tags))
        for key in keys
        if key.gold or key.intended_label == "no_answer_in_kb"
    ]


def _count_requests(workspace: Workspace) -> int:
    from ragtriage.store.db import read_session
    from ragtriage.store.log_tables import RequestLogRow

    with read_session(workspace.engine) as session:
        return int(session.execute(select(func.count()).select_from(RequestLogRow)).scalar_one())


def ingest_traffic(
    workspace: Workspace, keys: Sequence[AnswerKey], log_file: Path | None, prefix: str
) -> int:
    """Ingest `log_file` (the fixture demo) or, without one, traffic generated from the answer keys
    (`--real`), unless the store already holds requests; returns lines ingested."""
    from ragtriage.logs.ingest import ingest_files, ingest_lines

    if _count_requests(workspace):
        return 0
    flagging = workspace.settings.logs.flagging
    if log_file is not None:
        if not log_file.exists():
            raise InputError(f"{log_file}: fixture request log missing; run scripts/gen_fixture_traffic.py")
        report = ingest_files(workspace.engine, [log_file], flagging=flagging)
    else:
        lines = generate_traffic(
            workspace, keys, prefix, options=REAL_PRODUCTION, unhappy_every=UNHAPPY_EVERY
        )
        report = ingest_lines(workspace.engine, lines, source=f"<{prefix} traffic>", flagging=flagging)
    return report.ingested


def _known_gold(
    workspace: Workspace, request_ids: Sequence[str], records: dict[str, Any], keys: Sequence[AnswerKey]
) -> dict[str, list[str]]:
    """Gold of each request: the triage record's, else the log line's `fixture.gold_chunk_ids`, else
    the answer key of its query. Gold taken from the fixture or the key is stored as user `demo`."""
    from ragtriage.store.gold import gold_ids
    from ragtriage.store.triage_repo import find_record, set_gold
    from ragtriage.triage.agreement import fixture_field

    gold_by_query = {key.query: key.gold for key in keys if key.gold}
    golds: dict[str, list[str]] = {}
    for request_id in request_ids:
        record = records[request_id]
        triage = find_record(workspace.engine, request_id)
        gold = gold_ids(triage.gold_chunk_ids if triage else [])
        if not gold:
            gold = [str(g) for g in fixture_field(record).get("gold_chunk_ids") or []]
            gold = gold or list(gold_by_query.get(record.raw_query, []))
            if gold:
                set_gold(workspace.engine, request_id, gold, user=DEMO_USER)
        golds[request_id] = gold
    return golds


def diagnose_flagged(
    workspace: Workspace,
    keys: Sequence[AnswerKey],
    *,
    counterfactuals: bool = False,
    should_stop: Callable[[], bool] | None = None,
    limit: int | None = None,
) -> int:
    """Diagnose the oldest flagged requests without a suggestion and store the suggested labels.

    A request without gold gets it from its log line's fixture metadata, or from the answer key of
    its query (as user `demo`, audited), so the triager opens cases with their gold journey. The
    replays run in one batched `Pipeline.run_many` call; each diagnosis reuses its replay.
    """
    from ragtriage.logs.requests import get_requests
    from ragtriage.logs.schema import to_trace
    from ragtriage.store.triage_repo import undiagnosed_request_ids
    from ragtriage.triage.context import WorkspaceContext
    from ragtriage.triage.diagnose import Diagnosis, diagnose, save_suggestions

    request_ids = undiagnosed_request_ids(workspace.engine, limit)
    records = get_requests(workspace.engine, request_ids)
    request_ids = [r for r in request_ids if r in records]
    golds = _known_gold(workspace, request_ids, records, keys)
    replays = workspace.pipeline.run_many(
        [records[r].raw_query for r in request_ids], should_stop=should_stop
    )
    context = WorkspaceContext(workspace)
    diagnoses: list[Diagnosis] = []
    try:
        for request_id, replay in zip(request_ids, replays, strict=False):
            if should_stop is not None and should_stop():
                break
            record = records[request_id]
            result = diagnose(
                context,
                record.raw_query,
                logged=to_trace(record),
                gold=golds[request_id] or None,
                request_id=request_id,
                replay=replay,
                counterfactuals=counterfactuals,
                should_stop=should_stop,
            )
            diagnoses.append(result)
    finally:
        context.close()
        save_suggestions(workspace.engine, diagnoses)
    return len(diagnoses)


def ensure_eval_run(
    workspace: Workspace, dataset: str, keys: Sequence[AnswerKey]
) -> tuple[int, int | None, bool]:
    """Import the answer keys as `dataset` (if absent) and run it once; `(cases, run id, reused)`."""
    from ragtriage.eval.runner import effective_status, run_eval
    from ragtriage.store import eval_repo as eval_store

    known = {row.name for row in eval_store.list_datasets(workspace.engine)}
    reused = dataset in known
    if not reused:
        eval_store.add_cases(
            workspace.engine, dataset, eval_cases_from_keys(keys), provenance={"source": "demo answer key"}
        )
    cases = len(eval_store.dataset_cases(workspace.engine, dataset))
    complete = [
        r for r in eval_store.list_runs(workspace.engine, dataset) if effective_status(r) == "complete"
    ]
    if complete:
        return cases, int(complete[0].id or 0), reused
    summary = run_eval(workspace, dataset, name=BASELINE_RUN)
    return cases, summary.run_id, False


def prepare_demo(home: Path, *, real: bool = False, on_step: StepCallback | None = None) -> DemoReport:
    """Build or reuse the demo home: KB + indexes, traffic, diagnoses of flagged requests, eval set and run.

    Raises:
        InputError: `real` and the Debian packages are not at hand.
    """
    step = on_step or (lambda _name: None)
    dataset = REAL_DATASET if real else FIXTURE_DATASET
    home = home.expanduser().resolve()
    write_demo_config(home, None if real else FIXTURES / "aliases.toml")
    report = DemoReport(home=str(home), dataset=dataset)
    workspace = Workspace.open(home)
    timer = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal timer
        now = time.perf_counter()
        report.seconds[name] = round(now - timer, 2)
        timer = now

    try:
        step("indexing the knowledge base")
        seed_embedding_cache(workspace)
        kb_folder = real_kb_folder(home) if real else FIXTURES / "kb"
        from ragtriage.index.kb_sync import add_paths
        from ragtriage.kb.service import kb_stats

        added = add_paths(workspace.home, workspace.settings, workspace.engine, [kb_folder])
        report.documents_added = added.added + added.changed
        report.chunks = int(kb_stats(workspace.engine, workspace.settings.kb.name).chunks.get("published", 0))
        if not report.documents_added:
            report.reused.append("kb")
        lap("kb")
        keys = real_answer_keys(workspace) if real else fixture_answer_keys(workspace)
        step("ingesting request logs")
        log_file = None if real else FIXTURES / "logs" / "requests.jsonl"
        report.requests_ingested = ingest_traffic(workspace, keys, log_file, "faq" if real else "fx")
        if not report.requests_ingested:
            report.reused.append("logs")
        lap("logs")
        step("diagnosing flagged requests")
        from ragtriage.logs.queue import queue_counts

        counts = queue_counts(workspace.engine)
        if set(counts.by_suggested) - {NOT_DIAGNOSED}:
            report.reused.append("diagnosis")
        else:
            report.diagnosed = diagnose_flagged(workspace, keys, limit=DEMO_DIAGNOSES)
        report.flagged = counts.total
        lap("diagnosis")
        step("evaluating the eval set")
        report.eval_cases, report.eval_run_id, eval_reused = ensure_eval_run(workspace, dataset, keys)
        if eval_reused:
            report.reused.append("eval")
        lap("eval")
    finally:
        workspace.close()
    return report
