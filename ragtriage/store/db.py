"""Engine and sessions. SQLite gets WAL, a busy timeout and `BEGIN IMMEDIATE` writers.

WAL plus a busy timeout is not enough for two writers: a deferred transaction that reads and then
writes fails with "database is locked" at once. Write units therefore start with
`BEGIN IMMEDIATE` (see `write_session`) and stay short. PostgreSQL URLs work unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlmodel import Session, SQLModel, create_engine

from ragtriage.errors import StoreError
from ragtriage.wording import quoted

# ensure_ascii=False keeps Chinese readable in the database instead of \uXXXX escapes. One
# encoder for every value: `json.dumps` with options builds a new one per call (bulk imports).
_json_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


#: Page size of new SQLite stores (bytes); an existing file keeps the one it was created with.
SQLITE_PAGE_SIZE = 32768


def sqlite_url(path: Path) -> str:
    """`sqlite:///` URL of a database file."""
    return f"sqlite:///{path}"


def make_engine(url: str, *, busy_timeout_ms: int = 30_000) -> Engine:
    """Create an engine for `url` (SQLite file or PostgreSQL) and create missing tables.

    Raises:
        StoreError: the URL is malformed, its driver is missing, or the database cannot be opened.
    """
    try:
        parsed = make_url(url)
    except ArgumentError as error:
        raise StoreError(f"bad store URL {quoted(url)}: {error}") from None
    is_sqlite = parsed.get_backend_name() == "sqlite"
    kwargs: dict[str, Any] = {"json_serializer": _json_dumps}
    if is_sqlite:
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": busy_timeout_ms / 1000}
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(url, **kwargs)
    except (ModuleNotFoundError, NoSuchModuleError) as error:
        raise StoreError(
            f"the database driver for {quoted(parsed.drivername)} is not available ({error}); "
            "for PostgreSQL install ragtriage[postgres] and use postgresql+psycopg://…"
        ) from None
    if is_sqlite:
        _configure_sqlite(engine, busy_timeout_ms)
    create_all(engine)
    return engine


def _configure_sqlite(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite so that we can emit BEGIN IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # Takes effect only while the file is new. Request-log rows are 1–2 KB: on 32 KiB pages
        # ingest writes far fewer pages and runs about twice as fast as on the default 4 KiB
        # (docs/benchmarks.md).
        cursor.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")


#: Bumped whenever a release adds a column to an existing table: a SQLite store stamped with an
#: older number (`PRAGMA user_version`) gets the missing columns on open.
STORE_SCHEMA_VERSION = 7


def create_all(engine: Engine) -> None:
    """Create every table the package defines, and add the columns and indexes a store made by an
    earlier version lacks (idempotent).

    Raises:
        StoreError: the store cannot be opened or a missing column cannot be added.
    """
    from ragtriage.store import models  # noqa: F401  (registers every table on SQLModel.metadata)

    try:
        SQLModel.metadata.create_all(engine)
        _add_missing_columns(engine)
    except OperationalError as error:
        raise StoreError(
            f"cannot open the store at {quoted(engine.url.render_as_string(hide_password=True))}: {error.orig}"
        ) from None


def _add_missing_columns(engine: Engine) -> None:
    """`ALTER TABLE … ADD COLUMN` for nullable model columns a table lacks, with their indexes.

    On SQLite this runs once per schema version (the stamp is `PRAGMA user_version`, one cheap
    read per open); other databases are inspected on every open.
    """
    sqlite = engine.dialect.name == "sqlite"
    if sqlite:
        with engine.connect() as connection:  # a read: no write lock while another process ingests
            if connection.exec_driver_sql("PRAGMA user_version").scalar() == STORE_SCHEMA_VERSION:
                return
        # Serialized with other writers, so two processes opening an old store do not both alter it.
        engine = engine.execution_options(sqlite_begin="IMMEDIATE")
    with engine.begin() as connection:
        inspector = inspect(connection)
        for table in SQLModel.metadata.sorted_tables:
            present = {column["name"] for column in inspector.get_columns(table.name)}
            added = [column for column in table.columns if column.name not in present]
            for column in added:
                if not column.nullable:
                    raise StoreError(
                        f"the store's table {table.name} lacks the required column {column.name}; "
                        "create a new home (or export the eval set and import it into one)"
                    )
                column_type = column.type.compile(dialect=connection.dialect)
                connection.exec_driver_sql(
                    f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {column_type}'
                )
            names = {column.name for column in added}
            for index in table.indexes:
                if names.intersection(column.name for column in index.columns):
                    index.create(connection, checkfirst=True)
        if sqlite:
            connection.exec_driver_sql(f"PRAGMA user_version={STORE_SCHEMA_VERSION}")


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A short read-only unit of work; objects stay usable after it closes."""
    with Session(engine, expire_on_commit=False) as session:
        yield session


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """A short write unit of work: `BEGIN IMMEDIATE` on SQLite, committed on success, rolled back on error."""
    bound = engine.execution_options(sqlite_begin="IMMEDIATE") if engine.dialect.name == "sqlite" else engine
    with Session(bound, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
