"""The text analyzer shared by the BM25 indexes and every module that needs the same tokens.

Steps, in order:
1. Unicode NFKC (full-width `Ｅ１００１` → `E1001`), then lower-case.
2. Error codes and version strings (`E1001`, `e-1001`, `ERR_42`, `v2.3.1`, `2.3.1`) are cut out with a
   regex first and kept whole as one token each; jieba would split them at `-`, `_` and `.`.
3. Everything between them is segmented by jieba in *search mode*: a long word yields itself and
   its dictionary sub-words (`中华人民共和国` → `中华`, `人民`, `共和国`, …), so a query word matches a
   longer document word. Index and query use the same mode.
4. Empty, whitespace and punctuation-only tokens and a short list of function words are dropped.

Queries may be analyzed differently from documents (`query_terms`, `[index] query_segmentation`
and `query_stop_words`): jieba's *precise* mode gives one token per word, a subset of what search
mode indexed for the same word, so a query no longer matches the sub-words of its own compounds
(`服务器` → not also `务器`); extra stop words are dropped from the query only.

`ChineseAnalyzer()` is a module-level class so Whoosh can pickle it into the index schema.
jieba runs as a private `jieba.Tokenizer` instance, so words another module adds to jieba's global
dictionary do not change how the index was tokenized.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata
import warnings
from collections.abc import Iterator

from whoosh.analysis import Token, Tokenizer

from ragtriage.wording import quoted

with warnings.catch_warnings():
    # jieba's sources contain invalid escape sequences and it imports pkg_resources.
    warnings.simplefilter("ignore", SyntaxWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
    warnings.simplefilter("ignore", UserWarning)
    import jieba

__all__ = [
    "ChineseAnalyzer",
    "JiebaTokenizer",
    "QUERY_SEGMENTATIONS",
    "STOP_WORDS",
    "in_dictionary",
    "normalize_text",
    "query_terms",
    "segments",
    "terms",
    "tokenize",
]

#: Function words that carry no retrieval signal; a query made only of these matches nothing.
STOP_WORDS = frozenset(
    "的 了 和 与 及 或 是 在 吗 呢 吧 啊 呀 哦 么 嘛 也 就 都 而 被 把 让 给 对 从 向 于 之 其 "
    "着 过 地 得 个 这 那 这个 那个 我 你 他 她 它 我们 你们 请问 一下 "
    "a an the of to and or is are be in on at for by with as it this that".split()
)

#: How a query is segmented for BM25: as documents are (`search`), or one token per word (`precise`).
QUERY_SEGMENTATIONS = ("search", "precise")

# An ASCII run of letters/digits joined by - _ . that is not part of a longer ASCII run.
_ASCII_RUN = re.compile(r"(?<![a-z0-9_.\-])[a-z0-9]+(?:[-_.][a-z0-9]+)*(?![a-z0-9_\-]|\.[a-z0-9])")
_HAS_DIGIT = re.compile(r"\d")
_HAS_LETTER = re.compile(r"[a-z]")
_DOTTED_NUMBER = re.compile(r"v?\d+(?:\.\d+)+")

_tokenizer_lock = threading.Lock()
_tokenizer: jieba.Tokenizer | None = None


def _jieba() -> jieba.Tokenizer:
    """The module's private jieba tokenizer, created on first use (its dictionary loads then)."""
    global _tokenizer
    if _tokenizer is None:
        with _tokenizer_lock:
            if _tokenizer is None:
                # jieba reports "Building prefix dict…" at DEBUG on its own logger; keep that noise out.
                jieba.setLogLevel(logging.WARNING)
                tokenizer = jieba.Tokenizer()
                tokenizer.initialize()
                _tokenizer = tokenizer
    return _tokenizer


def _is_code(run: str) -> bool:
    """An error code or version string: letters and digits mixed, or a dotted number."""
    if _DOTTED_NUMBER.fullmatch(run):
        return True
    return bool(_HAS_DIGIT.search(run) and _HAS_LETTER.search(run))


@functools.lru_cache(maxsize=1 << 18)
def _keep(word: str) -> bool:
    """Drop empty, whitespace, punctuation-only and stop-word tokens (remembered: a chunk has ~100)."""
    return bool(word) and any(ch.isalnum() for ch in word) and word not in STOP_WORDS


def normalize_text(text: str) -> str:
    """NFKC then lower-case: the form every token is taken from."""
    return unicodedata.normalize("NFKC", text).lower()


def _pieces(normalized: str) -> Iterator[tuple[str, int, bool]]:
    """(piece, start, is_code) over normalized text: codes whole, the text between them for jieba."""
    cursor = 0
    for match in _ASCII_RUN.finditer(normalized):
        if _is_code(match.group()):
            if cursor < match.start():
                yield normalized[cursor : match.start()], cursor, False
            yield match.group(), match.start(), True
            cursor = match.end()
    if cursor < len(normalized):
        yield normalized[cursor:], cursor, False


def segments(text: str, mode: str = "search") -> Iterator[tuple[str, int, int]]:
    """(token, start, end) over the normalized text, junk dropped; offsets index `normalize_text(text)`.

    `mode` is jieba's: `search` (documents) or `default` (one token per word, `precise` queries).
    """
    tokenizer = _jieba()
    for piece, start, is_code in _pieces(normalize_text(text)):
        if is_code:
            yield piece, start, start + len(piece)
            continue
        for word, word_start, word_end in tokenizer.tokenize(piece, mode=mode):
            word = word.strip()
            if _keep(word):
                yield word, start + word_start, start + word_end


class JiebaTokenizer(Tokenizer):  # type: ignore[misc]
    """Whoosh tokenizer: NFKC, lower-case, whole codes, jieba search mode, no junk tokens."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self).__name__)

    def __call__(
        self,
        value: str,
        positions: bool = False,
        chars: bool = False,
        keeporiginal: bool = False,
        removestops: bool = True,
        start_pos: int = 0,
        start_char: int = 0,
        tokenize: bool = True,
        mode: str = "",
        **kwargs: object,
    ) -> Iterator[Token]:
        token = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
        if not tokenize:
            # Whoosh asks for the whole value as one term (e.g. ID-like query terms).
            text = normalize_text(value).strip()
            pieces: Iterator[tuple[str, int, int]] = iter([(text, 0, len(text))] if _keep(text) else [])
        else:
            pieces = segments(value)
        for position, (text, start, end) in enumerate(pieces):
            token.text = text
            token.boost = 1.0
            token.stopped = False
            if keeporiginal:
                token.original = text
            if positions:
                token.pos = start_pos + position
            if chars:
                token.startchar = start_char + start
                token.endchar = start_char + end
            yield token


def ChineseAnalyzer() -> JiebaTokenizer:  # noqa: N802  (named like Whoosh's analyzer factories)
    """The analyzer the BM25 index is built with (picklable)."""
    return JiebaTokenizer()


def terms(text: str) -> list[str]:
    """The terms the BM25 indexes see for `text`, in order (duplicates kept)."""
    return [word for word, _, _ in segments(text)]


def tokenize(text: str) -> list[str]:
    """`terms(text)`, remembered for the last 4096 texts: one replay tokenizes the same query text
    several times (BM25 routes, keywords, sub-queries)."""
    return list(_tokenize_cached(text))


@functools.lru_cache(maxsize=4096)
def _tokenize_cached(text: str) -> tuple[str, ...]:
    return tuple(terms(text))


@functools.lru_cache(maxsize=4096)
def _precise_cached(text: str) -> tuple[str, ...]:
    return tuple(word for word, _, _ in segments(text, mode="default"))


def in_dictionary(word: str) -> bool:
    """True when jieba's dictionary lists `word` (its HMM may still emit words it does not list)."""
    return bool(_jieba().FREQ.get(word))


def query_terms(
    text: str, *, segmentation: str = "search", stop_words: frozenset[str] = frozenset()
) -> list[str]:
    """The distinct BM25 terms of a query, in order.

    `segmentation="search"` is `tokenize` (the documents' analysis); `"precise"` cuts the text with
    jieba's default mode (codes still whole, the same junk and stop words dropped). `stop_words`
    (normalized like the text) are dropped as well.

    Raises:
        ValueError: an unknown segmentation.
    """
    if segmentation == "search":
        words = tokenize(text)
    elif segmentation == "precise":
        words = list(_precise_cached(text))
    else:
        raise ValueError(f"unknown query segmentation {quoted(segmentation)}; use search or precise")
    return [w for w in dict.fromkeys(words) if w not in stop_words]
