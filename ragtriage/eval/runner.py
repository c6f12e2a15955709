"""Batch evaluation: replay every case of a dataset version through the pipeline, store each result.

Queries go through `Pipeline.run_many` in batches (one query-embedding call per batch); `workers`
threads run batches side by side. The embedder and the Whoosh searcher serialize their own calls with
locks and Qdrant local mode only reads, so batches share them safely; the store is written from the
calling thread only, one short transaction per finished batch. A run whose process stops (Ctrl-C,
`should_stop`, kill -9) keeps the cases stored so far; `resume_run_id` finishes only the missing ones.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

from ragtriage import locations
from ragtriage.config.profiles import DEFAULT_PROFILE, ResolvedProfile, get_profile, resolve_profile
from ragtriage.errors import InputError, RagtriageError
from ragtriage.eval.buckets import case_buckets
from ragtriage.eval.cases import EvalCase
from ragtriage.eval.gold_map import resolve_cases
from ragtriage.eval.metrics import rank_shift
from ragtriage.eval.run_view import RunSummary, effective_status, run_summary, summarize_run
from ragtriage.eval.scoring import score_case
from ragtriage.eval.specs import MetricSpec, default_specs
from ragtriage.index.manifest import read_manifest
from ragtriage.pipeline.pipeline import RunCancelled
from ragtriage.pipeline.refusal import refusal_scores, support_parts
from ragtriage.pipeline.types import RunOptions, Trace
from ragtriage.store import eval_repo as eval_store
from ragtriage.store.eval_tables import EvalRunCaseRow, EvalRunRow
from ragtriage.store.kb_repo import kb_revision

if TYPE_CHECKING:
    from ragtriage.config.settings import Settings
    from ragtriage.workspace import Workspace

__all__ = [
    "RunSummary",
    "effective_status",
    "metric_specs",
    "run_eval",
    "run_summary",
    "score_trace",
    "summarize_run",
]


class BatchPipeline(Protocol):
    """What the runner needs from a pipeline."""

    def run_many(
        self, queries: Sequence[str], *, options: RunOptions | None = None, **kwargs: Any
    ) -> list[Trace]: ...


def metric_specs(settings: Settings, candidate_pool: int | None = None) -> list[MetricSpec]:
    """P/R/Hit/nDCG at every `eval.ks`, MRR, MRR@max(K) and coverage@N: N is `eval.coverage_n`, else
    the candidate pool the run used (`candidate_pool`, else `retrieval.candidate_pool` of `settings`)."""
    ks = sorted(dict.fromkeys(settings.eval.ks))
    coverage_n = settings.eval.coverage_n or candidate_pool or settings.retrieval.candidate_pool
    specs = default_specs(ks, coverage_n=coverage_n)
    specs.insert(len(specs) - 1, MetricSpec("mrr", max(ks)))
    return specs


def _doc_ids(chunk_ids: Sequence[str], doc_of: dict[str, str]) -> list[str]:
    """Map ranked chunk ids to doc ids, keeping each doc's first occurrence."""
    return list(dict.fromkeys(doc_of.get(chunk_id, chunk_id) for chunk_id in chunk_ids))


def score_trace(
    case: EvalCase, trace: Trace, specs: Sequence[MetricSpec]
) -> tuple[dict[str, float], bool, dict[str, Any]]:
    """(metrics, refused, snapshot) of one case; cases without gold get no ranking metrics.

    At `doc` granularity the final and fused chunk lists are mapped to doc ids (first occurrence).
    """
    doc_of = {c.chunk_id: c.doc_id for c in trace.candidates if c.doc_id}
    final = list(trace.final)
    fused = [c.chunk_id for c in trace.fused]
    reranked = [c.chunk_id for c in trace.reranked]
    if case.gold_granularity == "doc":
        final, fused, reranked = (_doc_ids(ids, doc_of) for ids in (final, fused, reranked))
    refused = trace.refused or not trace.final
    relevant = set(case.relevant_ids)
    metrics = score_case(final, case.gold, specs, candidates=fused) if case.has_gold else {}
    shifts = rank_shift(fused, reranked, case.gold) if case.has_gold and reranked else []

    def pair(rank: int | None, score: float | None) -> list[Any] | None:
        return None if rank is None else [rank, None if score is None else round(score, 6)]

    candidates = [
        {
            "chunk_id": c.chunk_id,
            "doc_id": c.doc_id,
            "routes": {name: pair(r.rank, r.score) for name, r in c.routes.items() if r.rank is not None},
            "fused": pair(c.fused.rank, c.fused.score),
            "reranked": pair(c.reranked.rank, c.reranked.score),
            "final_rank": c.final_rank,
            "is_selected": c.is_selected,
            "is_relevant": (c.doc_id if case.gold_granularity == "doc" else c.chunk_id) in relevant,
            "known": c.known,
        }
        for c in trace.candidates
    ]
    support = trace.refusal_support()
    snapshot = {
        "final": list(trace.final),
        "rewritten_query": trace.rewrite.rewritten_query,
        "refused": trace.refused,
        "rerank_mode": trace.rerank_mode,
        # Every score refusal could judge by, so `eval calibrate-refusal` can sweep any of them.
        "refusal_scores": refusal_scores(
            trace.routes, trace.fused, trace.reranked, trace.rerank_pairs, trace.lexical_support
        ),
        "refusal_score_kind": trace.refusal_score_kind,
        "refusal_reason": trace.refusal_reason,
        # Which query terms the final candidates lack, as `replay` and `diagnose` show it.
        "lexical_support": support.model_dump(mode="json") if support is not None else None,
        # What lexical support is made of, so `eval calibrate-refusal` can sweep the dense gap too.
        "lexical_support_parts": support_parts(trace.lexical_support),
        "candidates": candidates,
        "rank_shift": [
            {"id": s.chunk_id, "before": s.rank_before, "after": s.rank_after, "shift": s.shift}
            for s in shifts
        ],
        "flags": list(trace.flags),
        "skipped_routes": [
            r.name for r in trace.routes if any(f.startswith("skipped: same") for f in r.flags)
        ],
        "timings_ms": {k: round(v, 3) for k, v in trace.timings_ms.items()},
    }
    return metrics, refused, snapshot


def _result_row(
    case: eval_store.StoredCase, trace: Trace | str, specs: Sequence[MetricSpec], buckets: list[str]
) -> EvalRunCaseRow:
    if isinstance(trace, str):
        # The pipeline rejected the case (e.g. an empty query): it scores 0 and says why.
        metrics = {spec.label: 0.0 for spec in specs} if case.case.has_gold else {}
        refused, snapshot, ms = False, {"error": trace}, 0.0
    else:
        metrics, refused, snapshot = score_trace(case.case, trace, specs)
        ms = float(trace.timings_ms.get("total", 0.0))
    return EvalRunCaseRow(
        run_id=0,
        case_id=case.case.case_id,
        case_version=case.version,
        has_gold=case.case.has_gold,
        refused=refused,
        metrics=metrics,
        buckets=buckets,
        snapshot=snapshot,
        ms=ms,
    )


def index_manifest_summary(workspace: Workspace) -> dict[str, Any]:
    """The index manifest without its per-chunk hashes (what a case or a run records); {} without indexes."""
    manifest = read_manifest(locations.manifest_path(workspace.home))
    if manifest is None:
        return {}
    return manifest.model_dump(mode="json", exclude={"content_hashes"})


def _open_run(
    workspace: Workspace,
    dataset: str,
    cases: Sequence[eval_store.StoredCase],
    version: int,
    name: str | None,
    options: RunOptions,
    workers: int,
    profile: ResolvedProfile | None,
) -> EvalRunRow:
    settings = profile.settings if profile is not None else workspace.settings
    granularities = sorted({c.case.gold_granularity for c in cases if c.case.has_gold}) or ["chunk"]
    run = EvalRunRow(
        name=name,
        dataset=dataset,
        dataset_version=version,
        granularity=granularities[0] if len(granularities) == 1 else "mixed",
        config=settings.model_dump(mode="json", exclude={"store"}),
        config_hash=profile.config_hash if profile is not None else settings.config_hash(),
        profile=profile.name if profile is not None else None,
        run_options=options.model_dump(mode="json", exclude_defaults=True),
        kb_revision=kb_revision(workspace.engine, settings.kb.name),
        index_manifest=index_manifest_summary(workspace),
        case_count=len(cases),
        workers=workers,
        timings={"pid": os.getpid(), "attempts": []},
    )
    return eval_store.create_run(workspace.engine, run)


def _resume_run(
    workspace: Workspace, run_ref: str | int, profile: str | None
) -> tuple[EvalRunRow, RunOptions, ResolvedProfile | None]:
    run = eval_store.get_run(workspace.engine, run_ref)
    if profile is not None and profile != (run.profile or DEFAULT_PROFILE):
        raise InputError(
            f"run {run.id} was made with profile {run.profile or DEFAULT_PROFILE}, not {profile}; "
            "resume without --profile (or start a new run with it)"
        )
    resolved = get_profile(workspace.settings, run.profile) if run.profile is not None else None
    expected_hash = resolved.config_hash if resolved is not None else workspace.settings.config_hash()
    status = effective_status(run)
    if status == "complete":
        raise InputError(f"run {run.id} is already complete; nothing to resume")
    if status == "running":
        raise InputError(
            f"run {run.id} is still running in process {run.timings.get('pid')}; wait for it or stop it"
        )
    if run.config_hash != expected_hash:
        raise InputError(
            f"run {run.id} was made with config {run.config_hash} but the settings now hash to "
            f"{expected_hash}; resume with the same --config (or start a new run)"
        )
    timings = {**(run.timings or {}), "pid": os.getpid()}
    run = eval_store.update_run(workspace.engine, int(run.id or 0), status="running", timings=timings)
    return run, RunOptions.model_validate(run.run_options or {}), resolved


def run_eval(
    workspace: Workspace,
    dataset: str = eval_store.DEFAULT_DATASET,
    *,
    name: str | None = None,
    options: RunOptions | None = None,
    workers: int = 1,
    resume_run_id: str | int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    batch_size: int = 32,
    pipeline: BatchPipeline | None = None,
    on_started: Callable[[int], None] | None = None,
    profile: str | None = None,
) -> RunSummary:
    """Evaluate `dataset` (its current version) or resume run `resume_run_id`; returns the stored run.

    The run is `complete` only when every case of its dataset version has a stored result; a stop
    leaves it `incomplete` with the finished cases kept. `on_started(run_id)` is called once the run
    row exists (the REST API answers with the id then, while the run goes on). `profile` names a
    replay profile (`ragtriage profiles`, resolved as `replay --profile` does): the run uses its
    pipeline and records its name, settings and config hash; None uses the settings file as it is.
    A resumed run uses the profile it was started with.

    Raises:
        NotFoundError: unknown dataset or run.
        InputError: resuming a complete or live run, or with a different config or profile.
        NotFoundError: `profile` names no profile.
        IndexStateError: the indexes cannot be opened (before any run row is written).
    """
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    version = eval_store.dataset_version(workspace.engine, dataset) if resume_run_id is None else 0
    resolved: ResolvedProfile | None = None
    if resume_run_id is not None:
        run, options, resolved = _resume_run(workspace, resume_run_id, profile)
    elif profile is not None:
        resolved = resolve_profile(workspace.settings, None, profile)
    # Open the indexes before writing: a locked or missing index must not leave a run row behind.
    own = workspace.pipeline_for(resolved) if resolved is not None and pipeline is None else None
    active = pipeline if pipeline is not None else (own if own is not None else workspace.pipeline)
    if resume_run_id is not None:
        cases = eval_store.dataset_cases(workspace.engine, run.dataset, run.dataset_version)
    else:
        options = options or RunOptions()
        cases = eval_store.dataset_cases(workspace.engine, dataset, version)
        run = _open_run(workspace, dataset, cases, version, name, options, workers, resolved)
    run_id = int(run.id or 0)
    engine = workspace.engine
    cases = _with_mapped_gold(engine, cases)
    done_ids = eval_store.stored_case_ids(engine, run_id)
    pending = [c for c in cases if c.case.case_id not in done_ids]
    # Coverage is labelled with the pool this run's pipeline used (its profile's, or the run options').
    run_settings = resolved.settings if resolved is not None else workspace.settings
    specs = metric_specs(run_settings, options.candidate_pool if options is not None else None)
    if on_started is not None:
        on_started(run_id)
    rules = getattr(active, "rules", None)
    alias_terms = rules.aliases.find_in if rules is not None and len(rules.aliases) else None
    buckets = {
        c.case.case_id: case_buckets(
            c.case,
            root_cause=c.provenance.get("label"),
            alias_terms=alias_terms,
            origin=c.provenance.get("origin"),
        )
        for c in pending
    }
    batches = [pending[i : i + batch_size] for i in range(0, len(pending), batch_size)]
    started, stored_now = time.perf_counter(), 0
    done = len(done_ids)
    if on_progress is not None:
        on_progress(done, len(cases))

    def run_batch(batch: list[eval_store.StoredCase]) -> list[Trace | str]:
        def run(queries: list[str]) -> list[Trace]:
            return active.run_many(queries, options=options, should_stop=should_stop, batch_size=len(queries))

        try:
            return list(run([c.case.query for c in batch]))
        except RunCancelled:
            return []
        except RagtriageError:
            pass
        # One bad case (an empty query) must not sink its batch: rerun one by one, keep the message.
        outcomes: list[Trace | str] = []
        for case in batch:
            try:
                traces = run([case.case.query])
            except RunCancelled:
                break
            except RagtriageError as error:
                outcomes.append(f"{error.title}: {error}")
                continue
            if not traces:
                break
            outcomes.append(traces[0])
        return outcomes

    stopped = False
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="eval") as executor:
            in_flight: dict[Future[list[Trace | str]], list[eval_store.StoredCase]] = {}
            queue = list(reversed(batches))
            while queue or in_flight:
                while queue and len(in_flight) < workers and not stopped:
                    if should_stop is not None and should_stop():
                        stopped = True
                        break
                    batch = queue.pop()
                    in_flight[executor.submit(run_batch, batch)] = batch
                if not in_flight:
                    break
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in finished:
                    batch = in_flight.pop(future)
                    traces = future.result()
                    # A stopped batch returns fewer traces: they belong to its first cases.
                    pairs = zip(batch[: len(traces)], traces, strict=True)
                    rows = [_result_row(c, t, specs, buckets[c.case.case_id]) for c, t in pairs]
                    if rows:
                        done = eval_store.save_case_results(engine, run_id, rows)
                        stored_now += len(rows)
                    if len(traces) < len(batch):
                        stopped = True
                    if on_progress is not None:
                        on_progress(done, len(cases))
    finally:
        _close_run(engine, run_id, len(cases), stored_now, time.perf_counter() - started)
    return run_summary(eval_store.get_run(engine, run_id), stored_now)


def _with_mapped_gold(engine: Any, cases: list[eval_store.StoredCase]) -> list[eval_store.StoredCase]:
    """Cases whose gold refs are mapped onto the current KB's chunks (`eval.gold_map`)."""
    if not any(c.case.gold_refs for c in cases):
        return cases
    mappings = resolve_cases(engine, [c.case for c in cases])
    return [c.model_copy(update={"case": m.case}) for c, m in zip(cases, mappings, strict=True)]


def _close_run(engine: Any, run_id: int, case_count: int, stored_now: int, wall_s: float) -> None:
    """Aggregate what is stored and set the status: complete only with every case stored."""
    run = eval_store.get_run(engine, run_id)
    stored = eval_store.stored_case_ids(engine, run_id)
    complete = len(stored) >= case_count
    timings = dict(run.timings or {})
    timings["attempts"] = [*timings.get("attempts", []), {"wall_s": round(wall_s, 3), "cases": stored_now}]
    timings["wall_s"] = round(sum(a["wall_s"] for a in timings["attempts"]), 3)
    if timings["wall_s"] > 0:
        timings["cases_per_s"] = round(len(stored) / timings["wall_s"], 2)
    summary = summarize_run(engine, run)
    eval_store.update_run(
        engine,
        run_id,
        status="complete" if complete else "incomplete",
        cases_done=len(stored),
        finished_at=datetime.now(timezone.utc) if complete else None,
        timings=timings,
        **summary,
    )
