"""Alias dictionary, rule rewrite, and the LLM rewrite's protocol and failure paths (httpx.MockTransport)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from ragtriage.config.settings import LLMRewriteSettings
from ragtriage.errors import InputError
from ragtriage.index.analyzer import tokenize
from ragtriage.pipeline.rewrite import (
    AliasDictionary,
    LLMRewriter,
    RuleRewriter,
    chat_completions_url,
    load_aliases,
    split_sub_queries,
)

SECRET = "sk-test-secret-123"


def _rules(entries: dict[str, list[str]] | None = None) -> RuleRewriter:
    return RuleRewriter(AliasDictionary.from_mapping(entries or {}), max_sub_queries=2)


def test_alias_file_is_usable_in_both_directions(tmp_path: Path) -> None:
    path = tmp_path / "aliases.toml"
    path.write_text('"虚拟机" = ["VM", "virtual machine"]\n"apt 源" = ["软件源"]\n', encoding="utf-8")
    aliases = load_aliases(path)
    assert len(aliases) == 2 and aliases.source == path
    assert aliases.synonyms("虚拟机") == ["VM", "virtual machine"]
    assert aliases.synonyms("vm") == ["虚拟机", "virtual machine"]
    assert aliases.find_in("VM 起不来") == {"VM": ["虚拟机", "virtual machine"]}
    assert aliases.find_in("软件源怎么换") == {"软件源": ["apt 源"]}
    # An ASCII term glued to other letters is not a hit.
    assert aliases.find_in("vmware 安装") == {}


def test_alias_file_syntax_error_names_file_line_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "aliases.toml"
    path.write_text('"虚拟机" = ["VM"]\n"网卡" = ["NIC",\n', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_aliases(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:2: not valid TOML (Invalid value)")
    assert 'term = ["synonym", "synonym"]' in message

    # TOML bare keys are ASCII only: an unquoted Chinese term gets a precise fix.
    path.write_text('vm = ["虚拟机"]\n网卡 = ["NIC"]\n', encoding="utf-8")
    with pytest.raises(InputError, match=r'aliases.toml:2: .*quote the term: "网卡" = \[\.\.\.\]'):
        load_aliases(path)

    path.write_text('"虚拟机" = ["VM"]\n"网卡" = "NIC"\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"aliases.toml:2: entry '网卡' is not a list of strings"):
        load_aliases(path)
    with pytest.raises(InputError, match="alias file not found"):
        load_aliases(tmp_path / "missing.toml")


def test_rule_rewrite_expands_aliases_keywords_and_sub_queries() -> None:
    result = _rules({"虚拟机": ["VM"]}).rewrite(
        "虚拟机启动失败和网络不通怎么办？", "虚拟机启动失败和网络不通怎么办?"
    )
    assert result.raw_query == "虚拟机启动失败和网络不通怎么办？"
    assert result.rewritten_query == "虚拟机启动失败和网络不通怎么办? VM"
    assert result.aliases == {"虚拟机": ["VM"]}
    assert "虚拟机" in result.keywords and "的" not in result.keywords
    assert result.sub_queries == ["虚拟机启动失败", "网络不通怎么办"]
    assert result.mode == "rules" and result.fallback_reason is None


def test_alias_already_present_is_not_added_again_and_extra_aliases_apply_once() -> None:
    rules = _rules({"虚拟机": ["VM"]})
    assert rules.rewrite("虚拟机 VM", "虚拟机 VM").rewritten_query == "虚拟机 VM"
    once = rules.rewrite("网卡驱动", "网卡驱动", extra_aliases={"网卡": ["NIC"]})
    assert once.rewritten_query == "网卡驱动 NIC"
    assert rules.rewrite("网卡驱动", "网卡驱动").rewritten_query == "网卡驱动"


@pytest.mark.parametrize(
    "query, expected",
    [
        ("配置 apt 源以及更新系统并且清理缓存", ["配置 apt 源", "更新系统"]),
        ("nginx 502", []),
        ("的了和？", []),
    ],
)
def test_sub_queries_need_several_constraints(query: str, expected: list[str]) -> None:
    assert split_sub_queries(query, tokenize, 2) == expected


def _reply(content: str, status: int = 200) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        body = {"choices": [{"message": {"role": "assistant", "content": content}}]}
        return httpx.Response(status, json=body)

    return httpx.MockTransport(handler)


def _llm(transport: httpx.BaseTransport, url: str | None = "http://llm.local/v1") -> LLMRewriter:
    settings = LLMRewriteSettings(enabled=True, url=url, model="m1", api_key_env="TEST_LLM_KEY", timeout_s=2)
    return LLMRewriter(
        settings, _rules({"虚拟机": ["VM"]}), transport=transport, environ={"TEST_LLM_KEY": SECRET}
    )


def test_llm_rewrite_protocol() -> None:
    seen: list[httpx.Request] = []
    content = json.dumps(
        {
            "normalized_query": "虚拟机 无法 启动",
            "keywords": ["虚拟机", "启动"],
            "aliases": {"启动": ["开机"]},
            "sub_queries": ["a", "b", "c"],
        },
        ensure_ascii=False,
    )

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"choices": [{"message": {"content": f"```json\n{content}\n```"}}]})

    result = _llm(httpx.MockTransport(handler)).rewrite("虚拟机起不来", "虚拟机起不来")
    request = seen[0]
    assert str(request.url) == "http://llm.local/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {SECRET}"
    payload = json.loads(request.content)
    assert payload["model"] == "m1" and payload["messages"][-1]["content"] == "虚拟机起不来"
    assert result.mode == "llm" and result.fallback_reason is None
    assert result.aliases == {"虚拟机": ["VM"], "启动": ["开机"]}
    assert result.rewritten_query == "虚拟机 无法 启动 VM 开机"
    assert result.sub_queries == ["a", "b"]
    assert result.raw_query == "虚拟机起不来"


def _timeout(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=request)


def _connect_error(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError(f"refused while sending Bearer {SECRET}", request=request)


@pytest.mark.parametrize(
    "transport, reason",
    [
        (httpx.MockTransport(_timeout), "timeout after 2s"),
        (_reply("{}", status=500), "HTTP 500"),
        (_reply("not json at all"), "bad reply: message content is not JSON"),
        (_reply('{"keywords": []}'), "normalized_query is missing"),
        (_reply('{"normalized_query": "q", "aliases": {"a": "b"}}'), "aliases must map"),
        (httpx.MockTransport(_connect_error), "ConnectError"),
    ],
)
def test_llm_failure_falls_back_to_rules_without_leaking_the_key(
    transport: httpx.MockTransport, reason: str
) -> None:
    result = _llm(transport).rewrite("虚拟机起不来", "虚拟机起不来")
    assert result.mode == "rules"
    assert result.rewritten_query == "虚拟机起不来 VM"
    assert result.fallback_reason is not None and reason in result.fallback_reason
    assert SECRET not in result.model_dump_json()


def test_llm_without_url_falls_back() -> None:
    result = _llm(_reply("{}"), url=None).rewrite("q", "q")
    assert result.mode == "rules" and "no [rewrite.llm] url" in (result.fallback_reason or "")


@pytest.mark.parametrize(
    "base, expected",
    [
        ("http://h", "http://h/v1/chat/completions"),
        ("http://h/v1/", "http://h/v1/chat/completions"),
        ("http://h/api/chat/completions", "http://h/api/chat/completions"),
    ],
)
def test_chat_completions_url(base: str, expected: str) -> None:
    assert chat_completions_url(base) == expected
