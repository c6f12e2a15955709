"""Ordinary English words in a CJK query: pasted text, not names of what is asked about.

Users of Chinese KBs paste English error messages and log lines into their questions
(`apt 报错 E: Unable to locate package 怎么办`, `连接数据库 connection refused 了`). Their words
(unable, locate, refused) are no names of a tool or package, and a Chinese KB rarely holds them
as words, so lexical support must not read them as names the KB never mentions (the
out-of-vocabulary veto) nor as content terms the candidates lack. The rule, in one sentence:

    In a query with CJK characters, a word of Latin letters only whose English Zipf frequency
    (wordfreq) is at least `ORDINARY_ZIPF` and that stands in a run of two or more Latin words is
    an ordinary English word.

- Zipf frequency: log10 of a word's occurrences per billion words of English (Speer et al.,
  wordfreq); 3 is once per million words. `ORDINARY_ZIPF` was chosen on the Debian query set's
  tune split (`docs/benchmarks.md`). Ordinary: unexpected 4.2, refused 4.5, locate 3.9, make 6.1,
  screen 4.9; names: wireguard, nginx, kubernetes, ufw (all below 3).
- A run: the stretch of text between two CJK characters (or the query's ends) holding two or more
  whitespace-separated pieces with a Latin letter (`[: unexpected operator`, `win mac linux`). A
  word alone between CJK characters names what is asked (`screen怎么用`, `官方logo`, `把win启动项`)
  however common it is in English, and stays a name; so does a word that also stands alone
  elsewhere in the query.
- Words with a digit, `_` or `.` (`centos7`, `zh_cn.utf-8`) are identifiers, never ordinary.

A query without CJK characters has no ordinary words: every word is Latin, so a run says nothing
about pasting (the veto never applies to such queries either).

wordfreq's small English list (words of Zipf ≥ 3) is read on the first lookup, lazily: importing
wordfreq costs about 0.4 s and 16 MB, the list about 4 MB more (`docs/benchmarks.md`).
"""

from __future__ import annotations

import functools
import re

from ragtriage.index.analyzer import normalize_text, tokenize

__all__ = ["ORDINARY_ZIPF", "english_runs", "ordinary_words", "zipf_frequency"]

#: Lowest English Zipf frequency of an ordinary word (3 = once per million words, the floor of
#: wordfreq's small list). Chosen on the Debian query set's tune split (docs/benchmarks.md).
ORDINARY_ZIPF = 3.0

#: CJK script and CJK punctuation (、。「」 survive NFKC): what ends a run of Latin words.
_CJK_OR_PUNCTUATION = re.compile(
    r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+"
)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LATIN_LETTER = re.compile(r"[a-z]")
_LETTERS_ONLY = re.compile(r"^[a-z]+$")


def english_runs(query: str) -> tuple[set[str], set[str]]:
    """`(in_runs, alone)`: the analyzer's Latin-letter words of `query` (normalized) that stand in a
    run of two or more Latin pieces, and those that stand alone between CJK characters."""
    in_runs: set[str] = set()
    alone: set[str] = set()
    for stretch in _CJK_OR_PUNCTUATION.split(normalize_text(query)):
        pieces = [p for p in stretch.split() if _LATIN_LETTER.search(p)]
        words = {w for p in pieces for w in tokenize(p) if _LATIN_LETTER.search(w)}
        (in_runs if len(pieces) >= 2 else alone).update(words)
    return in_runs, alone


@functools.lru_cache(maxsize=8192)
def zipf_frequency(word: str) -> float:
    """The English Zipf frequency of `word` in wordfreq's small list (0 below 3, the list's floor)."""
    # Imported here: wordfreq's import (langcodes, ftfy) costs about 0.4 s, paid only by a query
    # that has a candidate ordinary word.
    import wordfreq

    return float(wordfreq.zipf_frequency(word, "en", wordlist="small"))


def ordinary_words(query: str, candidates: set[str] | None = None, cut: float | None = None) -> set[str]:
    """The ordinary English words of `query` (module docstring), among `candidates` when given (the
    words worth a frequency lookup, e.g. those no chunk holds), with `cut` for `ORDINARY_ZIPF`;
    empty without a CJK character."""
    if not _CJK.search(query):
        return set()
    cut = ORDINARY_ZIPF if cut is None else cut
    in_runs, alone = english_runs(query)
    words = in_runs - alone
    if candidates is not None:
        words &= candidates
    return {w for w in words if _LETTERS_ONLY.match(w) and zipf_frequency(w) >= cut}
