"""The span tree's rules on hand-built traces (real OpenTelemetry SDK, OTLP exporter encoding): a
retriever span that parents retriever spans is the fusion, a private twin span is its public
span's step, a retriever that embeds the query is dense, a QueryBundle JSON input is its query
text. `tests/integration/test_llamaindex_spans.py` checks the same on a real LlamaIndex trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import Span, Tracer, set_span_in_context

from ragtriage.config.settings import OtelSettings
from ragtriage.logs.formats.assemble import Assembled
from ragtriage.logs.formats.detect import detect
from ragtriage.logs.formats.read import read_traces
from ragtriage.logs.schema import RequestLog, stage_ids
from tests.trace_producers import make_tracer, otlp_lines

KIND = "openinference.span.kind"


def _child(tracer: Tracer, name: str, parent: Span, attrs: dict[str, Any]) -> Span:
    return tracer.start_span(name, context=set_span_in_context(parent), attributes=attrs)


def _docs(ids: list[str], score: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, chunk_id in enumerate(ids):
        out[f"retrieval.documents.{i}.document.id"] = chunk_id
        out[f"retrieval.documents.{i}.document.score"] = score - i / 100
    return out


def _bundle(query: str) -> dict[str, Any]:
    value = {"query_bundle": {"query_str": query, "image_path": None, "custom_embedding_strs": None}}
    return {"input.value": json.dumps(value, ensure_ascii=False), "input.mime_type": "application/json"}


def _trace(tmp_path: Path, otel: OtelSettings | None = None) -> RequestLog:
    """One request: root CHAIN, a hybrid retriever whose private twin is its *sibling* (as an
    instrumentor that does not nest them records it) and parents a keyword-named retriever that
    embeds the query and a lexical one, both behind their own private twins."""
    tracer, exporter = make_tracer()
    meta = json.dumps({"request_id": "r-1"})
    root = tracer.start_span(
        "Engine.query", attributes={KIND: "CHAIN", "input.value": "补签 怎么 申请", "metadata": meta}
    )
    hybrid = _child(
        tracer,
        "Hybrid.retrieve",
        root,
        {KIND: "RETRIEVER", "input.value": "补签 申请", **_docs(["b", "a", "c"], 0.03)},
    )
    twin = _child(tracer, "Hybrid._retrieve", root, {KIND: "RETRIEVER", **_bundle("补签 申请")})
    vector = _child(
        tracer,
        "KeywordVectorRetriever.retrieve",
        twin,
        {KIND: "RETRIEVER", **_bundle("补签 申请"), **_docs(["b", "c"], 0.9)},
    )
    vector_twin = _child(
        tracer, "KeywordVectorRetriever._retrieve", vector, {KIND: "RETRIEVER", **_bundle("补签 申请")}
    )
    embed = _child(tracer, "E5.get_query_embedding", vector_twin, {KIND: "EMBEDDING"})
    lexical = _child(
        tracer,
        "BM25Retriever.retrieve",
        twin,
        {KIND: "RETRIEVER", **_bundle("补签 申请"), **_docs(["a", "b"], 7.0)},
    )
    lexical_twin = _child(
        tracer, "BM25Retriever._retrieve", lexical, {KIND: "RETRIEVER", **_bundle("补签 申请")}
    )
    for span in (embed, vector_twin, vector, lexical_twin, lexical, twin, hybrid, root):
        span.end()
    path = tmp_path / "t.otlp.jsonl"
    path.write_text(otlp_lines(exporter.get_finished_spans(), per_line=3), encoding="utf-8")
    [item] = read_traces([(path, *detect(path))], otel or OtelSettings())
    assert isinstance(item, Assembled), item
    return RequestLog.model_validate_json(item.body)


def test_fusion_twins_and_leaf_kinds_by_structure(tmp_path: Path) -> None:
    record = _trace(tmp_path)
    assert record.stages is not None
    assert stage_ids(record.stages.fused) == ["b", "a", "c"]
    # The keyword-named retriever embeds the query: dense; the BM25 one is the lexical route.
    assert (stage_ids(record.stages.dense), stage_ids(record.stages.bm25)) == (["b", "c"], ["a", "b"])
    routes = (record.model_extra or {})["routes"]
    assert [(r["name"], r["kind"], r["span_name"], r["query"]) for r in routes] == [
        ("dense", "dense", "KeywordVectorRetriever.retrieve", "补签 申请"),
        ("bm25", "bm25", "BM25Retriever.retrieve", "补签 申请"),
    ]
    # The retrievers searched another text than the user's: that is the rewritten query.
    assert record.rewrite is not None and record.rewrite.rewritten_query == "补签 申请"


def test_configured_route_names_still_win_under_a_fusion(tmp_path: Path) -> None:
    otel = OtelSettings(routes={"bm25_raw": ["KeywordVector"], "dense_raw": ["BM25Retriever"]})
    record = _trace(tmp_path, otel)
    assert record.stages is not None
    routes = (record.model_extra or {})["routes"]
    assert [(r["name"], r["kind"]) for r in routes] == [("bm25_raw", "bm25"), ("dense_raw", "dense")]
    assert stage_ids(record.stages.bm25) == ["b", "c"] and stage_ids(record.stages.fused) == ["b", "a", "c"]


def test_without_a_reranker_the_final_context_is_what_the_query_engine_answered_from(tmp_path: Path) -> None:
    # A real LlamaIndex query engine (mock embedding and LLM, nothing downloaded) whose postprocessor
    # emits no rerank events: the nodes it kept are only in the engine's output (`source_nodes`).
    from llama_index.core import Settings, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class KeepTwo(BaseNodePostprocessor):
        def _postprocess_nodes(
            self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
        ) -> list[NodeWithScore]:
            return nodes[1:3]

    Settings.tokenizer = list  # tiktoken would download its vocabulary
    index = VectorStoreIndex(
        [TextNode(id_=f"faq/apt#{i}", text=f"apt 第 {i} 段") for i in range(6)],
        embed_model=MockEmbedding(embed_dim=8),
    )
    engine = index.as_query_engine(
        similarity_top_k=4, node_postprocessors=[KeepTwo()], llm=MockLLM(max_tokens=4)
    )
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        response = engine.query("apt 怎么用")
    finally:
        instrumentor.uninstrument()
    path = tmp_path / "li.otlp.jsonl"
    path.write_text(otlp_lines(memory.get_finished_spans()), encoding="utf-8")
    [item] = read_traces([(path, *detect(path))], OtelSettings())
    assert isinstance(item, Assembled)
    record = RequestLog.model_validate_json(item.body)
    assert record.stages is not None and len(stage_ids(record.stages.dense)) == 4
    served = [n.node.node_id for n in response.source_nodes]
    assert stage_ids(record.stages.final_context) == served == stage_ids(record.stages.dense)[1:3]


def test_a_langchain_ensemble_retriever_is_the_fusion_of_its_retrievers(tmp_path: Path) -> None:
    # The same rule on LangChain (real EnsembleRetriever, real OpenInference instrumentor): the
    # ensemble's span parents its retrievers' spans, so its documents are the fused list.
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class Listed(BaseRetriever):
        ids: list[str]

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [Document(page_content=f"第 {i} 段", metadata={"chunk_id": i}) for i in self.ids]

    class KeywordRetriever(Listed):
        pass

    class VectorRetriever(Listed):
        pass

    ensemble = EnsembleRetriever(
        retrievers=[KeywordRetriever(ids=["a", "b"]), VectorRetriever(ids=["b", "c"])], weights=[0.5, 0.5]
    )
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        served = [d.metadata["chunk_id"] for d in ensemble.invoke("补签 申请")]
    finally:
        instrumentor.uninstrument()
    path = tmp_path / "lc.otlp.jsonl"
    path.write_text(otlp_lines(memory.get_finished_spans()), encoding="utf-8")
    [item] = read_traces([(path, *detect(path))], OtelSettings())
    assert isinstance(item, Assembled)
    record = RequestLog.model_validate_json(item.body)
    assert record.stages is not None and record.raw_query == "补签 申请"
    assert stage_ids(record.stages.fused) == served == ["b", "a", "c"]
    assert (stage_ids(record.stages.bm25), stage_ids(record.stages.dense)) == (["a", "b"], ["b", "c"])
    assert [r["span_name"] for r in (record.model_extra or {})["routes"]] == [
        "KeywordRetriever",
        "VectorRetriever",
    ]


@pytest.mark.parametrize("over", ["ensemble", "one route"])
def test_a_langchain_compression_retriever_is_the_selection_after_the_fusion(
    tmp_path: Path, over: str
) -> None:
    # LangChain's rerank pattern (real ContextualCompressionRetriever over a real EnsembleRetriever
    # of a TFIDFRetriever and a vector store's retriever, real instrumentor): the compression
    # retriever's span wraps the ensemble's, so its documents are the selection, the ensemble's the
    # fused list; over a lone route, there is no fused list. Its output is its documents, not an answer.
    from langchain_classic.retrievers import ContextualCompressionRetriever, EnsembleRetriever
    from langchain_community.retrievers import TFIDFRetriever
    from langchain_core.callbacks import Callbacks
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class LastTwo(BaseDocumentCompressor):
        def compress_documents(self, documents: Any, query: str, callbacks: Callbacks | None = None) -> Any:
            return list(documents)[::-1][:2]

    docs = [
        Document(page_content=text, metadata={"chunk_id": f"c{i}"})
        for i, text in enumerate(["补签 申请 流程", "年假 申请", "报销 发票", "补签 期限"])
    ]
    lexical = TFIDFRetriever.from_documents(docs, k=2)
    dense = InMemoryVectorStore.from_documents(docs, DeterministicFakeEmbedding(size=8)).as_retriever(
        search_kwargs={"k": 2}
    )
    fusion = EnsembleRetriever(retrievers=[lexical, dense], weights=[0.5, 0.5], id_key="chunk_id")
    wrapped = fusion if over == "ensemble" else dense
    selecting = ContextualCompressionRetriever(base_compressor=LastTwo(), base_retriever=wrapped)
    inner = [d.metadata["chunk_id"] for d in wrapped.invoke("补签 申请")]
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        served = [d.metadata["chunk_id"] for d in selecting.invoke("补签 申请")]
    finally:
        instrumentor.uninstrument()
    path = tmp_path / "lc.otlp.jsonl"
    path.write_text(otlp_lines(memory.get_finished_spans()), encoding="utf-8")
    [item] = read_traces([(path, *detect(path))], OtelSettings())
    assert isinstance(item, Assembled)
    record = RequestLog.model_validate_json(item.body)
    assert record.stages is not None and record.answer is None
    assert stage_ids(record.stages.reranked) == stage_ids(record.stages.final_context) == served
    assert served == inner[::-1][:2]
    routes = [(r["name"], r["span_name"]) for r in (record.model_extra or {})["routes"]]
    if over == "ensemble":
        assert stage_ids(record.stages.fused) == inner and len(inner) > 2
        assert routes == [("bm25", "TFIDFRetriever"), ("dense", "VectorStoreRetriever")]
    else:
        assert record.stages.fused is None and stage_ids(record.stages.dense) == inner
        assert routes == [("dense", "VectorStoreRetriever")]
