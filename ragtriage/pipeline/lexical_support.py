"""Lexical support: how much of the query's content the final candidates actually contain.

A refusal score that needs no cross-encoder. A knowledge base typically cannot answer a question
because the question names something the KB never mentions (`微信`, `wsl`, `ufw`, `nginx`): the
dense route still returns its nearest chunks with a high cosine, but those chunks do not contain
the named thing. The score measures that directly:

    lexical_support = Σ_{t ∈ T, t supported} idf(t) / Σ_{t ∈ T} idf(t)      (in [0, 1])

- T: the query's content terms — the terms the local BM25 index searches for the query (the
  analyzer: NFKC, lower-case, jieba search mode or `[index] query_segmentation`, stop words and
  `query_stop_words` dropped) minus question fillers (`QUESTION_FILLERS`: 怎么, 啥, 有没有 …) and
  single Han characters (jieba's leftovers such as 装 in 怎么装: the index holds 安装, never 装,
  so a lone character's document frequency is meaningless), each once.
- idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5)), the BM25 (Robertson–Spärck Jones, Lucene
  form) inverse document frequency, with N the indexed chunks and df(t) the chunks holding t in
  their title or text, both from the local BM25 index. A term no chunk holds (df = 0) weighs most.
- t is supported when it occurs as a substring of the normalized title, heading path or text of at
  least one of the first n candidates after rerank (n = `[rerank] top_n`, the final context).
  Substring, not term, matching: a query term the chunk holds inside a longer indexed word still
  counts (segmentation differs between a short query and a long chunk). A misspelt word counts
  where a candidate holds the word it stands for (its spelling neighbours, below).

Spelling neighbours: a word of Latin letters of 5+ characters that no chunk holds (df = 0) stands
for the indexed words one Damerau–Levenshtein edit away with the same first letter (`tesing` →
`testing`, `aptitute` → `aptitude`). Shorter words get none: one edit turns a short name into
another real word too easily (`logo` → `log`).

Out-of-vocabulary names veto: when the query is written in CJK script (Han, kana, Hangul) and holds
a word with Latin letters (`wsl`, `ufw`, `centos7`, `nginx`) that no chunk of the KB holds as an
indexed word (df = 0) and that has no spelling neighbour, the score is 0 (`term_share` keeps the
share). In a CJK query such words name the thing asked about (software, a command, a version), and,
unlike a CJK term whose word boundaries jieba guessed, a Latin word is delimited, so its absence
from the whole KB is reliable evidence that the KB does not cover it. Queries without CJK
characters have no such names (every word is Latin), so the veto never applies to them. Markup
(`markup_words`) and ordinary English words of a pasted message (`ordinary_words`) that no chunk
holds are no names either: they are left out of T altogether (`LexicalSupport.markup`,
`LexicalSupport.ordinary_words`; the rules are below, with their functions).

Dense agreement (`[rerank] refusal_dense_gap`, `with_dense_gap`): a lexical gap is also what a
colloquial word the documents never use looks like (补卡 for 补签, 撤单 for 撤销), and dense
retrieval bridges exactly those. So the share counts only when the dense route agrees that the KB
holds nothing that stands out for the query: its first cosine minus its tenth (`DENSE_GAP_RANK`)
below the threshold, a flat list of near-equal neighbours — the
score-gap form of post-retrieval query performance prediction (Shtok et al. 2012; Cronen-Townsend
et al. 2002). Where the first hit stands out, or there is no dense route of ten hits, the score is 1 and
`term_share` keeps the share; an out-of-vocabulary name still sets it to 0.

The score is None (n/a) when nothing can be judged: no content term, no local BM25 index to count
document frequencies in (a KB searched only through a production engine), or no candidate whose
text the KB holds (foreign ids). `LexicalSupport.note` says which, and refusal then does not judge.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ragtriage.index.analyzer import normalize_text, tokenize
from ragtriage.index.types import ScoredChunk
from ragtriage.pipeline.chunk_lookup import ChunkLookup
from ragtriage.pipeline.types import LexicalSupport, RouteResult, TermSupport

#: Question words and fillers: they say *that* something is asked, not *what*, so no chunk needs
#: to contain them. (Stop words are already dropped by the analyzer.)
QUESTION_FILLERS = frozenset(
    "怎么 怎么样 怎样 怎么办 咋 咋办 如何 什么 啥 为什么 为啥 哪个 哪些 哪里 哪儿 哪 谁 多少 几 "
    "有没有 是不是 能不能 可不可以 可以 能 要 想 还是 到底 办法 问题 吗 呢 有 没 没有 "
    "how what why which where who when can does do should".split()
)


#: One Han character alone: what jieba leaves where it found no word (装, 里, 上). Search mode never
#: indexes a character that belongs to a word (安装 → 安装), so its document frequency says nothing.
_SINGLE_HAN = re.compile(r"^[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]$")

#: A typed redaction placeholder (`<PHONE>`, `<ID_CARD>`, as `promote` writes them): it stands for
#: something the user typed, not for a word the KB should hold, so it is no content term.
_PLACEHOLDER = re.compile(r"<[A-Z][A-Z_]*>")

#: CJK script: Han, kana, Hangul syllables.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LATIN_LETTER = re.compile(r"[a-z]")

#: Shortest word a spelling neighbour may stand in for: one edit turns a short name into another
#: real word too easily (ufw/uefi-like pairs, yum/sum), while a typo in a long word rarely does.
MIN_FUZZY_CHARS = 5

#: The dense hit the first is compared with (`dense_gap`): deep enough that a few near-duplicate
#: chunks of one answer do not hide a standing-out first hit, shallow enough for the default k (10).
DENSE_GAP_RANK = 10


@runtime_checkable
class DocumentFrequencies(Protocol):
    """A BM25 index that analyzes a query as its search does and counts, per term, the chunks
    holding it (title or text)."""

    def query_terms(self, query: str) -> list[str]:
        """The distinct terms the index searches for `query` (`[index] query_segmentation`, `query_stop_words`)."""
        ...

    def term_stats(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """`(N indexed chunks, {term: df})`."""
        ...


@runtime_checkable
class SpellingNeighbours(Protocol):
    """A BM25 index that lists its indexed words one edit away from a word (typo tolerance)."""

    def near_terms(self, term: str, max_edits: int = 1) -> list[str]:
        """Indexed words (title or text) within `max_edits` Damerau–Levenshtein edits of `term`
        that start with the same character."""
        ...


def spelling_neighbours(term: str, df: int, frequencies: object) -> list[str]:
    """The indexed words a misspelt `term` may stand for: for a word of Latin letters (no CJK) of
    `MIN_FUZZY_CHARS`+ characters that no chunk holds (df 0), the index's words one edit away with
    the same first letter; else none (also when the index cannot list neighbours)."""
    if (
        df > 0
        or len(term) < MIN_FUZZY_CHARS
        or _CJK.search(term)
        or not _LATIN_LETTER.search(term)
        or not isinstance(frequencies, SpellingNeighbours)
    ):
        return []
    return frequencies.near_terms(term, 1)


def oov_names(query: str, rows: Sequence[TermSupport]) -> set[str]:
    """The terms of `rows` that are out-of-vocabulary names (see the module docstring): words with
    a Latin letter and no CJK character, in no chunk (df 0) and without a spelling neighbour
    (`TermSupport.spelled_as`); empty when `query` has no CJK character."""
    if not _CJK.search(query):
        return set()
    return {
        row.term
        for row in rows
        if row.df == 0 and not row.spelled_as and not _CJK.search(row.term) and _LATIN_LETTER.search(row.term)
    }


def bm25_idf(df: int, n: int) -> float:
    """BM25 inverse document frequency, Lucene form: ln(1 + (N − df + 0.5) / (df + 0.5)) (Robertson &
    Spärck Jones 1976; Kamphuis et al. 2020). Always > 0; df is clipped to [0, N]."""
    df = min(max(df, 0), n)
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def content_terms(query: str, frequencies: DocumentFrequencies | None = None) -> list[str]:
    """The query's content terms, each once, in order: the terms the BM25 index searches for it
    (the analyzer's `tokenize` without an index) minus question fillers."""
    terms = frequencies.query_terms(query) if frequencies is not None else tokenize(query)
    return [t for t in dict.fromkeys(terms) if t not in QUESTION_FILLERS and not _SINGLE_HAN.match(t)]


def lexical_support(
    query: str,
    candidate_texts: Sequence[str],
    frequencies: DocumentFrequencies | None,
) -> LexicalSupport:
    """The lexical support of `query` by `candidate_texts` (title, heading path and text of each of
    the first n candidates the KB holds), weighted by `frequencies` (see the module docstring).
    Redaction placeholders (`<PHONE>`) are left out of the query first."""
    query = _PLACEHOLDER.sub(" ", query)
    terms = content_terms(query, frequencies)
    if not terms:
        return LexicalSupport(note="the query has no content term (only question words and stop words)")
    if frequencies is None:
        return LexicalSupport(
            note="no local BM25 index to count document frequencies in (run `ragtriage index`)"
        )
    total, df = frequencies.term_stats(terms)
    if total == 0:
        return LexicalSupport(note="the local BM25 index is empty (run `ragtriage index`)")
    # Markup (`<br>`, `&nbsp;`, the `yaml` of config.yaml) no chunk holds: the loaders strip it from
    # the documents, so its absence says nothing about the question (`markup_words`).
    markup = markup_words(query)
    left_out = [t for t in terms if t in markup and df.get(t, 0) == 0]
    # Ordinary English words of a pasted message (unexpected, refused) no chunk holds: a Chinese KB
    # writes its prose in Chinese, so their absence says nothing either (`ordinary_words`).
    unheld = {t for t in terms if t not in left_out and df.get(t, 0) == 0}
    ordinary = ordinary_words(query, unheld) if unheld else set()
    common = [t for t in terms if t in ordinary]
    if left_out or common:
        terms = [t for t in terms if t not in left_out and t not in ordinary]
        if not terms:
            return LexicalSupport(
                indexed_chunks=total,
                markup=left_out,
                ordinary_words=common,
                note=f"the query has no content term besides {_left_out_kinds(left_out, common)}",
            )
    if not candidate_texts:
        return LexicalSupport(
            indexed_chunks=total, note="no candidate text to check (nothing retrieved, or ids not in the KB)"
        )
    texts = [normalize_text(text) for text in candidate_texts]
    rows = []
    for term in terms:
        term_df = df.get(term, 0)
        # A misspelt word (tesing) is found where the candidates hold the word it stands for (testing).
        neighbours = spelling_neighbours(term, term_df, frequencies)
        found = next((w for w in [term, *neighbours] if any(w in text for text in texts)), None)
        rows.append(
            TermSupport(
                term=term,
                df=term_df,
                weight=round(bm25_idf(term_df, total), 6),
                supported=found is not None,
                spelled_as=neighbours,
            )
        )
    names = oov_names(query, rows)
    if names:
        rows = [row.model_copy(update={"oov": True}) if row.term in names else row for row in rows]
    weight = sum(row.weight for row in rows)
    share = round(sum(row.weight for row in rows if row.supported) / weight, 6)
    return LexicalSupport(
        score=0.0 if names else share,
        term_share=share,
        terms=rows,
        candidates=len(texts),
        indexed_chunks=total,
        markup=left_out,
        ordinary_words=common,
    )


def _left_out_kinds(markup: Sequence[str], ordinary: Sequence[str]) -> str:
    kinds = (["markup"] if markup else []) + (["ordinary English words"] if ordinary else [])
    return " and ".join(kinds)


def candidate_text(title: str, heading_path: Sequence[str], content: str) -> str:
    """The text a candidate is checked against: title, heading path and content."""
    return "\n".join([title, *heading_path, content])


def candidates_support(
    query: str, top: Sequence[ScoredChunk], chunks: ChunkLookup, bm25: object
) -> LexicalSupport:
    """Lexical support of `query` by the candidates `top` (the final context before any refusal),
    reading their text from the KB (ids it does not hold are skipped) and document frequencies from
    `bm25` when it is a `DocumentFrequencies` index."""
    ids = [c.chunk_id for c in top if c.chunk_id in chunks]
    contents = chunks.contents(ids)
    texts = []
    for chunk_id in ids:
        meta = chunks.get(chunk_id)
        if meta is not None and chunk_id in contents:
            texts.append(candidate_text(meta.title, meta.heading_path, contents[chunk_id]))
    frequencies = bm25 if isinstance(bm25, DocumentFrequencies) else None
    return lexical_support(query, texts, frequencies)


def dense_gap(routes: Sequence[RouteResult]) -> float | None:
    """The first cosine minus the `DENSE_GAP_RANK`-th of the dense route whose first hit scores
    highest; None without a dense route of `DENSE_GAP_RANK` hits (a KB or k that small has no list
    of near-equal neighbours to call flat: two chunks can score alike for a question either answers)."""
    lists = [r.hits for r in routes if r.kind == "dense" and len(r.hits) >= DENSE_GAP_RANK]
    if not lists:
        return None
    hits = max(lists, key=lambda h: h[0].score)
    return round(hits[0].score - hits[DENSE_GAP_RANK - 1].score, 6)


def with_dense_gap(support: LexicalSupport, gap: float | None, threshold: float | None) -> LexicalSupport:
    """`support` with the dense agreement applied (module docstring): the score becomes 1 when the
    dense route's first hit stands out (`gap` ≥ `threshold`) or there is no dense route, unless an
    out-of-vocabulary name set it to 0. The gap is recorded either way (`eval calibrate-refusal`
    sweeps the threshold over it); the score is unchanged when `threshold` is None or it is n/a."""
    if support.score is None:
        return support
    if threshold is None:
        return support.model_copy(update={"dense_gap": gap})
    update: dict[str, object] = {"dense_gap": gap, "dense_gap_threshold": threshold}
    if not support.oov_names() and (gap is None or gap >= threshold):
        update["score"] = 1.0
    return support.model_copy(update=update)


# ---------------------------------------------------------------- markup and pasted English
# Users paste markup (`表格里怎么用<br>换行`, `config.yaml放在哪`) and English messages (`apt 报错 E: Unable
# to locate package 怎么办`) into questions. The analyzer turns them into Latin words (`br`, `yaml`,
# `unable`) a Chinese KB rarely holds (its loaders strip markup; its prose is Chinese), which say
# nothing about what is asked: they must be neither out-of-vocabulary names nor missing content terms.

#: BBCode and Rich console tags (`[b]`, `[/url]`, `[color=red]`, `[bold red]`): only these names, so
#: a Markdown link's text (`[文档](url)`) or a shell test (`[ -f x ]`) stays prose.
_BBCODE = (
    "b|i|u|s|bold|italic|underline|strike|dim|reverse|blink|url|link|img|code|quote|color|size|font|"
    "center|left|right|spoiler|list|table|tr|td|th"
)

#: (pattern, group whose span is markup) over the normalized query.
_MARKUP: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"<(script|style)\b[^<>]*>.*?</\1\s*>", re.DOTALL), 0),
    (re.compile(r"</?[a-z][a-z0-9:-]*(?:\s[^<>]*)?/?>"), 0),
    (re.compile(rf"\[/?(?:{_BBCODE})(?:[= ][^\[\]]*)?\](?!\()"), 0),
    (re.compile(r"&(?:[a-z][a-z0-9]{1,7}|#x?[0-9a-f]+);|&(?:nbsp|lt|gt|amp|quot|apos)(?![a-z0-9])"), 0),
    (re.compile(r"(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*)://"), 1),
    (re.compile(r"(?<=\w)\.([a-z][a-z0-9]{0,4})(?![a-z0-9_-]|\.[a-z0-9])"), 1),
    (re.compile(r"```([a-z0-9_+#.-]+)"), 1),
)

#: Lowest English Zipf frequency of an ordinary word (3 = once per million words, the floor of
#: wordfreq's small list). Chosen on the Debian query set's tune split (docs/benchmarks.md).
ORDINARY_ZIPF = 3.0

#: CJK script and CJK punctuation (、。「」 survive NFKC): what ends a run of Latin words.
_CJK_OR_PUNCTUATION = re.compile(
    r"[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+"
)
_LETTERS_ONLY = re.compile(r"^[a-z]+$")


def markup_words(query: str) -> set[str]:
    """The analyzer's Latin-letter words of `query` that occur only as markup. Markup, exactly (on
    the NFKC, lower-cased query):

    - every word inside an HTML/XML tag: `<br>`, `</td>`, `<img src="a.png">` (tag and attribute
      names and values) — a `<` that opens no tag (`a<b`, `$<`) is no tag — and inside a `<script>`
      or `<style>` element (code, which the HTML loader drops with the element);
    - every word inside a BBCode or Rich console tag with a known name (`[b]`, `[/url]`,
      `[link=http://x]`, `[bold red]`); the text between the tags stays prose;
    - the name of an HTML entity: `&nbsp;`, `&lt;`, `&#160;` (the semicolon may be left out of
      `&nbsp`, `&lt`, `&gt`, `&amp`, `&quot`, `&apos`);
    - a URL scheme: `https` in `https://…` (the host and path stay words);
    - a file extension: the letters after the last dot of a file name (`yaml` in `config.yaml`, `h`
      in `math.h`, `xz` in `tar.xz`): 1–5 characters starting with a letter, after a word character
      and not followed by a letter, digit, `_`, `-` or another dotted part (`utf-8`, `v2.4.0` and
      `.bashrc` are no extensions; the file's own name, `config`, stays a word);
    - the info string of a Markdown code fence (`bash` in ```` ```bash ````).

    Markdown emphasis, headings and quotes yield no word. Words in inline code (`` `systemctl` ``)
    stay words: a command in backticks names what is asked about. A word that also occurs outside
    markup in the same query (`table标签 <table>`) is no markup word.
    """
    text = normalize_text(query)
    spans = sorted(m.span(group) for pattern, group in _MARKUP for m in pattern.finditer(text))
    if not spans:
        return set()
    markup = " ".join(text[start:end] for start, end in spans)
    prose = list(text)
    for start, end in spans:
        prose[start:end] = " " * (end - start)
    words = {w for w in tokenize(markup) if _LATIN_LETTER.search(w) and not _CJK.search(w)}
    return words - set(tokenize("".join(prose)))


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
    # Imported here: wordfreq's import (langcodes, ftfy) costs about 0.4 s and 16 MB, its list 4 MB
    # more (docs/benchmarks.md), paid only by a query that has a candidate ordinary word.
    import wordfreq

    return float(wordfreq.zipf_frequency(word, "en", wordlist="small"))


def ordinary_words(query: str, candidates: set[str] | None = None, cut: float | None = None) -> set[str]:
    """The ordinary English words of `query`, among `candidates` when given (the words worth a
    frequency lookup, e.g. those no chunk holds), with `cut` for `ORDINARY_ZIPF`.

    In a query with CJK characters, a word of Latin letters only whose English Zipf frequency
    (wordfreq: log10 of occurrences per billion words; unexpected 4.2, refused 4.5, make 6.1;
    wireguard, nginx, ufw below 3) is at least the cut and that stands in a run of two or more Latin
    words is an ordinary English word. A run: the stretch between two CJK characters (or the query's
    ends) holding two or more whitespace-separated pieces with a Latin letter (`[: unexpected
    operator`, `win mac linux`). A word alone between CJK characters names what is asked
    (`screen怎么用`, `官方logo`) however common it is in English, and stays a name; so does a word
    that also stands alone elsewhere in the query. Words with a digit, `_` or `.` (`centos7`,
    `zh_cn.utf-8`) are identifiers, never ordinary. Without a CJK character there are none: every
    word is Latin, so a run says nothing about pasting.
    """
    if not _CJK.search(query):
        return set()
    cut = ORDINARY_ZIPF if cut is None else cut
    in_runs, alone = english_runs(query)
    words = in_runs - alone
    if candidates is not None:
        words &= candidates
    return {w for w in words if _LETTERS_ONLY.match(w) and zipf_frequency(w) >= cut}
