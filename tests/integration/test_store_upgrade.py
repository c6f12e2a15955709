"""A store made by an earlier version opens: missing nullable columns and their indexes are added."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import inspect

from ragtriage.logs.ingest import ingest_lines
from ragtriage.logs.queue import list_queue
from ragtriage.store.db import STORE_SCHEMA_VERSION, make_engine, sqlite_url


def test_a_triage_table_without_suggested_label_gets_it_and_the_queue_works(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    engine = make_engine(sqlite_url(path))
    ingest_lines(engine, ['{"request_id":"u1","raw_query":"q","feedback":{"rating":"down"}}'])
    engine.dispose()
    # What session 1's stores look like: no suggested_label column, no stamp.
    with sqlite3.connect(path) as raw:
        raw.execute("DROP INDEX ix_triage_record_suggested_label")
        raw.execute("ALTER TABLE triage_record DROP COLUMN suggested_label")
        raw.execute("PRAGMA user_version=0")

    engine = make_engine(sqlite_url(path))
    columns = {column["name"] for column in inspect(engine).get_columns("triage_record")}
    indexes = {index["name"] for index in inspect(engine).get_indexes("triage_record")}
    assert "suggested_label" in columns and "ix_triage_record_suggested_label" in indexes
    page = list_queue(engine)
    assert [item.request_id for item in page.items] == ["u1"] and page.total == 1
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == STORE_SCHEMA_VERSION
