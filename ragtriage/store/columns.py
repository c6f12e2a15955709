"""Column helpers shared by the table modules."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, Column
from sqlalchemy.ext.mutable import MutableDict, MutableList


def json_dict_column(**kwargs: Any) -> Column[Any]:
    """A JSON object column whose in-place edits (`row.gold["c2"] = 1`) are saved.

    Nested edits still need `sqlalchemy.orm.attributes.flag_modified(row, "field")`.
    """
    return Column(MutableDict.as_mutable(JSON()), **kwargs)


def json_list_column(**kwargs: Any) -> Column[Any]:
    """A JSON array column whose in-place edits (`row.labels.append(…)`) are saved."""
    return Column(MutableList.as_mutable(JSON()), **kwargs)


def utcnow() -> datetime:
    """Timezone-aware now in UTC (stored naive-UTC by SQLite)."""
    return datetime.now(timezone.utc)
