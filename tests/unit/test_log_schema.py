"""Request-log schema v1: the flat form is mapped, extras are kept, a log becomes a Trace."""

from __future__ import annotations

import json

import jsonschema
import pytest
from pydantic import ValidationError

from ragtriage.logs.schema import LoggedStages, RequestLog, map_flat_form, stage_ids, to_trace
from tests.conftest import REPO_ROOT

V1_LINE = {
    "schema_version": 1,
    "request_id": "r1",
    "ts": "2026-11-02T08:00:00+08:00",
    "kb": "debian-faq",
    "session": "s-hash",
    "user": "u-hash",
    "raw_query": "如何更换 apt 源",
    "rewrite": {
        "normalized_query": "如何 更换 apt 源",
        "rewritten_query": "更换 apt 软件源 镜像",
        "keywords": ["apt", "源"],
        "aliases": {"源": ["软件源"]},
        "sub_queries": ["apt 镜像"],
        "mode": "rules",
    },
    "stages": {
        "bm25": [{"chunk_id": "c1", "score": 7.5}, {"chunk_id": "c2", "score": 3.0}],
        "dense": ["c3", "c1"],
        "fused": ["c1", "c3", "c2"],
        "reranked": [{"chunk_id": "c3", "score": 0.9}, {"chunk_id": "c1", "score": 0.4}],
        "final_context": ["c3"],
    },
    "answer": "编辑 /etc/apt/sources.list",
    "citations": ["c3"],
    "feedback": {"rating": "down", "reason": "wrong mirror", "escalated": False, "follow_up": None},
    "latency_ms": 812.5,
    "pipeline_version": "2026.10.3",
    "config_hash": "abc123",
    "tenant": "acme",
}


def test_v1_line_validates_and_keeps_unknown_fields() -> None:
    record = RequestLog.model_validate(V1_LINE)
    assert record.request_id == "r1"
    assert record.model_extra == {"tenant": "acme"}
    assert json.loads(record.model_dump_json())["tenant"] == "acme"
    assert record.ts is not None and record.ts.utcoffset() is not None


def test_flat_form_is_mapped_onto_v1_sections() -> None:
    flat = {
        "request_id": "r2",
        "raw_query": "q",
        "rewritten_queries": ["q rewritten", "sub one"],
        "bm25_results": [{"doc_id": "c1", "score": 2}],
        "vector_results": ["c2"],
        "fused_results": ["c1", "c2"],
        "reranked_results": [{"id": "c2", "score": 0.7}],
        "final_context_docs": ["c2"],
        "user_feedback": "thumbs_down",
        "extra_field": [1, 2],
    }
    record = RequestLog.model_validate(flat)
    assert record.stages is not None
    assert stage_ids(record.stages.bm25) == ["c1"]
    assert stage_ids(record.stages.dense) == ["c2"]
    assert stage_ids(record.stages.reranked) == ["c2"]
    assert stage_ids(record.stages.final_context) == ["c2"]
    assert record.rewrite is not None and record.rewrite.rewritten_query == "q rewritten"
    assert record.rewrite.sub_queries == ["sub one"]
    assert record.feedback is not None and record.feedback.rating == "thumbs_down"
    assert record.model_extra == {"extra_field": [1, 2]}
    assert flat["bm25_results"] == [{"doc_id": "c1", "score": 2}], "the input must not be mutated"


def test_flat_form_query_and_timestamp_names_map_onto_raw_query_and_ts() -> None:
    # What a team's own logger writes: `query` and `timestamp`, an integer request id, UUID chunk ids.
    flat = {
        "request_id": 17,
        "timestamp": "2026-11-20T10:00:00Z",
        "query": "怎么安装非debian的程序",
        "bm25_results": [{"chunk_id": "3f1c0d2e-8a4b-4c6d-9e0f-1a2b3c4d5e6f", "score": 9.5}],
        "user_feedback": {"rating": "thumbs_down"},
    }
    record = RequestLog.model_validate(flat)
    assert record.request_id == "17"
    assert record.raw_query == "怎么安装非debian的程序"
    assert record.ts is not None and record.ts.isoformat() == "2026-11-20T10:00:00+00:00"
    assert "query" not in (record.model_extra or {}) and "timestamp" not in (record.model_extra or {})
    assert RequestLog.model_validate({**flat, "question": "其他", "created_at": 0}).raw_query == flat["query"]


def test_flat_form_keeps_raw_query_and_ts_over_the_flat_names() -> None:
    mapped = map_flat_form(
        {"request_id": "r", "raw_query": "q", "query": "other", "ts": 5, "timestamp": 6, "bm25_results": []}
    )
    assert (mapped["raw_query"], mapped["ts"]) == ("q", 5)
    assert (mapped["query"], mapped["timestamp"]) == ("other", 6)


def test_a_v1_line_naming_its_query_and_time_the_flat_way_is_read() -> None:
    # Teams' own loggers write v1 sections with `query`/`timestamp`: the names alone are mapped.
    record = RequestLog.model_validate(
        {"request_id": "r", "query": "q", "timestamp": "2026-11-30T08:00:00Z", "stages": {"bm25": ["a"]}}
    )
    assert (record.raw_query, record.ts is not None, record.stages.bm25) == ("q", True, ["a"])
    # A line with no query under any name still lacks raw_query.
    with pytest.raises(ValidationError) as caught:
        RequestLog.model_validate({"request_id": "r", "text": "q"})
    assert caught.value.errors()[0]["loc"] == ("raw_query",)


def test_a_v1_section_wins_over_the_flat_key_which_stays_as_extra() -> None:
    mapped = map_flat_form(
        {"request_id": "r", "raw_query": "q", "stages": {"bm25": ["a"]}, "bm25_results": ["b"]}
    )
    assert mapped["stages"] == {"bm25": ["a"]}
    assert mapped["bm25_results"] == ["b"]


@pytest.mark.parametrize("missing", ["request_id", "raw_query"])
def test_required_fields(missing: str) -> None:
    line = {k: v for k, v in V1_LINE.items() if k != missing}
    with pytest.raises(ValidationError) as caught:
        RequestLog.model_validate(line)
    assert caught.value.errors()[0]["loc"] == (missing,)


def test_empty_stage_differs_from_a_missing_stage() -> None:
    record = RequestLog.model_validate({"request_id": "r", "raw_query": "q", "stages": {"bm25": []}})
    assert record.stages == LoggedStages(bm25=[])
    assert record.stages is not None and record.stages.dense is None


def test_to_trace_carries_the_logged_stages() -> None:
    trace = to_trace(RequestLog.model_validate(V1_LINE))
    assert trace.query == "如何更换 apt 源"
    assert trace.rewrite.mode == "logged"
    assert trace.rewrite.rewritten_query == "更换 apt 软件源 镜像"
    assert trace.rewrite.aliases == {"源": ["软件源"]}
    assert [r.name for r in trace.routes] == ["bm25_raw", "dense_raw"]
    bm25 = trace.route("bm25_raw")
    assert bm25 is not None and [(h.chunk_id, h.rank, h.score) for h in bm25.hits] == [
        ("c1", 1, 7.5),
        ("c2", 2, 3.0),
    ]
    assert [c.chunk_id for c in trace.fused] == ["c1", "c3", "c2"]
    assert [c.rank for c in trace.fused] == [1, 2, 3]
    assert trace.rerank_input == ["c1", "c3", "c2"]
    assert [c.chunk_id for c in trace.reranked] == ["c3", "c1"]
    assert trace.final == ["c3"]
    assert trace.config_hash == "abc123"
    assert trace.timings_ms == {"total": 812.5}
    assert "logged-without-scores" in trace.flags


def test_to_trace_of_a_minimal_log_has_no_routes() -> None:
    trace = to_trace(RequestLog.model_validate({"request_id": "r", "raw_query": "q"}))
    assert trace.routes == [] and trace.final == [] and trace.rewrite.rewritten_query == "q"


def test_a_producers_own_routes_field_of_another_shape_adds_no_route() -> None:
    # Only trace ingest's `{name, kind, hits}` entries beyond the stage routes are routes; a
    # producer's own `routes` key (kept as an unknown field) is left alone.
    for routes in (
        ["es", "milvus"],
        {"es": 3},
        [{"name": "es", "kind": "sparse", "hits": ["c1"]}],
        [{"name": "es", "kind": "bm25", "hits": [{"score": 1.0}]}],
        [{"kind": "dense", "hits": []}],
    ):
        record = RequestLog.model_validate({"request_id": "42", "raw_query": "q", "routes": routes})
        assert to_trace(record).routes == []


def test_schema_file_accepts_a_v1_line_and_rejects_a_missing_id() -> None:
    schema = json.loads((REPO_ROOT / "schemas" / "request_log.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(V1_LINE, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"raw_query": "q"}, schema)


def test_to_line_round_trips_through_the_reader() -> None:
    from ragtriage.logs.reader import LogLine, parse_line

    record = RequestLog.model_validate(V1_LINE)
    parsed = parse_line(record.to_line().encode(), 1)
    assert isinstance(parsed, LogLine)
    assert parsed.record() == record


def test_feedback_is_shown_in_words() -> None:
    from ragtriage.commands.show import feedback_line
    from ragtriage.logs.schema import LoggedFeedback

    assert feedback_line(LoggedFeedback(rating="thumbs_down")) == "rating thumbs_down"
    assert feedback_line(LoggedFeedback(escalated=True, follow_up=True)) == (
        "no rating · escalated to a human · followed up"
    )
    assert feedback_line(LoggedFeedback(rating=1, reason="答非所问", follow_up="那 testing 呢")) == (
        "rating 1 · reason: 答非所问 · follow-up question: 那 testing 呢"
    )
