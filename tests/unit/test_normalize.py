"""Query normalization: NFKC, whitespace, strip, empty queries."""

from __future__ import annotations

import pytest

from ragtriage.errors import InputError
from ragtriage.pipeline.normalize import normalize_query, normalize_text


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Ｅ１００１", "E1001"),
        ("Ｑｄｒａｎｔ本地模式报错", "Qdrant本地模式报错"),
        ("  nginx \t 502\n错误 ", "nginx 502 错误"),
        ("全角\u3000空格", "全角 空格"),
        ("ｖ２．３ 版本？", "v2.3 版本?"),
    ],
)
def test_normalize_folds_width_and_whitespace(raw: str, expected: str) -> None:
    assert normalize_query(raw) == expected


@pytest.mark.parametrize("raw", ["", "   ", "\u3000\n\t"])
def test_empty_query_is_an_input_error(raw: str) -> None:
    with pytest.raises(InputError, match="empty query; pass --query with text"):
        normalize_query(raw)
    assert normalize_text(raw) == ""


def test_punctuation_only_query_is_kept() -> None:
    assert normalize_query("？！。") == "?!。"
