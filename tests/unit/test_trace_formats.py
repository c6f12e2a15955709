"""Trace formats read into requests: OTLP (hex and base64 ids, split lines and files), Phoenix,
Langfuse, the `[logs.otel]` mapping defaults, and content detection.

Every OTLP input here is produced by the real OpenTelemetry SDK with OpenInference attribute
names and encoded by the OTLP exporter's own encoder (`tests/trace_producers.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragtriage.config.settings import OtelSettings
from ragtriage.errors import InputError
from ragtriage.logs.formats.assemble import Assembled, Late, Rejected
from ragtriage.logs.formats.detect import detect
from ragtriage.logs.formats.otlp import SpanFormatError, normalize_id
from ragtriage.logs.formats.read import read_traces
from ragtriage.logs.schema import RequestLog, stage_ids
from tests.langfuse_producer import langfuse_export, langfuse_page
from tests.trace_producers import (
    collector_dict,
    make_tracer,
    otlp_lines,
    phoenix_annotations,
    phoenix_otlp_page,
    phoenix_page,
    record_request,
)

REQUEST: dict[str, Any] = {
    "request_id": "7f1c2a9e-0b4d-4c1e-9a51-3d2f8e6b7c10",
    "ts": "2026-11-02T08:00:47.250Z",
    "session": "sess-42",
    "user": "u-7",
    "raw_query": "补签怎么申请",
    "answer": "抱歉，没有找到相关说明。",
    "citations": [],
    "pipeline_version": "prod-2026.10",
    "stages": {
        "bm25": [{"chunk_id": "leave/missed#1", "score": 12.5}, {"chunk_id": "leave/missed#2", "score": 9.0}],
        "dense": [{"chunk_id": "leave/missed#2", "score": 0.91}, {"chunk_id": 101, "score": 0.88}],
        "fused": [
            {"chunk_id": "leave/missed#2", "score": 0.032},
            {"chunk_id": "leave/missed#1", "score": 0.016},
        ],
        "reranked": [
            {"chunk_id": "leave/missed#1", "score": 0.9},
            {"chunk_id": "leave/missed#2", "score": 0.4},
        ],
        "final_context": ["leave/missed#1"],
    },
    "feedback": {"rating": "thumbs_down", "escalated": True},
    "latency_ms": 850.0,
}


def _read(files: list[Path], otel: OtelSettings | None = None, **kw: Any) -> list[Assembled | Rejected]:
    return list(read_traces([(f, *detect(f)) for f in files], otel or OtelSettings(), **kw))


def _record(body: bytes) -> RequestLog:
    return RequestLog.model_validate_json(body)


def _spans(requests: list[dict[str, Any]], **kw: Any) -> Any:
    tracer, exporter = make_tracer(service_version="svc-9.1")
    for request in requests:
        record_request(tracer, request, **kw)
    return exporter.get_finished_spans()


def test_otlp_request_maps_every_stage(tmp_path: Path) -> None:
    path = tmp_path / "traces.otlp.jsonl"
    path.write_text(otlp_lines(_spans([REQUEST]), per_line=2))
    [item] = _read([path])
    assert isinstance(item, Assembled)
    record = _record(item.body)
    assert record.request_id == REQUEST["request_id"]
    assert record.raw_query == REQUEST["raw_query"] and record.answer == REQUEST["answer"]
    assert (record.session, record.user, record.pipeline_version) == ("sess-42", "u-7", "prod-2026.10")
    assert record.ts is not None and record.ts.isoformat() == "2026-11-02T08:00:47.250000+00:00"
    stages = record.stages
    assert stages is not None
    assert stage_ids(stages.bm25) == ["leave/missed#1", "leave/missed#2"]
    assert stage_ids(stages.dense) == ["leave/missed#2", "101"]  # an int id becomes text
    assert stage_ids(stages.fused) == ["leave/missed#2", "leave/missed#1"]
    assert stage_ids(stages.reranked) == ["leave/missed#1", "leave/missed#2"]
    assert stage_ids(stages.final_context) == ["leave/missed#1"]  # reranker output cut at top_k = 1
    assert record.citations == []
    assert record.feedback is not None and record.feedback.rating == "down" and record.feedback.escalated
    assert record.latency_ms == 850.0
    extra = record.model_extra or {}
    assert set(extra["stage_latency_ms"]) == {"bm25", "dense", "rerank"}
    assert [r["name"] for r in extra["routes"]] == ["bm25", "dense"]
    # Attributes the mapping does not read are kept; document contents are not.
    kept = {s["name"]: s.get("attributes", {}) for s in extra["otel"]["spans"]}
    assert kept["generate"] == {"llm.model_name": "qwen-test"}
    assert "content of" not in item.body.decode()
    assert extra["otel"]["resource"]["service.version"] == "svc-9.1"


def test_base64_ids_and_string_integers_read_the_same_as_hex(tmp_path: Path) -> None:
    spans = _spans([REQUEST, {**REQUEST, "request_id": "r-2", "session": "sess-43"}])
    hex_path, b64_path = tmp_path / "hex.jsonl", tmp_path / "b64.jsonl"
    hex_path.write_text(otlp_lines(spans, per_line=3))
    b64_path.write_text(otlp_lines(spans, per_line=5, ids="base64"))
    assert '"startTimeUnixNano":"' in b64_path.read_text()  # protobuf's JSON mapping: int64 as text
    assert '"intValue":"1"' in b64_path.read_text()  # reranker.top_k
    first, second = _read([hex_path]), _read([b64_path])
    assert [i.body for i in first] == [i.body for i in second]  # type: ignore[union-attr]
    assert len(first) == 2


def test_spans_split_over_files_assemble_the_same_in_one_pass_or_two(tmp_path: Path) -> None:
    spans = _spans([{**REQUEST, "request_id": f"r-{i}"} for i in range(6)])
    one = tmp_path / "one.jsonl"
    one.write_text(otlp_lines(spans, per_line=len(spans)))
    lines = otlp_lines(spans, per_line=4).splitlines(keepends=True)
    part_a, part_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    part_a.write_text("".join(lines[1::2]))
    part_b.write_text("".join(lines[0::2]))
    whole = sorted(i.body for i in _read([one]))  # type: ignore[union-attr]
    split = sorted(i.body for i in _read([part_a, part_b]))  # type: ignore[union-attr]
    assert len(whole) == 6 and whole == split
    # Read twice (a big input): each trace is assembled once its last span is read.
    twice = _read([part_a, part_b], single_pass_bytes=0)
    assert sorted(i.body for i in twice) == whole  # type: ignore[union-attr]
    # A file given twice (a rotated file copied again) changes nothing: spans count once.
    assert sorted(i.body for i in _read([one, one])) == whole  # type: ignore[union-attr]


def test_defaults_trace_id_service_version_and_score_feedback(tmp_path: Path) -> None:
    request = {k: v for k, v in REQUEST.items() if k not in ("request_id", "pipeline_version", "feedback")}
    tracer, exporter = make_tracer(service_version="svc-9.1")
    record_request(
        tracer,
        {**request, "request_id": "ignored"},
        retriever_names=("keyword_search", "KNNRetriever"),
        extra_root_attributes={
            "metadata": json.dumps({"tenant": "acme"}),
            "annotations.0.annotation.name": "thumbs",
            "annotations.0.annotation.score": 0,
        },
    )
    path = tmp_path / "t.jsonl"
    path.write_text(otlp_lines(exporter.get_finished_spans()))
    [item] = _read([path])
    assert isinstance(item, Assembled)
    record = _record(item.body)
    trace_id = json.loads(path.read_text().splitlines()[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0][
        "traceId"
    ]
    assert record.request_id == trace_id  # no request_id in the root metadata
    assert record.pipeline_version == "svc-9.1"  # the resource's service.version
    assert record.feedback is not None and record.feedback.rating == "down"  # score 0 on a 0–1 scale
    extra = record.model_extra or {}
    assert [(r["name"], r["kind"]) for r in extra["routes"]] == [("bm25", "bm25"), ("dense", "dense")]
    assert extra["otel"]["metadata"] == {"tenant": "acme"}


def test_configured_routes_and_langchain_document_ids(tmp_path: Path) -> None:
    path = tmp_path / "lc.jsonl"
    path.write_text(
        otlp_lines(_spans([REQUEST], retriever_names=("es_lookup", "KNNRetriever"), langchain_documents=True))
    )
    [rejected] = _read([path], OtelSettings(document_id_keys=["doc_key"]))
    assert isinstance(rejected, Rejected) and rejected.kind == "missing_document_id"
    assert "document_id_keys" in rejected.fix and "es_lookup" in rejected.message
    otel = OtelSettings(routes={"bm25_raw": ["ES_Lookup"], "dense_raw": ["knn"]})
    [item] = _read([path], otel)
    assert isinstance(item, Assembled)
    record = _record(item.body)
    assert record.stages is not None and stage_ids(record.stages.bm25) == ["leave/missed#1", "leave/missed#2"]
    routes = (record.model_extra or {})["routes"]
    assert [(r["name"], r["kind"]) for r in routes] == [("bm25_raw", "bm25"), ("dense_raw", "dense")]


def test_trace_without_retriever_is_rejected_naming_root_span(tmp_path: Path) -> None:
    request = {**REQUEST, "stages": {}}
    path = tmp_path / "t.jsonl"
    path.write_text(otlp_lines(_spans([request])))
    [rejected] = _read([path])
    assert isinstance(rejected, Rejected) and rejected.kind == "no_retriever"
    assert "'query'" in rejected.message and "RETRIEVER" in rejected.fix
    assert rejected.source == str(path) and rejected.line_no == 1


def test_evaluator_span_linked_from_another_trace_is_the_feedback(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(otlp_lines(_spans([REQUEST], feedback_as="evaluator"), per_line=1))
    [item] = _read([path])  # the carrier's own trace is not a request of its own
    assert isinstance(item, Assembled)
    feedback = _record(item.body).feedback
    assert feedback is not None and feedback.rating == "down" and feedback.escalated


def test_bad_lines_are_rejected_with_line_and_span(tmp_path: Path) -> None:
    good = collector_dict(_spans([REQUEST]))
    broken = json.loads(json.dumps(good))
    span = broken["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["traceId"] = "not-an-id"
    path = tmp_path / "t.jsonl"
    path.write_text('{"resourceSpans": [\n' + json.dumps(broken) + "\n")
    items = _read([path])
    kinds = sorted((i.kind, i.line_no) for i in items if isinstance(i, Rejected))
    assert ("bad_span", 2) in kinds and ("invalid_json", 1) in kinds
    bad = next(i for i in items if isinstance(i, Rejected) and i.kind == "bad_span")
    assert span["spanId"] in bad.message and "traceId" in bad.message


def test_normalize_id_accepts_hex_and_base64_only() -> None:
    assert normalize_id("AAAAAAAAAAE=", 8, "spanId") == "0000000000000001"
    assert normalize_id("00000000000000FF", 8, "spanId") == "00000000000000ff"
    with pytest.raises(SpanFormatError, match="neither 16 hex digits"):
        normalize_id("xyz", 8, "spanId")


def test_phoenix_and_langfuse_exports_read_the_same_requests(tmp_path: Path) -> None:
    requests = [
        REQUEST,
        {
            **REQUEST,
            "request_id": "r-2",
            "feedback": {"rating": "up"},
            "answer": "按流程提交。",
            "citations": ["c1"],
        },
    ]
    spans = _spans(requests)
    otlp_path = tmp_path / "t.jsonl"
    otlp_path.write_text(otlp_lines(spans))
    kept, notes = phoenix_annotations(spans)
    phoenix_spans, phoenix_notes = tmp_path / "spans.json", tmp_path / "annotations.json"
    phoenix_spans.write_text(json.dumps(phoenix_page(kept), ensure_ascii=False, indent=2))
    phoenix_notes.write_text(json.dumps(notes, indent=2))
    observations, traces, scores = langfuse_export(requests)
    lf_obs, lf_traces, lf_scores = tmp_path / "obs.json", tmp_path / "traces.jsonl", tmp_path / "scores.json"
    lf_obs.write_text(json.dumps(langfuse_page(observations), ensure_ascii=False, indent=1))
    lf_traces.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in traces))
    lf_scores.write_text(json.dumps(langfuse_page(scores)))
    assert detect(phoenix_spans) == ("phoenix", "document")
    assert detect(lf_obs) == ("langfuse", "document") and detect(lf_traces) == ("langfuse", "lines")

    def view(items: list[Assembled | Rejected]) -> dict[str, Any]:
        out = {}
        for item in items:
            assert isinstance(item, Assembled), item
            r = _record(item.body)
            s, fb = r.stages, r.feedback
            assert s is not None and fb is not None and r.ts is not None
            ms = r.ts.replace(microsecond=r.ts.microsecond // 1000 * 1000)
            out[r.request_id] = (
                r.raw_query, r.answer, r.session, r.user, r.pipeline_version, ms,
                [stage_ids(getattr(s, n)) for n in ("bm25", "dense", "fused", "reranked", "final_context")],
                stage_ids(r.citations), fb.rating, bool(fb.escalated),
            )  # fmt: skip
        return out

    expected = view(_read([otlp_path]))
    assert view(_read([phoenix_spans, phoenix_notes])) == expected
    # Annotations name only a span id: they find their trace when it is read twice too.
    assert view(_read([phoenix_spans, phoenix_notes], single_pass_bytes=0)) == expected
    phoenix_otlp = tmp_path / "otlpv1.json"  # the same spans from Phoenix's OTLP-shaped endpoint
    phoenix_otlp.write_text(json.dumps(phoenix_otlp_page(kept), ensure_ascii=False, indent=2))
    assert detect(phoenix_otlp) == ("otlp", "document")
    assert view(_read([phoenix_otlp, phoenix_notes])) == expected
    assert view(_read([lf_obs, lf_traces, lf_scores])) == expected  # Langfuse keeps milliseconds
    assert expected["r-2"][-2:] == ("up", False)


def test_detection_by_content(tmp_path: Path) -> None:
    v1 = tmp_path / "requests.otlp.json"  # the name says nothing
    v1.write_text(json.dumps({"request_id": "a", "raw_query": "q"}) + "\n")
    assert detect(v1) == ("v1", "lines")
    flat = tmp_path / "flat.jsonl"
    flat.write_text(json.dumps({"request_id": "a", "raw_query": "q", "bm25_results": []}) + "\n")
    assert detect(flat) == ("flat", "lines")
    pretty = tmp_path / "doc.json"
    pretty.write_text(json.dumps({"request_id": "a", "raw_query": "q"}, indent=2))
    assert detect(pretty) == ("v1", "document")  # never read as JSONL
    with pytest.raises(InputError, match="tried v1, flat, otlp, phoenix, langfuse"):
        odd = tmp_path / "odd.json"
        odd.write_text(json.dumps({"rows": [1, 2]}, indent=2))
        detect(odd)
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(InputError, match="not JSON lines or a JSON document"):
        detect(passwd)


def _langfuse_files(
    tmp_path: Path, observations: list[dict], traces: list[dict], scores: list[dict]
) -> list[Path]:
    files = [tmp_path / "obs.jsonl", tmp_path / "traces.json", tmp_path / "scores.json"]
    files[0].write_text(
        "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in observations)
    )  # UI JSONL export
    files[1].write_text(json.dumps(langfuse_page(traces), ensure_ascii=False, indent=2))
    files[2].write_text(json.dumps(langfuse_page(scores), ensure_ascii=False, indent=2))
    return files


@pytest.mark.parametrize(
    ("score", "rating"),
    [
        ({"dataType": "NUMERIC", "value": 0.0}, "down"),
        ({"dataType": "NUMERIC", "value": 1.0}, "up"),
        ({"dataType": "BOOLEAN", "value": 0.0, "stringValue": "False"}, "down"),
        ({"dataType": "BOOLEAN", "value": 1.0, "stringValue": "True"}, "up"),
        ({"dataType": "CATEGORICAL", "stringValue": "negative", "value": None}, "down"),
        ({"dataType": "CATEGORICAL", "stringValue": "positive", "value": None}, "up"),
        ({"dataType": "TEXT", "stringValue": "bad answer", "value": None}, None),
    ],
)
def test_langfuse_score_types(tmp_path: Path, score: dict[str, Any], rating: str | None) -> None:
    request = {**REQUEST, "feedback": None}
    observations, traces, _ = langfuse_export([request])
    base = {"id": "s-1", "traceId": traces[0]["id"], "observationId": None, "source": "API", "comment": None}
    files = _langfuse_files(tmp_path, observations, traces, [{**base, "name": "user-feedback", **score}])
    [item] = _read(files)
    assert isinstance(item, Assembled)
    feedback = _record(item.body).feedback
    assert (feedback.rating if feedback else None) == rating


def test_langfuse_observation_from_opentelemetry_keeps_its_attributes(tmp_path: Path) -> None:
    """Spans sent to Langfuse over OTel keep their raw attributes (as text) in metadata.attributes;
    the RERANKER kind survives there although Langfuse files the observation as a SPAN."""
    observations, traces, _ = langfuse_export([REQUEST])
    for obs in observations:
        if obs["name"] == "rerank":
            obs["name"], obs["input"], obs["output"] = "CohereRerank.postprocess", None, None
            obs["metadata"] = {
                "attributes": {
                    "openinference.span.kind": "RERANKER",
                    "reranker.top_k": "1",
                    "reranker.input_documents.0.document.id": "leave/missed#2",
                    "reranker.input_documents.0.document.score": "0.032",
                    "reranker.output_documents.0.document.id": "leave/missed#1",
                    "reranker.output_documents.0.document.score": "0.9",
                    "reranker.output_documents.1.document.id": "leave/missed#2",
                },
                "resourceAttributes": {"service.name": "rag"},
                "scope": {"name": "openinference.instrumentation.llama_index"},
            }
    [item] = _read(_langfuse_files(tmp_path, observations, traces, []))
    assert isinstance(item, Assembled)
    stages = _record(item.body).stages
    assert stages is not None
    reranked = [(i, None) if isinstance(i, str) else (i.chunk_id, i.score) for i in stages.reranked or ()]
    assert reranked == [("leave/missed#1", 0.9), ("leave/missed#2", None)]  # text scores read as numbers
    assert stage_ids(stages.final_context) == ["leave/missed#1"]
    assert stage_ids(stages.fused) == ["leave/missed#2"]


def test_sources_name_a_tag_prefix_a_resource_attribute_or_an_attribute(tmp_path: Path) -> None:
    tracer, exporter = make_tracer(service_version="svc-9.1")
    record_request(
        tracer,
        {k: v for k, v in REQUEST.items() if k != "pipeline_version"},
        extra_root_attributes={"tag.tags": ["env=prod", "rid=REQ-77"], "app.release": "2026.11.3"},
    )
    path = tmp_path / "t.jsonl"
    path.write_text(otlp_lines(exporter.get_finished_spans()))
    otel = OtelSettings(
        request_id_from=["metadata.missing", "tag:rid="], pipeline_version_from=["resource.service.name"]
    )
    [item] = _read([path], otel)
    assert isinstance(item, Assembled)
    record = _record(item.body)
    assert (record.request_id, record.pipeline_version) == ("REQ-77", "rag-service")
    [item] = _read([path], OtelSettings(pipeline_version_from=["app.release"]))
    assert isinstance(item, Assembled) and _record(item.body).pipeline_version == "2026.11.3"
    # The metadata key the request id was read from is not kept again under otel.metadata.
    assert "request_id" not in (_record(item.body).model_extra or {})["otel"].get("metadata", {})


def test_gen_ai_evaluation_events_and_orphan_feedback(tmp_path: Path) -> None:
    request = {**REQUEST, "feedback": None}
    spans = _spans([request])
    export = collector_dict(spans)
    root = next(s for s in export["resourceSpans"][0]["scopeSpans"][0]["spans"] if "parentSpanId" not in s)
    # An OpenTelemetry GenAI evaluation event on the root (spec/annotations.md, single-result events).
    root["events"] = [
        {
            "name": "gen_ai.evaluation.result",
            "timeUnixNano": root["endTimeUnixNano"],
            "attributes": [
                {"key": "gen_ai.evaluation.name", "value": {"stringValue": "user_rating"}},
                {"key": "gen_ai.evaluation.score.label", "value": {"stringValue": "negative"}},
            ],
        }
    ]
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(export) + "\n")
    notes = tmp_path / "annotations.json"  # one for a span not in this ingest, one on a document
    notes.write_text(
        json.dumps(
            {
                "data": [
                    {"span_id": "00000000000000aa", "name": "thumbs", "annotator_kind": "HUMAN",
                     "result": {"label": "thumbs_down"}},
                    {"span_id": root["spanId"], "name": "relevance", "annotator_kind": "LLM",
                     "document_position": 0, "result": {"label": "relevant"}},
                ],
                "next_cursor": None,
            }
        )
    )  # fmt: skip
    items = _read([path, notes])
    assert _read([path, notes], single_pass_bytes=0) == items
    [request_item] = [i for i in items if isinstance(i, Assembled)]
    feedback = _record(request_item.body).feedback
    assert feedback is not None and feedback.rating == "down" and feedback.model_extra["label"] == "negative"
    # Feedback for a trace not in this ingest is late: ingest merges it into the stored request it
    # names, or quarantines it as this orphan.
    [late] = [i for i in items if isinstance(i, Late)]
    assert late.keys == ("span:00000000000000aa",) and late.feedback["rating"] == "down"
    orphan = late.orphan
    assert (
        orphan.kind == "orphan_feedback"
        and orphan.source == str(notes)
        and "00000000000000aa" in orphan.message
    )
    assert orphan.message.startswith("1 annotation or score for span 00000000000000aa"), orphan.message
