"""Query rewrite by an LLM behind an OpenAI-compatible `/v1/chat/completions` endpoint.

The API key is read from the environment variable the settings name, only when a request is
made, and never appears in errors or in the trace. Any failure (no URL, timeout, HTTP error, a
reply that is not the expected JSON) falls back to the rule rewrite and says why in
`RewriteResult.fallback_reason`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from ragtriage.config.settings import LLMRewriteSettings
from ragtriage.pipeline.normalize import normalize_text
from ragtriage.pipeline.rewrite import RuleRewriter, expand_with_aliases
from ragtriage.pipeline.types import RewriteResult

SYSTEM_PROMPT = (
    "You rewrite search queries for a retrieval system over technical documentation. "
    "Reply with one JSON object and nothing else, with the keys: "
    '"normalized_query" (string: the query, cleaned, same language, every constraint kept), '
    '"keywords" (list of strings), '
    '"aliases" (object: query term -> list of synonyms or alternative spellings), '
    '"sub_queries" (list of strings: one per independent constraint, empty if there is one).'
)

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


class LLMReplyError(ValueError):
    """The endpoint answered, but not with the JSON the rewrite needs."""


def chat_completions_url(base_url: str) -> str:
    """`http://host` / `http://host/v1` / a full `…/chat/completions` URL → the completions URL."""
    url = base_url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return f"{url}/chat/completions"
    return f"{url}/v1/chat/completions"


def parse_rewrite_reply(body: Any) -> dict[str, Any]:
    """Pull the rewrite JSON out of a chat-completions response body.

    Raises:
        LLMReplyError: no message content, content not a JSON object, or a field of the wrong type.
    """
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LLMReplyError("the response has no choices[0].message.content") from None
    if not isinstance(content, str):
        raise LLMReplyError("message content is not text")
    try:
        data = json.loads(_FENCE.sub("", content.strip()))
    except ValueError:
        raise LLMReplyError("message content is not JSON") from None
    if not isinstance(data, dict):
        raise LLMReplyError("message content is not a JSON object")
    normalized = data.get("normalized_query")
    if not isinstance(normalized, str) or not normalize_text(normalized):
        raise LLMReplyError("normalized_query is missing or empty")
    keywords = data.get("keywords", [])
    sub_queries = data.get("sub_queries", [])
    aliases = data.get("aliases", {})
    if not _is_str_list(keywords) or not _is_str_list(sub_queries):
        raise LLMReplyError("keywords and sub_queries must be lists of strings")
    if not isinstance(aliases, dict) or not all(
        isinstance(k, str) and _is_str_list(v) for k, v in aliases.items()
    ):
        raise LLMReplyError("aliases must map strings to lists of strings")
    return {
        "normalized_query": normalized,
        "keywords": keywords,
        "aliases": aliases,
        "sub_queries": sub_queries,
    }


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


class LLMRewriter:
    """Rewrite with an LLM; fall back to `rules` on any failure (the trace says why)."""

    def __init__(
        self,
        settings: LLMRewriteSettings,
        rules: RuleRewriter,
        *,
        transport: httpx.BaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.rules = rules
        self._transport = transport
        self._environ = environ

    def rewrite(
        self,
        raw_query: str,
        normalized_query: str,
        *,
        extra_aliases: Mapping[str, Sequence[str]] | None = None,
    ) -> RewriteResult:
        """Ask the LLM; on failure return the rule rewrite with `fallback_reason` set."""
        rules_result = self.rules.rewrite(raw_query, normalized_query, extra_aliases=extra_aliases)
        if not self.settings.url:
            return self._fallback(rules_result, "no [rewrite.llm] url configured")
        environ = os.environ if self._environ is None else self._environ
        api_key = environ.get(self.settings.api_key_env) or None
        try:
            reply = self._ask(normalized_query, api_key)
        except httpx.TimeoutException:
            return self._fallback(rules_result, f"timeout after {self.settings.timeout_s:g}s")
        except httpx.HTTPStatusError as error:
            return self._fallback(rules_result, f"HTTP {error.response.status_code} from the endpoint")
        except httpx.HTTPError as error:
            # The exception text may quote the request; scrub the key in case it was echoed.
            return self._fallback(rules_result, _scrub(f"{type(error).__name__}: {error}", api_key))
        except LLMReplyError as error:
            return self._fallback(rules_result, f"bad reply: {error}")
        llm_normalized = normalize_text(reply["normalized_query"])
        # Dictionary aliases still apply, so the alias counterfactual works in LLM mode too.
        aliases: dict[str, list[str]] = {k: list(v) for k, v in rules_result.aliases.items()}
        for term, synonyms in reply["aliases"].items():
            extra = [normalize_text(s) for s in synonyms if normalize_text(s)]
            merged = list(dict.fromkeys([*aliases.get(term, []), *extra]))
            if merged:
                aliases[term] = merged
        sub_queries = [normalize_text(q) for q in reply["sub_queries"] if normalize_text(q)]
        return RewriteResult(
            raw_query=raw_query,
            normalized_query=normalized_query,
            rewritten_query=expand_with_aliases(llm_normalized, aliases),
            keywords=list(dict.fromkeys(k.strip() for k in reply["keywords"] if k.strip())),
            aliases=aliases,
            sub_queries=sub_queries[: self.rules.max_sub_queries],
            mode="llm",
        )

    def _ask(self, query: str, api_key: str | None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        payload = {
            "model": self.settings.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": query}],
        }
        with httpx.Client(transport=self._transport, timeout=self.settings.timeout_s) as client:
            response = client.post(
                chat_completions_url(self.settings.url or ""), json=payload, headers=headers
            )
            response.raise_for_status()
            try:
                body = response.json()
            except ValueError:
                raise LLMReplyError("the response body is not JSON") from None
        return parse_rewrite_reply(body)

    @staticmethod
    def _fallback(rules_result: RewriteResult, reason: str) -> RewriteResult:
        return rules_result.model_copy(
            update={"fallback_reason": f"LLM rewrite failed ({reason}); used the rules"}
        )


def _scrub(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text
