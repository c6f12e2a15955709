"""The text analyzer shared by the BM25 index and every module that needs the same tokens.

Steps, in order:
1. Unicode NFKC (full-width `Ｅ１００１` → `E1001`), then lower-case.
2. Error codes and version strings (`E1001`, `e-1001`, `ERR_42`, `v2.3.1`, `2.3.1`) are cut out with a
   regex first and kept whole as one token each; jieba would split them at `-`, `_` and `.`.
3. Everything between them is segmented by jieba in *search mode* (`cut_for_search`): a long word
   yields itself and its dictionary sub-words (`中华人民共和国` → `中华`, `人民`, `共和国`, …), so a
   query word matches a longer document word. Index and query use the same mode. Bulk work
   (indexing) runs on jieba-rs (`rjieba`, about 10 × faster), which `segment_rs` keeps token for
   token equal to Python jieba; the first few texts of a process use Python jieba (cold start).
4. Empty, whitespace and punctuation-only tokens and a short list of function words are dropped.

Queries may be analyzed differently from documents (`query_terms`, `[index] query_segmentation`
and `query_stop_words`): jieba's *precise* mode gives one token per word, a subset of what search
mode indexed for the same word, so a query no longer matches the sub-words of its own compounds
(`服务器` → not also `务器`); extra stop words are dropped from the query only.

`ChineseAnalyzer()` is a module-level class so Whoosh can pickle it into the index schema.
jieba runs as a private `jieba.Tokenizer` instance, so words another module adds to jieba's global
dictionary do not change how the index was tokenized.

Cold start: jieba's prefix dictionary is read on demand from an SQLite cache (`jieba_dictionary`).
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata
import warnings
from collections.abc import Callable, Iterator
from typing import TypeVar

from whoosh.analysis import Token, Tokenizer

from ragtriage.index.jieba_dictionary import shared_tokenizer
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

# An ASCII run of letters/digits joined by - _ . that is not part of a longer ASCII run.
_ASCII_RUN = re.compile(r"(?<![a-z0-9_.\-])[a-z0-9]+(?:[-_.][a-z0-9]+)*(?![a-z0-9_\-]|\.[a-z0-9])")
_ASCII_RUN_SPLIT = re.compile(f"({_ASCII_RUN.pattern})")
_HAS_DIGIT = re.compile(r"\d")
_HAS_LETTER = re.compile(r"[a-z]")
_DOTTED_NUMBER = re.compile(r"v?\d+(?:\.\d+)+")

_V = TypeVar("_V")

#: Texts segmented by Python jieba before switching to jieba-rs (`RAGTRIAGE_SEGMENTER`: auto, rust, python).
RUST_AFTER = 64
_segmented = 0


def _is_code(run: str) -> bool:
    """An error code or version string: letters and digits mixed, or a dotted number."""
    if _DOTTED_NUMBER.fullmatch(run):
        return True
    return bool(_HAS_DIGIT.search(run) and _HAS_LETTER.search(run))


@functools.lru_cache(maxsize=1 << 18)
def _keep(word: str) -> bool:
    """Drop empty, whitespace, punctuation-only and stop-word tokens (remembered: a chunk has ~100)."""
    return bool(word) and any(ch.isalnum() for ch in word) and word not in STOP_WORDS


# Full-width punctuation common in Chinese text, with its NFKC form. One of them makes NFKC's quick
# check fail and normalize the whole text (~30-60 µs for 400 characters); replaced first (a few
# µs), the check usually passes. The result is the same: each is a starter whose compatibility
# decomposition equals its NFKC form's, so the text's NFKD, hence its NFKC, is unchanged.
_PUNCTUATION_NFKC = [(char, unicodedata.normalize("NFKC", char)) for char in "，（）？：；！…\u3000"]


def normalize_text(text: str) -> str:
    """NFKC then lower-case: the form every token is taken from."""
    for char, normalized in _PUNCTUATION_NFKC:
        if char in text:
            text = text.replace(char, normalized)
    return unicodedata.normalize("NFKC", text).lower()


def segments(text: str) -> Iterator[tuple[str, int, int]]:
    """(token, start, end) over the normalized text; offsets index `normalize_text(text)`."""
    normalized = normalize_text(text)
    segmenter = shared_tokenizer()
    cursor = 0
    for match in _ASCII_RUN.finditer(normalized):
        if not _is_code(match.group()):
            continue
        yield from _jieba_segments(segmenter, normalized, cursor, match.start())
        yield match.group(), match.start(), match.end()
        cursor = match.end()
    yield from _jieba_segments(segmenter, normalized, cursor, len(normalized))


def _python_search(text: str) -> list[tuple[str, int, int]]:
    """Python jieba's search-mode segmentation (the reference `segment_rs` is kept equal to)."""
    return list(shared_tokenizer().tokenize(text, mode="search"))


def _use_rust(bulk: bool = False) -> bool:
    """jieba-rs for bulk work and after the first `RUST_AFTER` texts, unless `RAGTRIAGE_SEGMENTER=python`.

    Both give the same tokens (`segment_rs`); importing rjieba loads its whole dictionary (about
    0.3 s), so a handful of queries stay on Python jieba's lazy dictionary and indexing switches.
    """
    global _segmented
    setting = os.environ.get("RAGTRIAGE_SEGMENTER", "auto")
    if setting == "python":
        return False
    _segmented += 1
    return bulk or setting == "rust" or _segmented > RUST_AFTER


def _jieba_segments(
    segmenter: jieba.Tokenizer, text: str, start: int, end: int
) -> Iterator[tuple[str, int, int]]:
    if start >= end:
        return
    piece = text[start:end]
    if _use_rust():
        from ragtriage.index.segment_rs import search_segments

        found = search_segments(piece, _python_search)
    else:
        found = segmenter.tokenize(piece, mode="search")
    keep = _keep
    for word, word_start, word_end in found:
        word = word.strip()
        if keep(word):
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


_ANALYZER = JiebaTokenizer()


def tokenize(text: str) -> list[str]:
    """The terms the BM25 index sees for `text`, in order (duplicates kept).

    Remembered for the last 4096 texts: one replay tokenizes the same query text several times
    (BM25 routes, keywords, sub-queries), and the result depends on the text alone.
    """
    return list(_tokenize_cached(text))


@functools.lru_cache(maxsize=4096)
def _tokenize_cached(text: str) -> tuple[str, ...]:
    return tuple(token.text for token in _ANALYZER(text))


def terms(text: str) -> list[str]:
    """`tokenize(text)` for bulk work (indexing): the same terms in the same order.

    About 6 × faster than the Whoosh tokenizer path: no offsets, no `Token` objects, and one
    jieba-rs call per text (`segment_rs.search_words_bulk`); the few texts that path declines
    take `_terms_by_piece`, which segments the pieces between codes one by one.
    """
    normalized = normalize_text(text)
    if _use_rust(bulk=True):
        from ragtriage.index.segment_rs import search_words_bulk

        words = search_words_bulk(normalized, _cut_codes, _python_search)
        if words is not None:
            return list(filter(None, map(_TERMS.__getitem__, words)))
    return _terms_by_piece(normalized)


def _cut_codes(normalized: str, sentinel: str) -> tuple[str, list[str]]:
    """`normalized` with each error code or version string replaced by `sentinel`, and the codes."""
    parts = _ASCII_RUN_SPLIT.split(normalized)  # text, ASCII run, text, …
    if len(parts) == 1:
        return normalized, []
    is_code = _IS_CODE
    codes = []
    for n in range(1, len(parts), 2):
        if is_code[parts[n]]:
            codes.append(parts[n])
            parts[n] = sentinel
    return "".join(parts), codes


class _Memo(dict[str, _V]):
    """`function(key)`, remembered; cleared when it grows past `limit` keys (bounded memory)."""

    def __init__(self, function: Callable[[str], _V], limit: int = 1 << 18) -> None:
        super().__init__()
        self.function = function
        self.limit = limit

    def __missing__(self, key: str) -> _V:
        if len(self) >= self.limit:
            self.clear()
        value = self[key] = self.function(key)
        return value


def _terms_by_piece(normalized: str) -> list[str]:
    """`terms` of normalized text, each piece between codes segmented on its own (the reference)."""
    out: list[str] = []
    cursor = 0
    for match in _ASCII_RUN.finditer(normalized):
        run = match.group()
        if _is_code(run):
            out += _terms_between(normalized[cursor : match.start()])
            out.append(run)
            cursor = match.end()
    out += _terms_between(normalized[cursor:])
    return out


def _terms_between(piece: str) -> list[str]:
    if not piece:
        return []
    if _use_rust(bulk=True):
        from ragtriage.index.segment_rs import search_words

        words = search_words(piece, _python_search)
    else:
        words = [word for word, _, _ in shared_tokenizer().tokenize(piece, mode="search")]
    return [term for term in map(_term, words) if term]


@functools.lru_cache(maxsize=1 << 18)
def _term(word: str) -> str:
    """The term a segmented word becomes ("" when it is dropped)."""
    word = word.strip()
    return word if _keep(word) else ""


# Dict lookups with the memo filled on a miss: `terms` maps ~200 words a text through these.
_TERMS = _Memo(_term)
_IS_CODE = _Memo(_is_code, limit=1 << 16)


def in_dictionary(word: str) -> bool:
    """True when jieba's dictionary lists `word` (its HMM may still emit words it does not list)."""
    frequency = shared_tokenizer().FREQ.get(word)
    return bool(frequency)


#: How a query is segmented for BM25: as documents are (`search`), or one token per word (`precise`).
QUERY_SEGMENTATIONS = ("search", "precise")


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


@functools.lru_cache(maxsize=4096)
def _precise_cached(text: str) -> tuple[str, ...]:
    normalized = normalize_text(text)
    out: list[str] = []
    cursor = 0
    for match in _ASCII_RUN.finditer(normalized):
        if _is_code(match.group()):
            out += _precise_between(normalized[cursor : match.start()])
            out.append(match.group())
            cursor = match.end()
    out += _precise_between(normalized[cursor:])
    return tuple(out)


def _precise_between(piece: str) -> list[str]:
    if not piece:
        return []
    # A query is short: Python jieba on its lazy dictionary, never the bulk jieba-rs path.
    words = (word for word, _, _ in shared_tokenizer().tokenize(piece, mode="default"))
    return [term for term in map(_term, words) if term]
