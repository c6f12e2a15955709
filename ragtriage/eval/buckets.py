"""Per-case buckets: the slices a run is aggregated over besides "all cases".

Bucket names are `kind:value`: `tag:billing`, `intent:howto`, `difficulty:hard`,
`root_cause:alias_missing`, `query:short` / `query:long`, `alias:yes` / `alias:no`,
`error_code:yes` / `error_code:no`, and `origin:sampled` / `origin:complaint` for promoted cases
(drawn by `queue sample`, or flagged by a complaint rule). They depend only on the case (and the
alias dictionary), never on a run's output, so two runs of the same dataset version have the same
buckets and compare cleanly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from ragtriage.eval.cases import EvalCase
from ragtriage.pipeline.normalize import normalize_text

__all__ = ["SHORT_QUERY_MAX_CHARS", "case_buckets", "has_error_code", "is_short_query"]

#: A query of at most this many characters (whitespace excluded) is `query:short`. Chinese queries
#: carry about one word per 1.5–2 characters, so 8 characters is a keyword-style query of 4–5 words.
SHORT_QUERY_MAX_CHARS = 8

# Error codes as support queries carry them: E1001, ERR-404, ORA-00942, 0x80070005, HTTP 502, 错误码 4031.
# Letter codes must be upper case, so "v2023" or "abc1234" in running text do not count.
_ERROR_CODE_PATTERNS = (
    re.compile(r"(?<![A-Za-z0-9])[A-Z]{1,5}-?\d{3,6}(?![A-Za-z0-9])"),
    re.compile(r"(?<![A-Za-z0-9])0x[0-9a-f]{4,8}(?![A-Za-z0-9])", re.IGNORECASE),
    re.compile(r"(?<![A-Za-z])HTTP ?[45]\d\d(?!\d)", re.IGNORECASE),
    re.compile(r"(?:错误码|错误代码|报错码|error code) ?:? ?[A-Za-z-]*\d{2,}", re.IGNORECASE),
)


def is_short_query(query: str, max_chars: int = SHORT_QUERY_MAX_CHARS) -> bool:
    """True when the normalized query has at most `max_chars` non-space characters."""
    return len(normalize_text(query).replace(" ", "")) <= max_chars


def has_error_code(query: str) -> bool:
    """True when the query holds an error code (`E1001`, `ERR-404`, `0x80070005`, `HTTP 502`, `错误码 42`)."""
    text = normalize_text(query)
    return any(pattern.search(text) for pattern in _ERROR_CODE_PATTERNS)


def case_buckets(
    case: EvalCase,
    *,
    root_cause: str | None = None,
    alias_terms: Callable[[str], Mapping[str, object]] | None = None,
    short_max_chars: int = SHORT_QUERY_MAX_CHARS,
    origin: str | None = None,
) -> list[str]:
    """The buckets of one case, in a fixed order (tags, intent, difficulty, root cause, origin, length,
    alias, code).

    `origin` is the case's `provenance["origin"]` (`sampled` or `complaint`; None for imported cases).

    `alias_terms(query)` returns the alias-dictionary terms found in the query (e.g.
    `AliasDictionary.find_in`); without it the alias bucket is left out.
    """
    buckets = [f"tag:{tag}" for tag in dict.fromkeys(case.tags) if tag]
    if case.intent_type:
        buckets.append(f"intent:{case.intent_type}")
    if case.difficulty:
        buckets.append(f"difficulty:{case.difficulty}")
    if root_cause:
        buckets.append(f"root_cause:{root_cause}")
    if origin:
        buckets.append(f"origin:{origin}")
    buckets.append("query:short" if is_short_query(case.query, short_max_chars) else "query:long")
    if alias_terms is not None:
        buckets.append("alias:yes" if alias_terms(case.query) else "alias:no")
    buckets.append("error_code:yes" if has_error_code(case.query) else "error_code:no")
    return buckets
