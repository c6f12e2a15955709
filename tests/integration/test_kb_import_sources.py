"""`kb import --sql` on a real SQLite database (and live PostgreSQL when CI provides one) and
`kb import --qdrant-path` on a real Qdrant local-mode collection, which must stay untouched."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from qdrant_client import QdrantClient, models

from ragtriage.cli import cli
from ragtriage.errors import InputError
from ragtriage.kb.import_sql import SQLSource

DIM = 384
QUERY = (
    "SELECT c.id AS chunk_id, c.content, c.section_title AS title, d.id AS doc_id, d.name AS doc_title, "
    "c.chunk_index AS ordinal, c.is_deleted AS deleted, c.embedding, c.lang "
    "FROM document_chunks c JOIN documents d ON d.id = c.document_id ORDER BY c.id"
)
TEXTS = [
    "出差结束后十五天内提交发票原件。",
    "VPN 连接失败时先检查客户端版本。",
    "会议室可以提前七天在内网预订。",
]


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def _vectors(count: int) -> np.ndarray:
    matrix = np.random.default_rng(7).normal(size=(count, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def _stats() -> dict[str, Any]:
    return dict(json.loads(_run("kb", "stats", "--json").stdout))


@pytest.fixture
def production_db(tmp_path: Path) -> Path:
    """A SQLite chunk table as a KB product keeps it: UUID text ids, integer documents, JSON and BLOB vectors."""
    path = tmp_path / "prod.db"
    vectors = _vectors(len(TEXTS))
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE documents (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute(
            "CREATE TABLE document_chunks (id TEXT PRIMARY KEY, document_id INTEGER, chunk_index INTEGER,"
            " content TEXT, section_title TEXT, embedding, is_deleted INTEGER, lang TEXT)"
        )
        db.executemany("INSERT INTO documents VALUES (?, ?)", [(1, "报销制度"), (2, "IT 手册")])
        for n, text in enumerate(TEXTS):
            # Two vectors as JSON text, one as float32 bytes: both occur in real tables.
            vector: Any = json.dumps(vectors[n].tolist()) if n != 1 else vectors[n].astype("<f4").tobytes()
            db.execute(
                "INSERT INTO document_chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (str(uuid.UUID(int=n + 1)), 1 + n % 2, n, text, f"节 {n}", vector, 0, "zh"),
            )
    return path


def test_sql_query_imports_joined_rows_with_their_vectors(production_db: Path) -> None:
    url = f"sqlite:///{production_db}"
    result = _run("kb", "import", "--sql", url, "--query", QUERY, "--vector-field", "embedding", "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["read"], report["added"], report["vectors"], report["index"]["embedded"]) == (3, 3, 3, 0)
    shown = json.loads(_run("kb", "show", str(uuid.UUID(int=2)), "--json").stdout)
    assert (shown["doc_id"], shown["title"], shown["meta"]) == ("2", "节 1", {"deleted": 0, "lang": "zh"})

    with sqlite3.connect(production_db) as db:
        db.execute("UPDATE document_chunks SET is_deleted = 1 WHERE chunk_index = 2")
    again = json.loads(
        _run("kb", "import", "--sql", url, "--query", QUERY, "--vector-field", "embedding", "--json").stdout
    )
    assert (again["unchanged"], again["deleted"], again["index"]["deleted"]) == (2, 1, 1)
    assert again["deleted_by"] == {"deleted": 1}
    shown = _run("kb", "import", "--sql", url, "--query", QUERY, "--vector-field", "embedding")
    assert shown.exit_code == 0, shown.output
    assert "rows: read 3 = added 0 + changed 0 + unchanged 2 + deleted 1 + rejected 0\n" in shown.stdout
    assert (
        "deleted: rows the status filters keep out of retrieval (deleted 1); stored as deleted"
        in shown.stdout
    )


@pytest.mark.parametrize(
    "url, query, expected",
    [
        (
            "{db}",
            "SELECT id AS chunk_id, content FROM no_such_table",
            "the query failed before returning a row on sqlite:",
        ),
        (
            "{db}",
            "SELECT id AS chunk_id, content, content FROM document_chunks WHERE 1 = 1 UNION SELECT 1",
            "failed",
        ),
        ("sqlite:///{tmp}/missing.db", "SELECT 1", "no SQLite database at"),
        ("postgresql+psycopg://ro:secret@127.0.0.1:1/kb", "SELECT 1", "cannot reach the database"),
    ],
    ids=["sql_error", "bad_union", "missing_file", "unreachable"],
)
def test_sql_failures_are_one_line_and_import_nothing(
    production_db: Path, tmp_path: Path, url: str, query: str, expected: str
) -> None:
    pytest.importorskip("psycopg")
    url = url.format(db=f"sqlite:///{production_db}", tmp=tmp_path)
    result = _run("kb", "import", "--sql", url, "--query", query)

    assert isinstance(result.exception, InputError), result.output
    assert expected in str(result.exception) and "fix:" in str(result.exception)
    assert "secret" not in str(result.exception)
    assert _stats()["chunks"] == {}


def test_a_query_failing_after_some_rows_names_the_query_not_the_connection(production_db: Path) -> None:
    query = (
        "SELECT id AS chunk_id, content, json_extract(CASE WHEN chunk_index >= 2 THEN 'x{' ELSE '{}' END, '$.a')"
        " AS j FROM document_chunks"
    )
    source = SQLSource(f"sqlite:///{production_db}", query, batch_size=1)

    with pytest.raises(InputError) as raised:
        for _batch in source.batches():
            pass

    assert str(raised.value) == (
        f"--sql: the query failed after 1 row on sqlite:///{production_db}: malformed JSON; "
        "fix: correct the query (try it in the database's own client)"
    )


@pytest.mark.postgres
def test_live_postgresql_is_streamed_with_a_server_side_cursor() -> None:
    url = os.environ.get("RAGTRIAGE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("RAGTRIAGE_TEST_POSTGRES_URL is not set (CI sets it to a throwaway PostgreSQL server)")
    from sqlalchemy import create_engine, text

    table = f"chunks_{uuid.uuid4().hex[:8]}"
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text(
                f"CREATE TABLE {table} (id uuid PRIMARY KEY, body text, emb real[], status text, extra jsonb)"
            )
        )
        for n, vector in enumerate(_vectors(5)):
            connection.execute(
                text(f"INSERT INTO {table} VALUES (:id, :body, :emb, :status, CAST(:extra AS jsonb))"),
                {"id": str(uuid.UUID(int=n + 1)), "body": f"第 {n} 段", "emb": vector.tolist(),
                 "status": "READY" if n else "DRAFT", "extra": json.dumps({"n": n})},
            )  # fmt: skip
    try:
        query = f"SELECT id, body, emb, status, extra FROM {table}"
        result = _run("kb", "import", "--sql", url, "--query", query, "--map", "chunk_id=id,content=body",
                      "--vector-field", "emb", "--json")  # fmt: skip
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert (report["read"], report["added"], report["deleted"]) == (5, 4, 1)
        shown = json.loads(_run("kb", "show", str(uuid.UUID(int=2)), "--json").stdout)
        assert shown["meta"] == {"status": "READY", "extra": {"n": 1}}

        # The last row's value fails while the cursor is read: the query's fault, not the network's.
        failing = (
            f"SELECT id, body || '!' AS body, 1 / (CASE WHEN body = '第 4 段' THEN 0 ELSE 1 END) FROM {table}"
        )
        broken = _run("kb", "import", "--sql", url, "--query", failing, "--map", "chunk_id=id,content=body")
        assert isinstance(broken.exception, InputError), broken.output
        assert "the query failed" in str(broken.exception) and "division by zero" in str(broken.exception)
        assert _stats()["revision"] == report["kb_revision"]
    finally:
        with engine.begin() as connection:
            connection.execute(text(f"DROP TABLE {table}"))
        engine.dispose()


def _folder_digest(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.endswith(".lock")
    }


@pytest.fixture
def production_qdrant(tmp_path: Path) -> Path:
    """A local-mode collection as production writes it: UUID point ids, text and metadata in the payload."""
    folder = tmp_path / "prod_qdrant"
    client = QdrantClient(path=str(folder))
    client.create_collection(
        "prod_chunks", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    client.upsert(
        "prod_chunks",
        points=[
            models.PointStruct(
                id=str(uuid.UUID(int=n + 1)),
                vector=vector.tolist(),
                payload={"text": TEXTS[n], "document_id": 10 + n, "section": f"节 {n}", "lang": "zh"},
            )
            for n, vector in enumerate(_vectors(len(TEXTS)))
        ],
    )
    client.close()
    return folder


def test_qdrant_collection_is_scrolled_with_vectors_and_left_untouched(production_qdrant: Path) -> None:
    before = _folder_digest(production_qdrant)
    mapping = "content=payload.text,doc_id=payload.document_id,title=payload.section"

    result = _run("kb", "import", "--qdrant-path", str(production_qdrant), "--collection", "prod_chunks",
                  "--map", mapping, "--json")  # fmt: skip

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["added"], report["vectors"], report["index"]["embedded"]) == (3, 3, 0)
    shown = json.loads(_run("kb", "show", str(uuid.UUID(int=3)), "--json").stdout)
    assert (shown["doc_id"], shown["title"], shown["meta"]) == ("12", "节 2", {"payload.lang": "zh"})
    assert _folder_digest(production_qdrant) == before


def test_a_langchain_collection_maps_fields_inside_its_metadata_object(tmp_path: Path) -> None:
    """LangChain's Qdrant store keeps the text in `page_content` and everything else in a nested
    `metadata` object: its keys are mapped as `payload.metadata.<key>`, the others kept one by one."""
    folder = tmp_path / "langchain_qdrant"
    client = QdrantClient(path=str(folder))
    client.create_collection(
        "docs", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    client.upsert(
        "docs",
        points=[
            models.PointStruct(
                id=100 + n,
                vector=vector.tolist(),
                payload={
                    "page_content": TEXTS[n],
                    "metadata": {"doc": f"handbook-{n % 2}", "headers": {"h2": f"节 {n}"}, "page": n + 1},
                },
            )
            for n, vector in enumerate(_vectors(len(TEXTS)))
        ],
    )
    client.close()
    mapping = "content=payload.page_content,doc_id=payload.metadata.doc,title=payload.metadata.headers.h2"

    result = _run("kb", "import", "--qdrant-path", str(folder), "--collection", "docs", "--map", mapping)

    assert result.exit_code == 0, result.output
    shown = json.loads(_run("kb", "show", "102", "--json").stdout)
    assert (shown["doc_id"], shown["title"], shown["meta"]) == (
        "handbook-0",
        "节 2",
        {"payload.metadata.page": 3},
    )


def test_a_missing_qdrant_collection_names_the_ones_there(production_qdrant: Path) -> None:
    result = _run("kb", "import", "--qdrant-path", str(production_qdrant), "--collection", "prod_chunk")

    assert isinstance(result.exception, InputError)
    assert "no such collection (there: prod_chunks)" in str(result.exception)
    assert _stats()["chunks"] == {}
