"""Counts in user-facing text: singular for one, plural otherwise (no "(s)")."""

from __future__ import annotations

import pytest

from ragtriage.wording import plural, plural_noun


@pytest.mark.parametrize(
    "count, noun, expected",
    [
        (0, "chunk", "0 chunks"),
        (1, "chunk", "1 chunk"),
        (2, "query", "2 queries"),
        (1_200, "alias", "1,200 aliases"),
    ],
)
def test_plural_by_count(count: int, noun: str, expected: str) -> None:
    assert plural(count, noun) == expected


def test_plural_noun_alone() -> None:
    assert (plural_noun("column", 1), plural_noun("column", 3), plural_noun("id", 2)) == (
        "column",
        "columns",
        "ids",
    )


@pytest.mark.parametrize("count, words", [(1, "among 1 span "), (2, "among 2 spans ")])
def test_trace_without_a_root_counts_its_spans_by_number(count: int, words: str) -> None:
    from ragtriage.config.settings import OtelSettings
    from ragtriage.logs.formats.assemble import Rejected, assemble
    from ragtriage.logs.formats.spans import Span

    # Spans whose parents are each other (or itself): no root to take the request from.
    ids = ["a1", "b2"][:count]
    spans = [
        Span("t" * 32, span_id, ids[(i + 1) % count], "retrieve", "RETRIEVER", i, i + 1, {}, "x.jsonl", i + 1)
        for i, span_id in enumerate(ids)
    ]
    rejected = assemble("t" * 32, spans, [], OtelSettings())
    assert isinstance(rejected, Rejected) and words in rejected.message and "(s)" not in rejected.message
