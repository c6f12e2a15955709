"""jieba search-mode segmentation through `rjieba` (jieba-rs), giving Python jieba's tokens.

Python jieba segments a 400-character Chinese chunk in about 6–14 ms on this machine; jieba-rs
does it in about 0.3–0.5 ms with the same dictionary, the same DAG + HMM and the same search-mode
rule (a word longer than two characters also yields its dictionary 2- and 3-grams). Two places
differ, measured on the Debian documentation (975 chunks, 111,920 tokens: 2.8 % of the tokens
differed before the corrections below, none after):

- jieba-rs keeps an ASCII run joined by `-`, `.` or `_` whole (`www.debian.org`,
  `background-repeat`, `1003.1-1990`) and sometimes also yields its parts; Python jieba splits it
  with its `re_skip` rule (`[a-z0-9]+(?:\\.\\d+)?%?`) into `www`, `.`, `debian`, … Such a token is
  segmented again by Python jieba (remembered per string), and the parts jieba-rs emitted inside
  its span are dropped.
- jieba-rs treats CJK Extension A/B, the newest unified ideographs (U+9FD6–U+9FFF) and
  compatibility ideographs as Han; Python jieba's `re_han` stops at U+9FD5. Text containing any of
  them is segmented by Python jieba alone.

`search_segments` returns what `jieba.Tokenizer.tokenize(text, mode="search")` returns, in the
same order, and `search_words` the same words without offsets. `search_words_bulk` (indexing,
through `analyzer.terms`) gives the words of every piece between the analyzer's codes in one
jieba-rs call per text, without offsets: what needs correcting is replaced by a sentinel and
filled back (see "Bulk path" below); about 0.2 ms a chunk instead of 0.4–0.5 ms piece by piece.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Sequence

import rjieba

__all__ = ["search_segments", "search_words"]

Segment = tuple[str, int, int]
PythonTokenize = Callable[[str], list[Segment]]

# Characters jieba-rs segments as Han and Python jieba does not (see the module docstring).
_PYTHON_ONLY = re.compile("[\u3400-\u4dbf\u9fd6-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]")
# A whole ASCII run (as jieba's `re_han` delimits ASCII) holding a joiner and a letter or digit:
# jieba-rs may keep it whole (or yield extra parts) where Python jieba splits it with finalseg's
# `re_skip` rule. Runs of joiners alone (`##`, `---`) only make tokens the analyzer drops.
_ASCII = "a-zA-Z0-9+#&._%-"
_JOINED_RUN = re.compile(rf"(?<![{_ASCII}])(?=[{_ASCII}]*[a-zA-Z0-9])(?=[{_ASCII}]*[-._&+#%])[{_ASCII}]+")


@functools.lru_cache(maxsize=65536)
def _python_split(run: str, python: PythonTokenize) -> tuple[Segment, ...]:
    return tuple(python(run))


def search_segments(text: str, python: PythonTokenize) -> list[Segment]:
    """(word, start, end) of jieba search mode over `text`; `python` is Python jieba's tokenize.

    Equal to `python(text)` except for tokens without a letter or digit (punctuation), which the
    analyzer drops anyway.
    """
    if _PYTHON_ONLY.search(text):
        return python(text)
    segments: list[Segment] = rjieba.tokenize(text, mode="search", hmm=True)
    runs = [(match.start(), match.end()) for match in _JOINED_RUN.finditer(text)]
    if not runs:
        return segments
    rejoined = _rejoin(text, segments, runs, python)
    return python(text) if rejoined is None else rejoined


def _rejoin(
    text: str, segments: list[Segment], runs: list[tuple[int, int]], python: PythonTokenize
) -> list[Segment] | None:
    """Replace what jieba-rs emitted inside each joined run by Python jieba's split of the run.

    A run segments alone as in context: its characters are single DAG nodes, buffered and split
    by `re_skip` either way, unless a dictionary word spans ASCII and Han (`江南style`); then
    None is returned and the caller segments the whole text with Python jieba. Tokens come out
    word by word, so every token before a run starts before it and every later one starts inside
    or after it: a binary search over the start offsets finds each run's block.
    """
    starts = [segment[1] for segment in segments]
    out: list[Segment] = []
    done = 0
    for start, end in runs:
        first = bisect.bisect_left(starts, start, lo=done)
        last = bisect.bisect_left(starts, end, lo=first)
        block = segments[first:last]
        if (first > 0 and segments[first - 1][2] > start) or any(segment[2] > end for segment in block):
            return None  # a dictionary word across the run's edge (`江南style`, `4s店`)
        out.extend(segments[done:first])
        out.extend((part, start + s, start + e) for part, s, e in _python_split(text[start:end], python))
        done = last
    out.extend(segments[done:])
    return out


def search_words(text: str, python: PythonTokenize) -> list[str]:
    """The words of `search_segments(text, python)`, without offsets (in the same order)."""
    if _PYTHON_ONLY.search(text):
        return [word for word, _, _ in python(text)]
    if _JOINED_RUN.search(text):
        return [word for word, _, _ in search_segments(text, python)]
    words: list[str] = rjieba.cut_for_search(text, hmm=True)
    return words


# --- Bulk path: one jieba-rs call per text -------------------------------------------------------
#
# jieba (both) segments each block of `[\u4e00-\u9fd5a-z0-9+#&._%-]+` on its own; every other
# character is a token by itself (whitespace: `\r\n` or one character). So a stretch that ends at
# block boundaries (or is cut out) can be replaced by a character outside every block, its words
# computed apart and put back where that character's token comes out, without changing anything
# else. `SENTINEL` is that character; a text that holds it already takes the piece-by-piece path.
SENTINEL = "\x00"
_BLOCK_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+#&._%-")
_JOINED_SPLIT = re.compile(f"({_JOINED_RUN.pattern})")
Fill = Sequence[str]
Cut = Callable[[str, str], tuple[str, list[str]]]
Plan = tuple[str, list[Fill], bool, bool]  # see _plan
_ASCII_STRETCH = re.compile(r"([a-zA-Z0-9+#&._%-]+)")
_PLANS: dict[tuple[Cut, PythonTokenize], dict[str, Plan | None]] = {}
_UNPLANNED: Plan = ("", [], False, False)


def _in_block(char: str) -> bool:
    return char in _BLOCK_CHARS or "\u4e00" <= char <= "\u9fd5"


def _is_han(char: str) -> bool:
    return "\u4e00" <= char <= "\u9fd5"


@functools.lru_cache(maxsize=65536)
def _python_split_words(run: str, python: PythonTokenize) -> tuple[str, ...]:
    return tuple(word for word, _, _ in _python_split(run, python))


@functools.lru_cache(maxsize=16384)
def _block_words(block: str, python: PythonTokenize) -> tuple[str, ...] | None:
    """`search_words(block)` for a block holding a joined run next to Han, or None when a
    dictionary word crosses a run's edge (the caller then takes the piece-by-piece path)."""
    segments: list[Segment] = rjieba.tokenize(block, mode="search", hmm=True)
    runs = [match.span() for match in _JOINED_RUN.finditer(block)]
    rejoined = _rejoin(block, segments, runs, python)
    return None if rejoined is None else tuple(word for word, _, _ in rejoined)


def search_words_bulk(text: str, cut: Cut, python: PythonTokenize) -> list[str] | None:
    """The words of `search_words` over each piece of `text` between the stretches `cut` cuts
    out, with each cut stretch as one word in its place; None when the text needs the
    piece-by-piece path.

    Equal to `search_words(piece_0) + [cut_0] + search_words(piece_1) + …` word for word,
    punctuation and whitespace tokens included, in one jieba-rs call instead of one per piece and
    without offsets: the cuts and the blocks holding a joined run are replaced by `SENTINEL` (see
    above) and their words put back. A block that is a joined run alone takes Python jieba's
    split of the run. The text is read as ASCII stretches (`[a-zA-Z0-9+#&._%-]+`, what jieba and
    the cuts look at) between other text; each distinct stretch is planned once (its cuts, its
    joined runs, their words) and remembered. A joined run with Han next to it (about 1 chunk in
    40) sends the text to `search_words_around`. `cut(text, SENTINEL)` returns the text with the
    stretches to cut replaced by `SENTINEL` and those stretches, and must look no further than an
    ASCII stretch. None (rare) when the text holds `SENTINEL` or characters only Python jieba
    segments right, or a dictionary word crosses a run's edge.
    """
    if SENTINEL in text or _PYTHON_ONLY.search(text):
        return None
    plans = _PLANS.get((cut, python))
    if plans is None or len(plans) > 1 << 16:
        plans = _PLANS[(cut, python)] = {}
    parts = _ASCII_STRETCH.split(text)  # other text, stretch, other text, …
    fills: list[Fill] = []
    for n in range(1, len(parts), 2):
        stretch = parts[n]
        plan = plans.get(stretch, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = plans[stretch] = _plan(stretch, cut, python)
        if plan is None:
            continue  # nothing to cut or correct
        replacement, words, run_first, run_last = plan
        # A joined run at the stretch's edge is a block alone unless Han is next to it.
        before, after = parts[n - 1], parts[n + 1]
        if (run_first and before and _is_han(before[-1])) or (run_last and after and _is_han(after[0])):
            return search_words_around(*cut(text, SENTINEL), python)
        parts[n] = replacement
        fills += words
    return _cut_and_fill("".join(parts), fills)


def _plan(stretch: str, cut: Cut, python: PythonTokenize) -> Plan | None:
    """(the stretch with its cuts and joined runs replaced by `SENTINEL`, their words in order,
    whether a joined run starts it, whether one ends it), or None when nothing is replaced."""
    replaced, cuts = cut(stretch, SENTINEL)
    pieces = _JOINED_SPLIT.split(replaced)  # text, joined run, text, …
    if len(pieces) == 1 and not cuts:
        return None
    words: list[Fill] = []
    taken = 0
    for n, piece in enumerate(pieces):
        if n % 2:
            words.append(_python_split_words(piece, python))
            pieces[n] = SENTINEL
        else:
            count = piece.count(SENTINEL)
            words += [[each] for each in cuts[taken : taken + count]]
            taken += count
    runs = len(pieces) > 1
    return "".join(pieces), words, runs and not pieces[0], runs and not pieces[-1]


def search_words_around(text: str, cuts: Sequence[str], python: PythonTokenize) -> list[str] | None:
    """`search_words_bulk` for a text whose `cuts` are already replaced by `SENTINEL`, joined
    runs found with their offsets: a block with Han next to a run takes `search_segments`'
    correction on that block alone (remembered per block). None when a dictionary word crosses
    a run's edge."""
    fills: list[Fill] = [[each] for each in cuts]
    runs = list(_JOINED_RUN.finditer(text))
    if runs:
        replaced = _replace_run_blocks(text, runs, fills, python)
        if replaced is None:
            return None
        text, fills = replaced
    return _cut_and_fill(text, fills)


def _cut_and_fill(text: str, fills: list[Fill]) -> list[str]:
    """jieba-rs's search-mode words of `text`, each `SENTINEL` replaced by its fill, in order."""
    words: list[str] = rjieba.cut_for_search(text, hmm=True)
    if not fills:
        return words
    out: list[str] = []
    done = 0
    index = words.index
    for fill in fills:
        at = index(SENTINEL, done)
        out += words[done:at]
        out += fill
        done = at + 1
    out += words[done:]
    return out


def _replace_run_blocks(
    text: str, runs: list[re.Match[str]], fills: list[Fill], python: PythonTokenize
) -> tuple[str, list[Fill]] | None:
    """`text` with each block holding a joined run replaced by `SENTINEL`, and every `SENTINEL`'s
    fill in order (the cuts' `fills`, already in `text`, merged with the blocks' words); None when
    a dictionary word crosses a run's edge."""
    parts: list[str] = []
    merged: list[Fill] = []
    taken = 0  # cut fills merged so far
    done = 0
    size = len(text)
    for match in runs:
        start, end = match.span()
        if start < done:
            continue  # inside a block already replaced
        if (start == 0 or not _is_han(text[start - 1])) and (end == size or not _is_han(text[end])):
            words: Fill = _python_split_words(match.group(), python)
        else:
            while start > 0 and _in_block(text[start - 1]):
                start -= 1
            while end < size and _in_block(text[end]):
                end += 1
            block_words = _block_words(text[start:end], python)
            if block_words is None:
                return None
            words = block_words
        cuts = text.count(SENTINEL, done, start)
        merged += fills[taken : taken + cuts]
        taken += cuts
        merged.append(words)
        parts.append(text[done:start])
        done = end
    parts.append(text[done:])
    merged += fills[taken:]
    return SENTINEL.join(parts), merged
