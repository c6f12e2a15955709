"""`import_compare.canonical`: the same value written by JSONL, CSV or Parquet compares equal; a
different value does not (hand-written pairs)."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import numpy as np
import pytest

from ragtriage.kb.import_compare import canonical, compared_meta

UTC = dt.timezone.utc


@pytest.mark.parametrize(
    "typed, text",
    [
        (7, "7"),
        (7.0, "7.0"),
        (7.0, "7"),
        (0.5, "0.5"),
        (-12, "-12"),
        (1e20, "1e+20"),
        (np.int64(3), "3"),
        (np.float32(0.1), "0.1"),
        (float(np.float32(0.1)), "0.1"),  # a float32 column read by pyarrow's to_pylist
        (decimal.Decimal("2.5"), "2.5"),
        (True, "True"),
        (False, "false"),
        (None, ""),
        ([1, "a"], '[1, "a"]'),
        ({"b": 1, "a": [True]}, '{"a":[true],"b":1}'),
        ({"a": None, "b": 2}, '{"b": 2}'),
        (dt.datetime(2024, 5, 1, 8, tzinfo=UTC), "2024-05-01 08:00:00+00:00"),
        (dt.datetime(2024, 5, 1, 8, tzinfo=UTC), "2024-05-01T16:00:00+08:00"),
        (dt.datetime(2024, 5, 1, 8), "2024-05-01T08:00:00Z"),
        (dt.date(2024, 5, 1), "2024-05-01"),
    ],
)
def test_a_typed_value_and_its_text_compare_equal(typed: Any, text: str) -> None:
    assert canonical(typed) == canonical(text)


@pytest.mark.parametrize(
    "before, after",
    [
        ("1.10", 1.1),  # a version string is not the number 1.1
        ("007", 7),
        (" 7", 7),
        ("1e5", 100000.0),
        (0.1, 0.10000000000000002),
        (1, 2),
        ("ready", "READY"),
        ("t", True),  # only status columns read t/f as flags (compared_meta)
        ([1, 2], [2, 1]),
        ([None], []),
        ({"a": 1}, {"a": "x"}),
        (dt.datetime(2024, 5, 1, 8, tzinfo=UTC), "2024-05-01T08:00:01Z"),
        ("", "0"),
        ("nan", None),
    ],
)
def test_different_values_stay_different(before: Any, after: Any) -> None:
    assert canonical(before) != canonical(after)


def test_compared_meta_leaves_out_nulls_and_mapped_columns_and_reads_status_flags() -> None:
    jsonl = {"id": 1, "tags": [], "published": True, "deleted": 0, "owner": "ops"}
    csv = {"id": "1", "tags": "[]", "published": "t", "deleted": "false", "owner": "ops", "note": ""}
    flags = {"published": "published", "deleted": "deleted"}
    assert compared_meta(jsonl, {"id"}, flags) == compared_meta(csv, {"id"}, flags)
    assert compared_meta(jsonl, {"id"}, flags) == {
        "tags": [],
        "published": "true",
        "deleted": "false",
        "owner": "ops",
    }
    assert compared_meta({"published": "maybe"}, (), flags) == {"published": "maybe"}
