"""The shared analyzer: NFKC, whole error codes, jieba segmentation, no junk tokens (known faults 9–12)."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtriage.index.analyzer import ChineseAnalyzer, JiebaTokenizer, tokenize


@pytest.mark.parametrize(
    "text, expected",
    [
        ("E1001", ["e1001"]),
        ("e-1001", ["e-1001"]),
        ("v2.3.1", ["v2.3.1"]),
        ("ERR_42", ["err_42"]),
        ("2.3.1", ["2.3.1"]),
        ("升级到v2.3.1后报错E1001。", ["升级", "到", "v2.3.1", "后", "报错", "e1001"]),
        ("see E1001.", ["see", "e1001"]),
    ],
)
def test_error_codes_and_versions_stay_whole(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_full_width_input_is_nfkc_normalized() -> None:
    assert "qdrant" in tokenize("Ｑｄｒａｎｔ本地模式报错")
    assert tokenize("Ｅ１００１") == ["e1001"]


def test_chinese_is_segmented() -> None:
    assert tokenize("低头思故乡") == ["低头", "思", "故乡"]


def test_search_mode_emits_sub_words() -> None:
    tokens = tokenize("中华人民共和国")
    assert {"中华人民共和国", "共和国", "人民"} <= set(tokens)


@pytest.mark.parametrize("text", ["的了和", "？！。", "", "   \t\n", "、，；：“”"])
def test_function_words_and_punctuation_tokenize_to_nothing(text: str) -> None:
    assert tokenize(text) == []


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("床前明月光 \t\u3000，。！？ab-_.12Ｅ１的了")), max_size=40))
def test_no_empty_whitespace_or_punctuation_tokens(text: str) -> None:
    for token in tokenize(text):
        assert token.strip() == token and token
        assert any(ch.isalnum() for ch in token)


def test_whoosh_tokens_carry_positions_and_offsets() -> None:
    tokens = [
        (t.text, t.pos, t.startchar, t.endchar)
        for t in JiebaTokenizer()("低头 E1001", positions=True, chars=True)
    ]
    assert tokens == [("低头", 0, 0, 2), ("e1001", 1, 3, 8)]


def test_analyzer_pickles_and_compares_equal() -> None:
    restored = pickle.loads(pickle.dumps(ChineseAnalyzer()))
    assert restored == ChineseAnalyzer()
    assert [t.text for t in restored("故乡")] == ["故乡"]


def test_import_and_first_use_are_quiet_with_warnings_as_errors() -> None:
    code = "from ragtriage.index.analyzer import tokenize; print(tokenize('低头思故乡'))"
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "故乡" in result.stdout


def test_precise_query_terms_are_one_token_per_word() -> None:
    from ragtriage.index.analyzer import query_terms

    text = "普通用户敲ifconfig提示E1001"
    search = query_terms(text)
    precise = query_terms(text, segmentation="precise")
    assert search == list(dict.fromkeys(tokenize(text)))
    assert {"普通", "通用", "普通用户"} <= set(search)
    assert precise == ["普通用户", "敲", "ifconfig", "提示", "e1001"]
    # Every precise word is one search mode emits too, so documents indexed in search mode match it.
    assert set(precise) <= set(search)


def test_query_stop_words_and_unknown_segmentation() -> None:
    from ragtriage.index.analyzer import query_terms

    assert query_terms("到底怎么装 到底", stop_words=frozenset({"到底"})) == ["怎么", "装"]
    assert query_terms("的了和", segmentation="precise") == []
    with pytest.raises(ValueError, match="search or precise"):
        query_terms("故乡", segmentation="full")
