"""Production engines as routes, each against a local HTTP server that follows the engine's documented
request and response shapes: Elasticsearch `_search` (`hits.hits[]._id/_score/_source`), Qdrant REST
`POST /collections/{c}/points/query` (`result.points[].payload`), Dify `/datasets/{id}/retrieve`
(`records[].segment.id`, `score`) and RAGFlow `/api/v1/retrieval` (`data.chunks[].id`, `similarity`).
Every failure is one line naming the route, the URL and the fix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragtriage.config.settings import ElasticsearchEngine, HTTPEngine, QdrantEngine
from ragtriage.errors import PipelineError
from ragtriage.pipeline.engines import (
    ElasticsearchRetriever,
    HTTPRetriever,
    QdrantServerRetriever,
    fill_template,
)
from tests.engine_stubs import closed_port_url, stub_server

ES_QUERY = {"query": {"multi_match": {"query": "{{query}}", "fields": ["title^2", "content"]}}}


def _es_answer(hits: list[dict[str, Any]]) -> dict[str, Any]:
    """An `_search` response as Elasticsearch documents it."""
    return {
        "took": 3,
        "timed_out": False,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {"total": {"value": len(hits), "relation": "eq"}, "max_score": 7.5, "hits": hits},
    }


def _es_hit(doc_id: str, score: float, chunk_id: str | None) -> dict[str, Any]:
    source: dict[str, Any] = {"content": "…", "meta": {}}
    if chunk_id is not None:
        source["meta"]["chunk_id"] = chunk_id
    return {"_index": "kb-prod", "_id": doc_id, "_score": score, "_source": source}


def _es(url: str, **extra: Any) -> ElasticsearchRetriever:
    settings = ElasticsearchEngine(type="elasticsearch", url=url, index="kb-prod", query=ES_QUERY, **extra)
    return ElasticsearchRetriever("bm25_raw", "prod_es", settings, kind="bm25")


def test_template_fills_query_and_k() -> None:
    template = {"q": "{{query}}", "n": "{{k}}", "s": "top {{k}}", "list": ["{{query}}", 3]}
    assert fill_template(template, "发票 冲红", 8) == {
        "q": "发票 冲红",
        "n": 8,
        "s": "top 8",
        "list": ["发票 冲红", 3],
    }


def test_elasticsearch_search_request_and_id_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROD_ES_KEY", "c2VjcmV0")
    hits = [_es_hit("a1", 7.5, "c-17"), _es_hit("a2", 3.25, "c-4"), _es_hit("a3", 1.0, "c-17")]
    with stub_server(lambda *_: (200, _es_answer(hits))) as server:
        found, flags = _es(server.url, id_field="meta.chunk_id", api_key_env="PROD_ES_KEY").search(
            "红字发票", 5
        )
        by_doc_id, _ = _es(server.url).search("红字发票", 2)
    # The duplicate c-17 counts once, at its first rank.
    assert [(h.chunk_id, h.rank, h.score) for h in found] == [("c-17", 1, 7.5), ("c-4", 2, 3.25)]
    assert flags == [] and [h.chunk_id for h in by_doc_id] == ["a1", "a2"]
    first = server.requests[0]
    assert (first.method, first.path) == ("POST", "/kb-prod/_search")
    assert first.body == {
        "query": {"multi_match": {"query": "红字发票", "fields": ["title^2", "content"]}},
        "size": 5,
    }
    assert first.headers["authorization"] == "ApiKey c2VjcmV0"
    assert "authorization" not in server.requests[1].headers


@pytest.mark.parametrize(
    "status, body, expected",
    [
        (
            400,
            {"error": {"type": "parsing_exception", "reason": "unknown query [mtch]"}, "status": 400},
            "answered HTTP 400: unknown query [mtch]; check [engines.prod_es] url and request template",
        ),
        (401, {"error": "missing authentication credentials"}, "refused the request (HTTP 401)"),
        (503, {"error": {"reason": "all shards failed"}}, "HTTP 503: all shards failed; retry later"),
        (200, {"acknowledged": True}, "the response has no 'hits.hits'"),
        (
            200,
            _es_answer([_es_hit("a1", 2.0, None)]),
            "hit 1 has no '_source.meta.chunk_id'; set [engines.prod_es] id_field",
        ),
    ],
)
def test_elasticsearch_errors_are_one_line_with_route_url_and_fix(
    status: int, body: Any, expected: str
) -> None:
    with stub_server(lambda *_: (status, body)) as server:
        with pytest.raises(PipelineError) as caught:
            _es(server.url, id_field="meta.chunk_id").search("x", 3)
    message = str(caught.value)
    assert message.startswith(f"route bm25_raw (engine prod_es): {server.url}/kb-prod/_search")
    assert expected in message and "\n" not in message


def test_unreachable_engine_and_unset_key(monkeypatch: pytest.MonkeyPatch) -> None:
    url = closed_port_url()
    with pytest.raises(
        PipelineError, match=r"is unreachable \(ConnectError\); check \[engines.prod_es\] url"
    ):
        _es(url).search("x", 3)
    monkeypatch.delenv("PROD_ES_KEY", raising=False)
    with pytest.raises(PipelineError, match=r"\$PROD_ES_KEY is not set; export the API key"):
        _es(url, api_key_env="PROD_ES_KEY")


def _dify_answer(body: dict[str, Any]) -> dict[str, Any]:
    """Dify's documented `/datasets/{id}/retrieve` answer."""
    records = [
        {
            "segment": {"id": "f3d1c7be-9f3a-40d8-8eb8-3a1ef9c3f2c1", "position": 1, "content": "…"},
            "score": 0.92,
        },
        {
            "segment": {"id": "0b5e3a10-2c6f-4c1e-9a77-6d1f0e2b9c44", "position": 4, "content": "…"},
            "score": 0.61,
        },
    ]
    return {"query": {"content": body["query"]}, "records": records[: body["retrieval_model"]["top_k"]]}


def test_dify_retrieve_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIFY_DATASET_KEY", "dataset-abc")
    request = {
        "query": "{{query}}",
        "retrieval_model": {
            "search_method": "hybrid_search",
            "reranking_enable": False,
            "top_k": "{{k}}",
            "score_threshold_enabled": False,
        },
    }
    with stub_server(lambda m, p, h, body: (200, _dify_answer(body))) as server:
        settings = HTTPEngine(
            type="http",
            url=f"{server.url}/v1/datasets/8d1c/retrieve",
            request=request,
            results_path="records",
            id_path="segment.id",
            score_path="score",
            api_key_env="DIFY_DATASET_KEY",
        )
        hits, _ = HTTPRetriever("dense_raw", "dify", settings, kind="dense").search("怎么开红字发票", 2)
    assert [h.chunk_id for h in hits] == [
        "f3d1c7be-9f3a-40d8-8eb8-3a1ef9c3f2c1",
        "0b5e3a10-2c6f-4c1e-9a77-6d1f0e2b9c44",
    ]
    assert [h.score for h in hits] == [0.92, 0.61]
    sent = server.requests[0]
    assert sent.path == "/v1/datasets/8d1c/retrieve" and sent.headers["authorization"] == "Bearer dataset-abc"
    assert sent.body["retrieval_model"]["top_k"] == 2 and sent.body["query"] == "怎么开红字发票"


def _ragflow(server_url: str) -> HTTPRetriever:
    settings = HTTPEngine(
        type="http",
        url=f"{server_url}/api/v1/retrieval",
        request={
            "question": "{{query}}",
            "dataset_ids": ["b2a6"],
            "page_size": "{{k}}",
            "similarity_threshold": 0.2,
        },
        results_path="data.chunks",
        id_path="id",
        score_path="similarity",
    )
    return HTTPRetriever("bm25_rewritten", "ragflow", settings, kind="bm25")


def test_ragflow_retrieval_endpoint_and_its_200_error_envelope() -> None:
    chunks = [
        {
            "id": "4b8935ac0a22deb1",
            "content": "…",
            "similarity": 0.57,
            "vector_similarity": 0.73,
            "term_similarity": 0.5,
        },
        {"id": 42, "content": "…", "similarity": 0.31, "vector_similarity": 0.4, "term_similarity": 0.2},
    ]
    with stub_server(
        lambda *_: (200, {"code": 0, "data": {"chunks": chunks, "doc_aggs": [], "total": 2}})
    ) as server:
        hits, _ = _ragflow(server.url).search("冲红", 10)
    assert [(h.chunk_id, h.score) for h in hits] == [("4b8935ac0a22deb1", 0.57), ("42", 0.31)]
    assert server.requests[0].body == {
        "question": "冲红",
        "dataset_ids": ["b2a6"],
        "page_size": 10,
        "similarity_threshold": 0.2,
    }
    # RAGFlow reports errors as HTTP 200 with a business code and a message.
    with stub_server(lambda *_: (200, {"code": 102, "message": "`dataset_ids` is required."})) as server:
        with pytest.raises(PipelineError) as caught:
            _ragflow(server.url).search("冲红", 10)
    assert str(caught.value) == (
        f"route bm25_rewritten (engine ragflow): {server.url}/api/v1/retrieval: the service answered "
        "'`dataset_ids` is required.' instead of results"
    )


def _qdrant(url: str, **extra: Any) -> QdrantServerRetriever:
    settings = QdrantEngine(type="qdrant", url=url, collection="prod_chunks", api_key_env=None, **extra)
    return QdrantServerRetriever("dense_raw", "prod_qdrant", settings, kind="dense")


def test_qdrant_server_collection_with_production_payload_names() -> None:
    def respond(method: str, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any]:
        points = [
            {
                "id": "5c56c793-69f3-4fbf-87e6-c4bf54c28c26",
                "version": 3,
                "score": 0.91,
                "payload": {"meta": {"cid": "kb:17"}},
            },
            {"id": 1234, "version": 1, "score": 0.72, "payload": {"meta": {"cid": "kb:4"}}},
        ]
        return 200, {"result": {"points": points[: body["limit"]]}, "status": "ok", "time": 0.002}

    with stub_server(respond) as server:
        retriever = _qdrant(server.url, id_payload_key="meta.cid", vector_name="text")
        hits = retriever.search_vector(np.array([0.6, 0.8], dtype=np.float32), 2)
        retriever.close()
    assert [(h.chunk_id, h.rank, h.score) for h in hits] == [("kb:17", 1, 0.91), ("kb:4", 2, 0.72)]
    sent = server.requests[-1]
    assert (sent.method, sent.path) == ("POST", "/collections/prod_chunks/points/query")
    assert sent.body["limit"] == 2 and sent.body["using"] == "text" and sent.body["with_payload"] is True
    # The REST API takes a bare vector or `{"nearest": vector}`; qdrant-client sends the second.
    assert sent.body["query"]["nearest"] == pytest.approx([0.6, 0.8])


def test_qdrant_errors_name_route_url_and_fix() -> None:
    missing = {"status": {"error": "Not found: Collection `prod_chunks` doesn't exist!"}, "time": 0.0}
    with stub_server(lambda *_: (404, missing)) as server:
        with pytest.raises(PipelineError) as caught:
            _qdrant(server.url).search_vector(np.ones(2), 3)
    assert str(caught.value) == (
        f"route dense_raw (engine prod_qdrant): {server.url}/collections/prod_chunks answered HTTP 404: "
        "Not found: Collection `prod_chunks` doesn't exist!; check [engines.prod_qdrant] collection"
    )
    no_key = {
        "result": {"points": [{"id": 1, "version": 0, "score": 0.5, "payload": {"text": "…"}}]},
        "status": "ok",
        "time": 0,
    }
    with stub_server(lambda *_: (200, no_key)) as server:
        with pytest.raises(
            PipelineError,
            match=r"point 1 \(id 1\) has no payload key 'chunk_id'; set \[engines.prod_qdrant\] id_payload_key",
        ):
            _qdrant(server.url).search_vector(np.ones(2), 3)
    with pytest.raises(PipelineError, match=r"is unreachable .*check \[engines.prod_qdrant\] url"):
        _qdrant(closed_port_url()).search_vector(np.ones(2), 3)
