from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from ragtriage.errors import StoreError
from ragtriage.store.db import make_engine, read_session, sqlite_url, write_session
from ragtriage.store.kb_tables import ChunkRow


def test_sqlite_engine_uses_wal_and_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(sqlite_url(tmp_path / "s.db"), busy_timeout_ms=1234)
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() == 1234


def test_json_columns_store_chinese_unescaped_and_track_in_place_edits(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    engine = make_engine(sqlite_url(db))
    with write_session(engine) as session:
        session.add(ChunkRow(chunk_id="c1", doc_id="d1", heading_path=["发票"]))
    with write_session(engine) as session:
        row = session.get(ChunkRow, "c1")
        assert row is not None
        row.heading_path.append("红字发票")  # in-place edit must persist
    with read_session(engine) as session:
        assert session.get(ChunkRow, "c1").heading_path == ["发票", "红字发票"]  # type: ignore[union-attr]
    raw = sqlite3.connect(db).execute("select heading_path from kb_chunk").fetchone()[0]
    assert "红字发票" in raw and "\\u" not in raw


def test_write_session_rolls_back_on_error(tmp_path: Path) -> None:
    engine = make_engine(sqlite_url(tmp_path / "s.db"))
    with pytest.raises(RuntimeError):
        with write_session(engine) as session:
            session.add(ChunkRow(chunk_id="c1", doc_id="d1"))
            session.flush()
            raise RuntimeError("boom")
    with read_session(engine) as session:
        assert session.get(ChunkRow, "c1") is None


def test_write_session_takes_the_write_lock_up_front(tmp_path: Path) -> None:
    """BEGIN IMMEDIATE: a second writer waits (busy timeout) instead of failing on upgrade."""
    db = tmp_path / "s.db"
    engine = make_engine(sqlite_url(db), busy_timeout_ms=50)
    with write_session(engine) as session:
        session.add(ChunkRow(chunk_id="c1", doc_id="d1"))
        session.flush()
        other = sqlite3.connect(db, timeout=0.05, isolation_level=None)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        other.close()


def test_bad_url_and_missing_driver_are_store_errors() -> None:
    with pytest.raises(StoreError, match="bad store URL"):
        make_engine("not a url")
    with pytest.raises(StoreError, match="ragtriage\\[postgres\\]|cannot open"):
        make_engine("postgresql+nosuchdriver://u@localhost/db")
