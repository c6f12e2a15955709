"""`kb import --sql URL --query SQL`: chunk rows from any database SQLAlchemy reaches, streamed.

The query runs on a read-only connection (`stream_results` + `yield_per`: a server-side cursor on
PostgreSQL, so memory stays constant) and each batch of rows becomes `SourceRow`s named
`row N`. The URL's password never appears in a message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from ragtriage.errors import InputError
from ragtriage.kb.import_rows import SourceRow
from ragtriage.wording import plural

__all__ = ["SQLSource"]

ProgressCallback = Callable[[int, int], None]


class SQLSource:
    """The rows of one SELECT; columns are the query's result columns."""

    schemaless = False

    def __init__(self, url: str, query: str, *, batch_size: int = 2000) -> None:
        try:
            parsed = make_url(url)
        except ArgumentError as error:
            raise InputError(
                f"--sql: bad database URL ({error}); e.g. postgresql+psycopg://user@host/db"
            ) from None
        self.url = parsed
        self.query = query
        self.batch_size = batch_size
        self.name = parsed.render_as_string(hide_password=True)
        self.columns: list[str] | None = None
        if parsed.get_backend_name() == "sqlite":
            database = parsed.database or ""
            # SQLite would silently create an empty file for a mistyped path.
            if (
                database
                and database != ":memory:"
                and not database.startswith("file:")
                and not Path(database).is_file()
            ):
                raise InputError(f"--sql: no SQLite database at {database}; fix: check the path in the URL")

    def batches(self, on_progress: ProgressCallback | None = None) -> Iterator[list[SourceRow]]:
        """The query's rows in batches of `batch_size`.

        Raises:
            InputError: the driver is missing, the database is unreachable, or the query fails
                (the database's own message is quoted).
        """
        try:
            engine = create_engine(self.url)
        except (NoSuchModuleError, ModuleNotFoundError) as error:
            raise InputError(
                f"--sql: no driver for {self.url.drivername} ({error}); "
                "fix: install it (PostgreSQL: pip install 'ragtriage[postgres]', URL postgresql+psycopg://…)"
            ) from None
        done = 0
        try:
            try:
                connection = engine.connect()
            except DBAPIError as error:
                raise InputError(
                    f"--sql: cannot reach the database {self.name} ({_first_line(error.orig)}); "
                    "fix: check the host, port, credentials and network"
                ) from None
            with connection:
                result = connection.execution_options(stream_results=True, yield_per=self.batch_size).execute(
                    text(self.query)
                )
                self.columns = list(result.keys())
                for partition in result.partitions():
                    rows = [
                        SourceRow(f"{self.name}: row {done + n + 1}", _row_dict(self.columns, row))
                        for n, row in enumerate(partition)
                    ]
                    done += len(rows)
                    yield rows
                    if on_progress is not None:
                        on_progress(done, 0)  # a cursor does not know its row count
        except DBAPIError as error:
            # Connected: a failure now is the query's (a value one row computes, a missing table),
            # unless the driver says the connection itself went away.
            if error.connection_invalidated:
                raise InputError(
                    f"--sql: lost the connection to {self.name} after {plural(done, 'row')} "
                    f"({_first_line(error.orig)}); fix: check the server and network, then import again"
                ) from None
            where = f"after {plural(done, 'row')}" if done else "before returning a row"
            raise InputError(
                f"--sql: the query failed {where} on {self.name}: {_first_line(error.orig)}; "
                "fix: correct the query (try it in the database's own client)"
            ) from None
        except SQLAlchemyError as error:
            raise InputError(
                f"--sql: {self.name}: {_first_line(error)}; fix: correct the URL or the query"
            ) from None
        finally:
            engine.dispose()


def _row_dict(columns: list[str], row: Any) -> dict[str, Any]:
    return dict(zip(columns, tuple(row), strict=True))


def _first_line(error: object) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
