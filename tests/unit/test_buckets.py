"""Per-case buckets: tags, intent, difficulty, root cause, query length, alias and error-code presence."""

from __future__ import annotations

import pytest

from ragtriage.eval.buckets import case_buckets, has_error_code, is_short_query
from ragtriage.eval.cases import EvalCase
from ragtriage.pipeline.rewrite import AliasDictionary


def test_every_kind_of_bucket_in_order() -> None:
    case = EvalCase(
        case_id="c1",
        query="报账流程里E1001报错怎么处理",
        gold={"x": 1},
        tags=["finance", "finance", "errors"],
        intent_type="troubleshooting",
        difficulty="hard",
    )
    aliases = AliasDictionary.from_mapping({"报账": ["报销"]})
    buckets = case_buckets(case, root_cause="alias_missing", alias_terms=aliases.find_in)
    assert buckets == [
        "tag:finance",
        "tag:errors",
        "intent:troubleshooting",
        "difficulty:hard",
        "root_cause:alias_missing",
        "query:long",
        "alias:yes",
        "error_code:yes",
    ]


def test_minimal_case_has_length_and_error_code_buckets_only() -> None:
    case = EvalCase(case_id="c2", query="请假流程", gold={})
    assert case_buckets(case) == ["query:short", "error_code:no"]
    no_alias = AliasDictionary.from_mapping({"报账": ["报销"]})
    assert "alias:no" in case_buckets(case, alias_terms=no_alias.find_in)


@pytest.mark.parametrize(
    "query, short",
    [("请假流程", True), ("会议室 预订 规则", True), ("出差回来以后多少天内要提交发票", False)],
)
def test_short_query_counts_characters_without_spaces(query: str, short: bool) -> None:
    assert is_short_query(query) is short


@pytest.mark.parametrize(
    "query, expected",
    [
        ("报错E1001怎么办", True),
        ("ERR-404 页面", True),
        ("ORA-00942 表不存在", True),
        ("0x80070005 错误", True),
        ("接口返回 HTTP 502", True),
        ("错误码：4031", True),
        ("Ｅ１００１", True),
        ("v2023 版本说明", False),
        ("abc1234 测试", False),
        ("请假流程", False),
        ("2024年报销政策", False),
    ],
)
def test_error_code_detection(query: str, expected: bool) -> None:
    assert has_error_code(query) is expected
