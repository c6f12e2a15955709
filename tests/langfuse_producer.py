"""Langfuse exports of schema-v1 requests, built field by field from Langfuse's public API
definitions (`fern/apis/server/definition/commons.yml`: Trace, Observation, Score;
`observations-v2.yml`: `{data, meta}` pages, input/output as JSON text by default)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from tests.trace_producers import ns_of, stage_items


def _lf_time(ns: int) -> str:
    """Langfuse's ISO 8601 with milliseconds and `Z`."""
    moment = datetime.fromtimestamp(ns // 1_000_000_000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{ns // 1_000_000 % 1000:03d}Z"


def _lf_id(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def langfuse_export(requests: Iterable[dict[str, Any]]) -> tuple[list[dict], list[dict], list[dict]]:
    """`(observations, traces, scores)` of schema-v1 requests as Langfuse's public API returns
    them (`fern/apis/server/definition/commons.yml`: Trace, Observation, scores with `dataType`).

    The query and answer are the trace's input and output; each logged route is a RETRIEVER
    observation whose output lists `{id, score}` documents; the rerank is a SPAN named `rerank`
    (Langfuse has no RERANKER type) with `top_k` in its metadata; ratings are CATEGORICAL
    `user_feedback` scores, escalations BOOLEAN `escalation` scores; ids are UUIDs; input and
    output come as JSON text, as `/api/public/v2/observations` sends them by default.
    """
    observations: list[dict] = []
    traces: list[dict] = []
    scores: list[dict] = []
    for request in requests:
        rid = request["request_id"]
        trace_id = _lf_id("trace", rid)
        start = ns_of(request["ts"])
        latency = float(request.get("latency_ms") or 1000)
        stages = request.get("stages") or {}
        metadata = {"request_id": rid}
        for key in ("kb", "citations", "config_hash", "rewrite", "fixture"):
            if request.get(key) is not None:
                metadata[key] = request[key]
        traces.append(
            {
                "id": trace_id,
                "timestamp": _lf_time(start),
                "name": "rag-query",
                "input": request["raw_query"],
                "output": request.get("answer"),
                "sessionId": request.get("session"),
                "release": None,
                "version": request.get("pipeline_version"),
                "userId": request.get("user"),
                "metadata": metadata,
                "tags": [],
                "public": False,
                "htmlPath": f"/project/p1/traces/{trace_id}",
                "latency": latency / 1000,
                "totalCost": 0.0,
                "observations": [],
                "scores": [],
            }
        )
        step = int(latency * 1e6) // 10
        at = start + step // 10

        def observation(
            kind: str,
            name: str,
            inp: Any,
            out: Any,
            meta: dict | None = None,
            *,
            rid: str = rid,
            trace_id: str = trace_id,
            step: int = step,
        ) -> None:
            nonlocal at
            observations.append(
                {
                    "id": _lf_id("obs", rid, name),
                    "traceId": trace_id,
                    "type": kind,
                    "name": name,
                    "startTime": _lf_time(at),
                    "endTime": _lf_time(at + step),
                    "projectId": "p1",
                    "parentObservationId": None,
                    "level": "DEFAULT",
                    "statusMessage": None,
                    "version": None,
                    "environment": "default",
                    "input": json.dumps(inp, ensure_ascii=False),
                    "output": json.dumps(out, ensure_ascii=False),
                    "metadata": meta or {},
                }
            )
            at += step

        def docs(stage: Any) -> list[dict]:
            return [{"id": cid, **({"score": s} if s is not None else {})} for cid, s in stage_items(stage)]

        rewrite = request.get("rewrite") or {}
        if rewrite.get("rewritten_query"):
            observation("SPAN", "rewrite", request["raw_query"], rewrite["rewritten_query"])
        for name, stage in (("bm25-search", "bm25"), ("vector-search", "dense")):
            if stages.get(stage) is not None:
                observation("RETRIEVER", name, {"query": request["raw_query"]}, docs(stages[stage]))
        if stages.get("reranked") is not None:
            meta = {"top_k": len(stages["final_context"])} if stages.get("final_context") is not None else {}
            observation(
                "SPAN",
                "rerank",
                {"query": request["raw_query"], "documents": docs(stages.get("fused"))},
                docs(stages["reranked"]),
                meta,
            )
        observation("GENERATION", "generate", request["raw_query"], request.get("answer"))
        feedback = request.get("feedback") or {}
        base = {"traceId": trace_id, "observationId": None, "source": "ANNOTATION", "comment": None}
        base |= {"timestamp": _lf_time(start + int(latency * 1e6) + 60_000_000_000), "authorUserId": None}
        if feedback.get("rating") is not None:
            scores.append(
                {
                    **base,
                    "id": _lf_id("score", rid, "feedback"),
                    "name": "user_feedback",
                    "dataType": "CATEGORICAL",
                    "stringValue": str(feedback["rating"]),
                    "value": None,
                }
            )
        if feedback.get("escalated"):
            scores.append(
                {
                    **base,
                    "id": _lf_id("score", rid, "escalation"),
                    "name": "escalation",
                    "dataType": "BOOLEAN",
                    "value": 1.0,
                    "stringValue": "True",
                }
            )
    return observations, traces, scores


def langfuse_page(items: list[dict]) -> dict[str, Any]:
    """An API page: `{"data": [...], "meta": {...}}` (one JSON document)."""
    return {"data": items, "meta": {"cursor": None}}
