"""Request-log schema v1: one JSONL line per online request, and its mapping to a `Trace`.

Two shapes are accepted. The nested v1 form (`rewrite`, `stages`, `feedback`) is canonical; the
flat form seen in practice (`rewritten_queries`, `bm25_results`, `vector_results`,
`fused_results`, `reranked_results`, `final_context_docs`, `user_feedback`) is mapped onto it by
`RequestLog`'s before-validator. Fields nobody defined are kept (`extra="allow"`) and stored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Union

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.types import ROUTE_BM25_RAW, ROUTE_DENSE_RAW, RewriteResult, RouteResult, Trace

SCHEMA_VERSION = 1

#: Flat-form key → (v1 section, v1 key). `rewritten_queries` and `user_feedback` are handled apart.
FLAT_STAGE_KEYS = {
    "bm25_results": "bm25",
    "vector_results": "dense",
    "dense_results": "dense",
    "fused_results": "fused",
    "reranked_results": "reranked",
    "final_context_docs": "final_context",
}
STAGE_NAMES = ("bm25", "dense", "fused", "reranked", "final_context")
#: Flat-form names producers give the query and the request time (the first present is used);
#: the v1 key, when present, wins and the flat one stays as an extra field.
FLAT_QUERY_KEYS = ("query", "question", "user_query")
FLAT_TIME_KEYS = ("timestamp", "created_at")


class _Open(BaseModel):
    """Sections keep keys they do not define (producers add their own)."""

    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)


class StageItem(_Open):
    """One logged hit: a chunk id with the score the stage gave it."""

    chunk_id: str = Field(min_length=1, validation_alias=AliasChoices("chunk_id", "id", "doc_id"))
    """Producers of the flat form also call it `id` or `doc_id`."""
    score: float | None = None


StageList = list[Union[str, StageItem]]
"""A stage's ranked list, best first: plain chunk ids or `{chunk_id, score}` objects."""


class LoggedRewrite(_Open):
    """What production's rewrite step produced."""

    normalized_query: str | None = None
    rewritten_query: str | None = None
    """The text the rewritten routes searched (flat form: the first of `rewritten_queries`)."""
    keywords: list[str] | None = None
    aliases: dict[str, list[str]] | list[str] | None = None
    """Query term → added synonyms, or just the added synonyms."""
    sub_queries: list[str] | None = None
    mode: str | None = None


class LoggedStages(_Open):
    """Ranked lists per stage; a missing stage is None (not logged), an empty one is []."""

    bm25: StageList | None = None
    dense: StageList | None = None
    fused: StageList | None = None
    reranked: StageList | None = None
    final_context: StageList | None = None


class LoggedFeedback(_Open):
    """The user's reaction to the answer."""

    rating: str | int | float | None = None
    """e.g. `up`/`down`, `1`…`5`, `-1`; compared as lower-case text with `logs.flagging.bad_ratings`."""
    reason: str | None = None
    escalated: bool | None = False
    """The user asked for a human."""
    follow_up: bool | str | None = None
    """The producer's own follow-up marker (true, or the follow-up question's text)."""


class RequestLog(_Open):
    """One logged request, schema v1 (also accepts and maps the flat form)."""

    model_config = ConfigDict(
        extra="allow",
        coerce_numbers_to_str=True,
        title="ragtriage request log line, schema v1",
        json_schema_extra={
            "description": (
                "One JSON object per line. Also accepted and mapped onto this form: the flat form with "
                + ", ".join(f"`{k}` → stages.{v}" for k, v in FLAT_STAGE_KEYS.items())
                + ", `rewritten_queries` → rewrite (first = rewritten_query, rest = sub_queries), "
                "`user_feedback` → feedback (a bare value is the rating), `query` (or `question`, "
                "`user_query`) → raw_query and `timestamp` (or `created_at`) → ts when those are absent. "
                "Unknown fields are kept."
            )
        },
    )

    schema_version: int = SCHEMA_VERSION
    request_id: str = Field(min_length=1)
    ts: datetime | None = None
    """Request time, ISO 8601 (a time without zone is taken as UTC) or Unix seconds."""
    kb: str | None = None
    session: str | None = None
    """Hash of the session id (follow-up detection groups by it)."""
    user: str | None = None
    """Hash of the user id."""
    raw_query: str
    rewrite: LoggedRewrite | None = None
    stages: LoggedStages | None = None
    answer: str | None = None
    citations: StageList | None = None
    """Chunk ids the answer cites; [] means the answer cited nothing."""
    feedback: LoggedFeedback | None = None
    latency_ms: float | None = None
    pipeline_version: str | None = None
    config_hash: str | None = None

    def to_line(self) -> str:
        """This record as one JSONL line (v1 form, unset optional fields left out, no newline)."""
        return self.model_dump_json(exclude_none=True)

    @model_validator(mode="before")
    @classmethod
    def _map_flat_form(cls, data: Any) -> Any:
        """Map flat-form keys onto v1 sections (a v1 key already present wins; the flat one stays)."""
        if not isinstance(data, dict):
            return data
        return map_flat_form(data)


def map_flat_form(data: dict[str, Any]) -> dict[str, Any]:
    """Return `data` with flat-form keys moved into `stages`, `rewrite` and `feedback`, and the
    flat form's `query` (or `question`, `user_query`) and `timestamp` (or `created_at`, `time`)
    into `raw_query` and `ts` when those are absent (input not mutated)."""
    flat = any(key in data for key in (*FLAT_STAGE_KEYS, "rewritten_queries", "user_feedback"))
    # A team's own logger often writes v1 sections under the flat form's names for query and time.
    aliased = ("raw_query" not in data and any(k in data for k in FLAT_QUERY_KEYS)) or (
        "ts" not in data and any(k in data for k in FLAT_TIME_KEYS)
    )
    if not flat and not aliased:
        return data
    mapped = dict(data)
    stages = dict(mapped["stages"]) if isinstance(mapped.get("stages"), dict) else {}
    for flat_key, stage in FLAT_STAGE_KEYS.items():
        if flat_key in mapped and stage not in stages:
            stages[stage] = mapped.pop(flat_key)
    if stages or "stages" in mapped:
        mapped["stages"] = stages
    queries = mapped.get("rewritten_queries")
    if isinstance(queries, list) and "rewrite" not in mapped:
        mapped.pop("rewritten_queries")
        texts = [q for q in queries if isinstance(q, str)]
        mapped["rewrite"] = {"rewritten_query": texts[0] if texts else None, "sub_queries": texts[1:]}
    if "user_feedback" in mapped and "feedback" not in mapped:
        feedback = mapped.pop("user_feedback")
        mapped["feedback"] = (
            feedback if isinstance(feedback, dict) or feedback is None else {"rating": feedback}
        )
    for v1_key, flat_keys in (("raw_query", FLAT_QUERY_KEYS), ("ts", FLAT_TIME_KEYS)):
        if v1_key not in mapped:
            found = next((key for key in flat_keys if isinstance(mapped.get(key), (str, int, float))), None)
            if found is not None:
                mapped[v1_key] = mapped.pop(found)
    return mapped


def stage_ids(items: StageList | None) -> list[str]:
    """The chunk ids of a logged stage list, in order."""
    return [item if isinstance(item, str) else item.chunk_id for item in items or ()]


def _scored(items: StageList | None) -> list[ScoredChunk]:
    scored = []
    for rank, item in enumerate(items or (), start=1):
        if isinstance(item, str):
            scored.append(ScoredChunk(chunk_id=item, rank=rank, score=0.0))
        else:
            scored.append(ScoredChunk(chunk_id=item.chunk_id, rank=rank, score=item.score or 0.0))
    return scored


def to_trace(record: RequestLog) -> Trace:
    """The logged request as a `Trace` with the fields a log carries.

    Routes are `bm25_raw` and `dense_raw` when logged (a log does not say which query text each
    route searched, so `query` is the raw query and the flag `logged` marks them), then the further
    routes a trace logged (a second dense retriever: `dense_2`, see `extra_routes`); `fused`,
    `reranked` and `final` come from their stages. Unlogged scores are 0.0 and the trace is
    flagged `logged-without-scores`. `candidates` is left empty: diagnosis builds it.
    """
    rewrite = record.rewrite or LoggedRewrite()
    normalized = rewrite.normalized_query or record.raw_query
    aliases = rewrite.aliases if isinstance(rewrite.aliases, dict) else {"*": list(rewrite.aliases or ())}
    trace_rewrite = RewriteResult(
        raw_query=record.raw_query,
        normalized_query=normalized,
        rewritten_query=rewrite.rewritten_query or normalized,
        keywords=list(rewrite.keywords or ()),
        aliases={k: list(v) for k, v in aliases.items()},
        sub_queries=list(rewrite.sub_queries or ()),
        mode="logged",
    )
    stages = record.stages or LoggedStages()
    routes = []
    logged_routes: tuple[tuple[str, Literal["bm25", "dense"], StageList | None], ...] = (
        (ROUTE_BM25_RAW, "bm25", stages.bm25),
        (ROUTE_DENSE_RAW, "dense", stages.dense),
    )
    for name, kind, items in logged_routes:
        if items is not None:
            routes.append(
                RouteResult(
                    name=name, kind=kind, query=record.raw_query, hits=_scored(items), flags=["logged"]
                )
            )
    routes.extend(extra_routes(record))
    all_items = [i for s in STAGE_NAMES for i in (getattr(stages, s) or ())]
    flags = ["logged"]
    if any(isinstance(i, str) or i.score is None for i in all_items):
        flags.append("logged-without-scores")
    fused = _scored(stages.fused)
    logged_lists = {
        "routes": stages.bm25 if stages.bm25 is not None else stages.dense,
        "fused": stages.fused,
        "reranked": stages.reranked,
        "final": stages.final_context,
    }
    return Trace(
        query=record.raw_query,
        rewrite=trace_rewrite,
        routes=routes,
        fused=fused,
        rerank_input=[c.chunk_id for c in fused],
        reranked=_scored(stages.reranked),
        rerank_mode="logged",
        final=stage_ids(stages.final_context),
        not_logged=[stage for stage, items in logged_lists.items() if items is None],
        timings_ms={"total": record.latency_ms} if record.latency_ms is not None else {},
        flags=flags,
        config_hash=record.config_hash,
    )


_STAGE_LIST: TypeAdapter[StageList] = TypeAdapter(StageList)


def extra_routes(record: RequestLog) -> list[RouteResult]:
    """The routes a trace logged beyond the first of each kind (trace ingest keeps them in the body's
    `routes`, each `{name, kind, query, hits, span_name}`; the first of each kind is a stage and has
    no `hits` there). A `routes` field of another shape (a producer's own key) is left alone."""
    extra = (record.model_extra or {}).get("routes")
    routes: list[RouteResult] = []
    for route in extra if isinstance(extra, list) else ():
        if not isinstance(route, dict) or "stage" in route or not isinstance(route.get("name"), str):
            continue
        kind = route.get("kind")
        if kind not in ("bm25", "dense"):
            continue
        try:
            hits = _STAGE_LIST.validate_python(route.get("hits"))
        except ValidationError:
            continue
        query = route.get("query")
        routes.append(
            RouteResult(
                name=route["name"],
                kind=kind,
                query=query if isinstance(query, str) else record.raw_query,
                hits=_scored(hits),
                flags=["logged"],
            )
        )
    return routes
