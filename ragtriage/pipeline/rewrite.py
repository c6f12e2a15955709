"""The rewrite stage: by rules (alias expansion from a dictionary, keywords, sub-queries) or by an LLM.

The raw query always keeps its own routes; the rewrite only adds routes. `LLMRewriter` asks an
OpenAI-compatible `/v1/chat/completions` endpoint; its API key is read from the environment variable
the settings name, only when a request is made, and never appears in errors or in the trace. Any
failure (no URL, timeout, HTTP error, a reply that is not the expected JSON) falls back to the rules
and says why in `RewriteResult.fallback_reason`.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ragtriage.config.settings import LLMRewriteSettings
from ragtriage.errors import InputError
from ragtriage.index.analyzer import tokenize as analyzer_tokenize
from ragtriage.pipeline.normalize import normalize_text
from ragtriage.pipeline.types import RewriteResult
from ragtriage.wording import quoted

Tokenizer = Callable[[str], list[str]]

#: Function words dropped from keywords (Chinese particles, question words, English stop words).
STOP_WORDS = frozenset(
    """的 了 和 与 及 或 是 在 吗 呢 吧 啊 呀 么 嘛 也 都 就 还 又 把 被 给 对 从 向 到 以 为 之 其 这 那
    这个 那个 这些 那些 怎么 怎样 怎么样 如何 什么 为什么 为何 哪 哪些 哪里 哪个 多少 几 请问 请 一下 能 能否
    可以 是否 有没有 会 要 需要 应该 我 你 他 她 它 我们 你们 他们 自己 一个 有 没有 以及 并且 而且 还有
    a an the of to in on for and or is are was were be do does did how what why which who when where
    can could should would i you we it this that with by from as at my your""".split()
)

#: Conjunctions and punctuation that separate the constraints of one question.
_SUB_QUERY_SPLIT = re.compile(r"以及|并且|而且|还有|同时|另外|和|[?？,，;；。!！、]|\band\b", re.IGNORECASE)
_WORD_CHAR = re.compile(r"[0-9a-z]", re.IGNORECASE)
_TOML_POSITION = re.compile(r"\s*\((?:at line (\d+), column \d+|at end of document)\)")
_BARE_KEY = re.compile(r"^\s*([^\s\"'=#\[][^=]*?)\s*=")
_ALIAS_FIX = 'write each entry as term = ["synonym", "synonym"]'


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _occurs(term: str, lowered_text: str) -> bool:
    """`term` occurs in the text; ASCII terms must not be glued to other letters or digits (`ip` ≠ `zip`)."""
    start = lowered_text.find(term)
    while start >= 0:
        before = lowered_text[start - 1] if start > 0 else ""
        after = lowered_text[start + len(term)] if start + len(term) < len(lowered_text) else ""
        glued_before = bool(before) and bool(_WORD_CHAR.match(before)) and bool(_WORD_CHAR.match(term[0]))
        glued_after = bool(after) and bool(_WORD_CHAR.match(after)) and bool(_WORD_CHAR.match(term[-1]))
        if not glued_before and not glued_after:
            return True
        start = lowered_text.find(term, start + 1)
    return False


@dataclass(frozen=True)
class AliasDictionary:
    """Groups of synonyms. Each entry `term = ["syn", …]` makes its members synonyms of each other,
    so a query using any member is expanded with the others (both directions)."""

    groups: tuple[tuple[str, ...], ...] = ()
    source: Path | None = None
    _index: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)
    _spelling: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_groups(cls, groups: Iterable[Sequence[str]], source: Path | None = None) -> AliasDictionary:
        """Build from synonym groups (members are NFKC-normalized; groups of one are dropped)."""
        kept: list[tuple[str, ...]] = []
        for group in groups:
            members = tuple(_unique(m for m in (normalize_text(x) for x in group) if m))
            if len(members) > 1:
                kept.append(members)
        index: dict[str, tuple[str, ...]] = {}
        spelling: dict[str, str] = {}
        for members in kept:
            for member in members:
                key = member.lower()
                spelling.setdefault(key, member)
                others = [m for m in members if m.lower() != key]
                index[key] = tuple(_unique([*index.get(key, ()), *others]))
        return cls(groups=tuple(kept), source=source, _index=index, _spelling=spelling)

    @classmethod
    def from_mapping(
        cls, entries: Mapping[str, Sequence[str]], source: Path | None = None
    ) -> AliasDictionary:
        """Build from `term → synonyms`."""
        return cls.from_groups(([term, *synonyms] for term, synonyms in entries.items()), source)

    def merged(self, extra: Mapping[str, Sequence[str]]) -> AliasDictionary:
        """This dictionary plus `extra` entries (for one run; the file is not changed)."""
        if not extra:
            return self
        return AliasDictionary.from_groups([*self.groups, *([t, *s] for t, s in extra.items())], self.source)

    def synonyms(self, term: str) -> list[str]:
        """Every synonym of `term` (case-insensitive), not including the term itself."""
        return list(self._index.get(normalize_text(term).lower(), ()))

    def find_in(self, text: str) -> dict[str, list[str]]:
        """Dictionary terms that occur in `text` → their synonyms that do not occur in it yet."""
        lowered = normalize_text(text).lower()
        found: dict[str, list[str]] = {}
        for term, others in self._index.items():
            if _occurs(term, lowered):
                missing = [o for o in others if not _occurs(o.lower(), lowered)]
                if missing:
                    found[self._spelling.get(term, term)] = missing
        return found

    def __len__(self) -> int:
        return len(self.groups)


def load_aliases(path: Path) -> AliasDictionary:
    """Read an alias dictionary: TOML with one `term = ["synonym", …]` per line.

    Raises:
        InputError: the file is missing, not TOML (the message names file and line), or an entry is
            not a list of strings.
    """
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(
            f"{path}: alias file not found; fix [rewrite] alias_file or create the file"
        ) from None
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text ({error.reason}); save the alias file as UTF-8") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        position = _TOML_POSITION.search(str(error))
        lines = text.splitlines()
        line_no = None
        if position:
            line_no = int(position.group(1)) if position.group(1) else max(1, len(lines))
        where = f"{path}:{line_no}" if line_no else str(path)
        reason = _TOML_POSITION.sub("", str(error)).strip()
        fix = _ALIAS_FIX
        if line_no and line_no <= len(lines):
            bare_key = _BARE_KEY.match(lines[line_no - 1])
            if bare_key and not bare_key.group(1).isascii():
                # TOML bare keys are ASCII only; Chinese terms must be quoted.
                fix = f'quote the term: "{bare_key.group(1).strip()}" = [...]'
        raise InputError(f"{where}: not valid TOML ({reason}); {fix}") from None
    groups = []
    for term, synonyms in data.items():
        if not isinstance(synonyms, list) or not all(isinstance(s, str) for s in synonyms):
            line = _line_of(text, term)
            where = f"{path}:{line}" if line else str(path)
            raise InputError(f"{where}: entry {quoted(term)} is not a list of strings; {_ALIAS_FIX}")
        groups.append([term, *synonyms])
    return AliasDictionary.from_groups(groups, source=Path(path))


def _line_of(text: str, key: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip()
        if stripped.startswith((key, f'"{key}"', f"'{key}'")):
            return number
    return None


def default_tokenize(text: str) -> list[str]:
    """The analyzer the BM25 index uses."""
    return list(analyzer_tokenize(text))


def extract_keywords(text: str, tokenize: Tokenizer) -> list[str]:
    """Tokens of `text` minus stop words and punctuation, first occurrence order."""
    keywords = []
    for token in tokenize(text):
        token = token.strip()
        if token and token.lower() not in STOP_WORDS and any(ch.isalnum() for ch in token):
            keywords.append(token)
    return _unique(keywords)


def split_sub_queries(text: str, tokenize: Tokenizer, max_sub_queries: int) -> list[str]:
    """Split a query with several constraints at conjunctions and punctuation (和、以及、并且、？…).

    Parts without a keyword are dropped; a query that yields fewer than two parts has no
    sub-queries. At most `max_sub_queries` parts are returned.
    """
    if max_sub_queries <= 0:
        return []
    parts = [p.strip() for p in _SUB_QUERY_SPLIT.split(text)]
    parts = _unique(p for p in parts if p and extract_keywords(p, tokenize))
    if len(parts) < 2:
        return []
    return parts[:max_sub_queries]


def expand_with_aliases(text: str, aliases: Mapping[str, Sequence[str]]) -> str:
    """`text` followed by every added synonym (each once)."""
    added = _unique(s for synonyms in aliases.values() for s in synonyms)
    return " ".join([text, *added]) if added else text


def replace_with_canonical(text: str, dictionary: AliasDictionary) -> tuple[str, dict[str, list[str]]]:
    """The replacing rewrite (`alias_mode = "replace"`): every member of an alias group found in
    `text` is swapped for the group's first member (the KB's term), unless that term is already
    there; longer members first. Returns the rewritten text and member → [the term it became]."""
    rewritten = text
    replaced: dict[str, list[str]] = {}
    for group in dictionary.groups:
        canonical = group[0]
        for member in sorted(group[1:], key=len, reverse=True):
            if member in rewritten and canonical not in rewritten:
                rewritten = rewritten.replace(member, canonical)
                replaced[member] = [canonical]
    return rewritten, replaced


def off_rewrite(raw_query: str, normalized_query: str) -> RewriteResult:
    """The rewrite of `rewrite_mode = off`: the normalized query, no aliases, no sub-queries."""
    return RewriteResult(
        raw_query=raw_query, normalized_query=normalized_query, rewritten_query=normalized_query, mode="off"
    )


class RuleRewriter:
    """Normalized query + alias expansion + keywords + sub-queries, by rules only."""

    def __init__(
        self,
        aliases: AliasDictionary | None = None,
        *,
        max_sub_queries: int = 2,
        tokenize: Tokenizer | None = None,
        alias_mode: str = "expand",
    ) -> None:
        self.aliases = aliases or AliasDictionary()
        self.max_sub_queries = max_sub_queries
        self.alias_mode = alias_mode
        """`expand` appends synonyms; `replace` swaps group members for the group's first term."""
        self.tokenize: Tokenizer = tokenize or default_tokenize

    def rewrite(
        self,
        raw_query: str,
        normalized_query: str,
        *,
        extra_aliases: Mapping[str, Sequence[str]] | None = None,
    ) -> RewriteResult:
        """Rewrite by the rules; `extra_aliases` apply to this call only."""
        dictionary = self.aliases.merged(extra_aliases or {})
        if self.alias_mode == "replace":
            rewritten, replaced = replace_with_canonical(normalized_query, dictionary)
            # Production searched only the replaced text, so keywords and sub-queries come from it.
            return RewriteResult(
                raw_query=raw_query,
                normalized_query=normalized_query,
                rewritten_query=rewritten,
                keywords=extract_keywords(rewritten, self.tokenize),
                aliases=replaced,
                sub_queries=split_sub_queries(rewritten, self.tokenize, self.max_sub_queries),
                mode="rules",
            )
        found = dictionary.find_in(normalized_query)
        return RewriteResult(
            raw_query=raw_query,
            normalized_query=normalized_query,
            rewritten_query=expand_with_aliases(normalized_query, found),
            keywords=extract_keywords(normalized_query, self.tokenize),
            aliases=found,
            sub_queries=split_sub_queries(normalized_query, self.tokenize, self.max_sub_queries),
            mode="rules",
        )


# ---------------------------------------------------------------- LLM rewrite

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
