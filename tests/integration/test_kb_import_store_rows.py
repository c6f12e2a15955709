"""`kb import` writes the same rows into a SQLite store and a PostgreSQL store (the bulk insert
runs the columns' own bind processors on either driver's parameter style)."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, select

from ragtriage.errors import InputError
from ragtriage.index.kb_sync import import_source
from ragtriage.kb.importer import ImportSpec
from ragtriage.store.kb_tables import ChunkRow, ChunkVectorRow
from ragtriage.workspace import Workspace

MAP = {"chunk_id": "id", "doc_id": "document_id", "content": "text", "heading_path": "path"}


def _rows(prefix: str) -> list[dict[str, Any]]:
    vectors = np.random.default_rng(3).normal(size=(4, 384)).round(4)
    return [
        {"id": f"{prefix}-a", "document_id": "手册", "text": "出差结束后十五天内提交发票原件。",
         "path": ["财务", "报销"], "updated_at": "2024-05-01T08:00:00+08:00", "tags": ["报销", 1.5],
         "emb": vectors[0].tolist()},
        {"id": f"{prefix}-b", "document_id": "手册", "text": "超过期限需要部门负责人审批。",
         "path": "财务 > 逾期", "owner": {"name": "张三", "n": 7}, "updated_at": 1714550400,
         "emb": vectors[1].tolist()},
        {"id": f"{prefix}-c", "document_id": 8, "text": "VPN 连接失败时先检查客户端版本。",
         "emb": vectors[2].tolist()},
        {"id": f"{prefix}-d", "document_id": 8, "text": "草稿：新的 VPN 网关。", "status": "DRAFT",
         "emb": None},  # no updated_at: the import's own time (differs between the two imports)
    ]  # fmt: skip


def _import(home: Path, export: Path, store_url: str | None, kb: str) -> Workspace:
    home.mkdir()
    store = f'[store]\nurl = "{store_url}"\n' if store_url else ""
    (home / "config.toml").write_text(f'{store}[kb]\nname = "{kb}"\n', encoding="utf-8")
    workspace = Workspace.open(home)
    spec = ImportSpec(path=export, map=MAP, vector_field="emb")
    report = import_source(workspace.home, workspace.settings, workspace.engine, spec, index=False)
    assert (report.read, report.added, report.deleted, report.written) == (4, 3, 1, 4)
    return workspace


def _stored(engine: Engine, kb: str, prefix: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    chunk_table, vector_table = ChunkRow.__table__, ChunkVectorRow.__table__  # type: ignore[attr-defined]
    with engine.connect() as connection:
        chunks = [
            dict(row._mapping)
            for row in connection.execute(
                select(chunk_table).where(chunk_table.c.kb == kb).order_by(chunk_table.c.chunk_id)
            )
        ]
        vectors = [
            dict(row._mapping)
            for row in connection.execute(
                select(vector_table)
                .where(vector_table.c.chunk_id.like(f"{prefix}-%"))
                .order_by(vector_table.c.chunk_id)
            )
        ]
    for chunk in chunks:
        stamp = chunk["updated_at"].replace(tzinfo=None)  # PostgreSQL's column keeps none either
        chunk["updated_at"] = stamp if stamp.year < 2025 else "the import's time"
    for vector in vectors:
        vector["vector"] = bytes(vector["vector"])
    return chunks, vectors


@pytest.mark.postgres
def test_postgresql_store_gets_the_rows_sqlite_gets(tmp_path: Path) -> None:
    url = os.environ.get("RAGTRIAGE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("RAGTRIAGE_TEST_POSTGRES_URL is not set (CI sets it to a throwaway PostgreSQL server)")
    pytest.importorskip("psycopg")
    prefix = f"pg-import-{os.urandom(4).hex()}"
    kb = prefix  # chunk ids and the KB name are unique: other tests share the server
    export = tmp_path / "chunks.jsonl"
    export.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in _rows(prefix)), encoding="utf-8"
    )
    sqlite_engine = _import(tmp_path / "sqlite-home", export, None, kb).engine
    pg_engine = _import(tmp_path / "pg-home", export, url, kb).engine
    try:
        in_sqlite, in_pg = _stored(sqlite_engine, kb, prefix), _stored(pg_engine, kb, prefix)
        assert len(in_sqlite[0]) == 4 and len(in_sqlite[1]) == 3
        for pg_rows, sqlite_rows in zip(in_pg, in_sqlite, strict=True):
            for pg_row, sqlite_row in zip(pg_rows, sqlite_rows, strict=True):
                assert pg_row == sqlite_row
        first = in_pg[0][0]
        assert first["heading_path"] == ["财务", "报销"] and first["meta"] == {"tags": ["报销", 1.5]}
        assert first["updated_at"] == dt.datetime(2024, 5, 1, 0, 0)
    finally:
        with pg_engine.begin() as connection:
            chunk_table, vector_table = ChunkRow.__table__, ChunkVectorRow.__table__  # type: ignore[attr-defined]
            connection.execute(vector_table.delete().where(vector_table.c.chunk_id.like(f"{prefix}-%")))
            connection.execute(chunk_table.delete().where(chunk_table.c.kb == kb))
        pg_engine.dispose()


def test_the_import_connection_gets_its_page_cache_back(tmp_path: Path) -> None:
    """The import writes with a larger SQLite page cache (`IMPORT_CACHE_KIB`); the pooled
    connection is given back with the default one, after a failed import too."""
    export = tmp_path / "chunks.jsonl"
    rows = _rows("c")
    export.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    workspace = _import(tmp_path / "home", export, None, "default")
    engine = workspace.engine

    def cache_size() -> int:
        with engine.connect() as connection:
            return int(connection.exec_driver_sql("PRAGMA cache_size").scalar_one())

    assert cache_size() == -2000
    # A whole first batch (2,000 rows) is written before the bad row fails the import.
    good = [{"id": f"n{n}", "text": f"第 {n} 段。"} for n in range(2000)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in [*good, {"id": "x", "text": " "}]),
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="bad.jsonl:2001"):
        import_source(
            workspace.home,
            workspace.settings,
            workspace.engine,
            ImportSpec(path=bad, map={"chunk_id": "id", "content": "text"}),
            index=False,
        )
    assert cache_size() == -2000
