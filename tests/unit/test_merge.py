"""The one merge rule of ingest (`logs.merge`): absence is not difference, a field both have must
agree, annotations accumulate, and a trace read without its root span yields to one read with it."""

from __future__ import annotations

import json
from typing import Any

from ragtriage.logs.merge import merge_request
from ragtriage.logs.schema import RequestLog

BASE: dict[str, Any] = {
    "request_id": "r1",
    "raw_query": "年假几天",
    "ts": "2026-11-02T08:00:00Z",
    "stages": {"bm25": ["c1", "c2"], "dense": [{"chunk_id": "c2", "score": 0.9}]},
}


def _body(**changes: Any) -> bytes:
    return json.dumps({**BASE, **changes}, ensure_ascii=False).encode()


def test_a_later_line_adds_feedback_and_scores_and_lacks_without_differing() -> None:
    later = _body(
        stages={"bm25": [{"chunk_id": "c1", "score": 3.5}, "c2"]}, feedback={"rating": "down"}, answer="a"
    )
    merge = merge_request(_body(), later)
    assert merge.outcome == "merged" and merge.body is not None
    assert merge.added == ["stages.bm25[].score", "feedback", "answer"]
    record = RequestLog.model_validate_json(merge.body)
    assert record.feedback is not None and record.feedback.rating == "down" and record.answer == "a"
    assert record.stages is not None and record.stages.dense is not None  # kept though the later lacks it
    assert json.loads(merge.body)["stages"]["bm25"] == [{"chunk_id": "c1", "score": 3.5}, "c2"]
    # The stored request holding all of it: the later line is a duplicate, in either form.
    assert merge_request(merge.body, later).outcome == "duplicate"
    assert merge_request(merge.body, _body(stages={"bm25": ["c1", "c2"]})).outcome == "duplicate"


def test_a_field_both_have_with_different_values_is_a_conflict() -> None:
    assert merge_request(_body(), _body(raw_query="婚假几天")).conflicts == ["raw_query"]
    assert merge_request(_body(), _body(stages={"bm25": ["c9", "c2"]})).conflicts == ["stages.bm25[0]"]
    assert merge_request(_body(), _body(stages={"bm25": ["c1"]})).conflicts == ["stages.bm25 (length 2 vs 1)"]
    scored = _body(stages={"dense": [{"chunk_id": "c2", "score": 0.1}]})
    assert merge_request(_body(), scored).conflicts == ["stages.dense[0].score"]
    rated = _body(feedback={"rating": "up"})
    assert merge_request(rated, _body(feedback={"rating": "down"})).conflicts == ["feedback.rating"]
    assert merge_request(_body(), b'{"request_id": "r1"}').conflicts == ["body"]


def test_annotations_accumulate_and_a_rootless_reading_yields() -> None:
    first = _body(otel={"annotations": [{"name": "thumbs", "label": "up"}]})
    later = _body(otel={"annotations": [{"name": "escalation", "label": "true"}]})
    merge = merge_request(first, later)
    assert merge.outcome == "merged" and merge.body is not None
    assert [a["name"] for a in json.loads(merge.body)["otel"]["annotations"]] == ["thumbs", "escalation"]

    def reading(root_parent: str | None, **changes: Any) -> bytes:
        span = {"span_id": "s1", "name": "query", **({"parent_id": root_parent} if root_parent else {})}
        return _body(otel={"trace_id": "t1", "root_span_id": "s1", "spans": [span]}, **changes)

    partial = reading("s0", raw_query='"年假几天"', answer="rewrite output")
    whole = reading(None, answer="每年 5 天", session="s-1")
    merge = merge_request(partial, whole)
    assert merge.outcome == "merged" and merge.body is not None
    record = RequestLog.model_validate_json(merge.body)
    assert (record.raw_query, record.answer, record.session) == ("年假几天", "每年 5 天", "s-1")
    assert merge_request(whole, partial).outcome == "duplicate"


def test_a_trace_read_again_with_a_span_more_adds_the_span() -> None:
    spans = [{"span_id": "s1", "name": "query"}, {"span_id": "s2", "name": "bm25", "duration_ms": 3.0}]
    first = _body(otel={"trace_id": "t1", "root_span_id": "s1", "spans": spans[:1]})
    later = _body(otel={"trace_id": "t1", "root_span_id": "s1", "spans": [spans[1], spans[0]]})
    merge = merge_request(first, later)
    assert merge.outcome == "merged" and merge.added == ["otel.spans[]"] and merge.body is not None
    assert json.loads(merge.body)["otel"]["spans"] == spans
    other = _body(otel={"trace_id": "t1", "spans": [{"span_id": "s1", "name": "other"}]})
    assert merge_request(first, other).conflicts == ["otel.spans[0].name"]
