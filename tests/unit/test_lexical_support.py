"""Lexical support (`pipeline.lexical_support`): the formula by hand, its n/a cases, and how
refusal reads it. Document frequencies come from a plain table here; the real Whoosh and bm25s
indexes are exercised in `tests/integration/test_lexical_support_real.py`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from ragtriage.index.analyzer import tokenize
from ragtriage.pipeline.lexical_support import (
    DocumentFrequencies,
    bm25_idf,
    content_terms,
    lexical_support,
)
from ragtriage.pipeline.refusal import not_judged_note, refusal_reason, refusal_scores


class TableFrequencies:
    """Document frequencies from a dict: `(N, {term: df})`."""

    def __init__(self, total: int, table: dict[str, int]) -> None:
        self.total, self.table = total, table

    def query_terms(self, query: str) -> list[str]:
        return tokenize(query)

    def term_stats(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        return self.total, {t: self.table.get(t, 0) for t in terms}


def test_idf_is_bm25_lucene_form() -> None:
    assert bm25_idf(0, 10) == pytest.approx(math.log(22))  # ln(1 + 10.5 / 0.5)
    assert bm25_idf(3, 10) == pytest.approx(math.log(1 + 7.5 / 3.5))
    assert bm25_idf(10, 10) == pytest.approx(math.log(1 + 0.5 / 10.5))
    assert bm25_idf(10, 10) > 0
    assert bm25_idf(12, 10) == bm25_idf(10, 10)  # df clipped to N


def test_fillers_and_stop_words_are_not_content_terms() -> None:
    assert content_terms("ufw怎么放行端口") == ["ufw", "放行", "端口"]
    assert content_terms("ＵＦＷ 端口 端口") == ["ufw", "端口"]  # NFKC, lower-case, each once
    assert content_terms("怎么办") == []


def test_share_by_hand() -> None:
    # 微信: df 0 → ln 22 = 3.091042 (CJK: no out-of-vocabulary name); 放行: df 1 → ln(1 + 9.5/1.5) =
    # 1.992430; 端口: df 3 → 1.145132.
    frequencies = TableFrequencies(10, {"放行": 1, "端口": 3})
    support = lexical_support("微信怎么放行端口", ["防火墙开放端口的方法", "查看端口"], frequencies)
    assert support.score == pytest.approx(1.145132 / (3.091042 + 1.992430 + 1.145132), abs=1e-6)
    assert support.score == pytest.approx(0.183851, abs=1e-6)
    assert support.candidates == 2 and support.indexed_chunks == 10
    assert [(t.term, t.df, t.supported) for t in support.terms] == [
        ("微信", 0, False),
        ("放行", 1, False),
        ("端口", 3, True),
    ]
    assert [t.term for t in support.unsupported()] == ["微信", "放行"]  # heaviest first
    sentence = support.explain()
    assert (
        "微信 (in no chunk of the KB)" in sentence
        and "放行 (in 1 chunk of the KB, none of these)" in sentence
    )
    assert sentence.endswith("found: 端口")


def test_missing_terms_count_chunks_of_the_kb_in_words() -> None:
    support = lexical_support("微信怎么放行端口", ["防火墙"], TableFrequencies(10, {"放行": 1, "端口": 3}))
    assert support.explain().endswith(
        "not found: 微信 (in no chunk of the KB), 放行 (in 1 chunk of the KB, none of these), "
        "端口 (in 3 chunks of the KB, none of these)"
    )


def test_substring_match_survives_segmentation_and_full_width() -> None:
    # Full-width query, ASCII chunk; 防火墙 inside the chunk's run of Han characters still counts.
    frequencies = TableFrequencies(5, {"防火墙": 1, "ufw": 1})
    support = lexical_support("ＵＦＷ 防火墙", ["先安装ufw防火墙规则集"], frequencies)
    assert [t.term for t in support.terms] == ["ufw", "防火", "火墙", "防火墙"]  # search mode's sub-words too
    assert support.score == 1.0 and "every query term" in support.explain()


def test_single_han_characters_are_not_content_terms() -> None:
    # jieba leaves 里 and 装 alone; the index holds 安装, never 装: their df would be a false 0.
    assert content_terms("wsl里怎么装debian") == ["wsl", "debian"]
    support = lexical_support("wsl里怎么装debian", ["安装 debian"], TableFrequencies(9, {"debian": 9}))
    assert support.term_share == pytest.approx(bm25_idf(9, 9) / (bm25_idf(0, 9) + bm25_idf(9, 9)), abs=1e-6)
    assert support.score == 0.0 and support.oov_names() == ["wsl"]


def test_not_applicable_cases_say_why() -> None:
    frequencies = TableFrequencies(4, {})
    assert lexical_support("怎么办", ["x"], frequencies).note == (
        "the query has no content term (only question words and stop words)"
    )
    assert "no local BM25 index" in (lexical_support("端口", ["端口"], None).note or "")
    assert "index is empty" in (lexical_support("端口", ["端口"], TableFrequencies(0, {})).note or "")
    empty = lexical_support("端口", [], frequencies)
    assert empty.score is None and "no candidate text" in (empty.note or "")
    assert empty.explain().startswith("lexical support n/a: no candidate text")
    assert isinstance(frequencies, DocumentFrequencies)


def test_refusal_reads_lexical_support() -> None:
    support = lexical_support("微信怎么放行端口", ["查看端口"], TableFrequencies(10, {"放行": 1, "端口": 3}))
    scores = refusal_scores([], [], [], [], support)
    assert scores["lexical_support"] == support.score
    reason = refusal_reason(0.5, "lexical_support", support.score, 3, support)
    assert reason is not None and reason.startswith("lexical_support score 0.1839 < refusal_threshold 0.5")
    assert reason.endswith("the top 1 candidates lack 微信, 放行")
    assert refusal_reason(0.1, "lexical_support", support.score, 3, support) is None
    # n/a: not refused (it says nothing about the answer), and the trace gets a note saying why.
    na = lexical_support("端口", ["端口"], None)
    assert refusal_reason(0.5, "lexical_support", None, 3, na) is None
    assert (not_judged_note(0.5, "lexical_support", na) or "").startswith(
        "refusal not judged: lexical support n/a"
    )
    assert not_judged_note(None, "lexical_support", na) is None
    assert not_judged_note(0.5, "dense_cosine", na) is None
    # Other kinds keep refusing a run without their score.
    assert "no dense_cosine score" in (refusal_reason(0.5, "dense_cosine", None, 3) or "")


def test_case_screen_and_trace_view_say_which_terms_are_missing() -> None:
    from ragtriage.pipeline.types import RewriteResult, Trace
    from ragtriage.render.trace_view import summary_text
    from ragtriage.tui.widgets.query_panel import query_text

    support = lexical_support("微信怎么放行端口", ["查看端口"], TableFrequencies(10, {"放行": 1, "端口": 3}))
    reason = refusal_reason(0.5, "lexical_support", support.score, 1, support)
    trace = Trace(
        query="微信怎么放行端口",
        rewrite=RewriteResult(
            raw_query="微信怎么放行端口",
            normalized_query="微信怎么放行端口",
            rewritten_query="微信怎么放行端口",
        ),
        refused=True,
        refusal_reason=reason,
        refusal_score_kind="lexical_support",
        refusal_score=support.score,
        lexical_support=support,
    )
    for shown in (query_text("r-1", trace, None, "replay").plain, summary_text(trace).plain):
        assert "lexical_support score 0.1839 < refusal_threshold 0.5" in shown
        assert "not found: 微信 (in no chunk of the KB), 放行 (in 1 chunk of the KB, none of these)" in shown
    quiet = trace.model_copy(update={"refused": False, "refusal_score_kind": "dense_cosine"})
    assert "not found" not in query_text("r-1", quiet, None, "replay").plain


def test_terms_are_the_ones_the_bm25_index_searches() -> None:
    # `[index] query_stop_words` / `query_segmentation` reach lexical support through the index.
    class Configured(TableFrequencies):
        def query_terms(self, query: str) -> list[str]:
            return [t for t in tokenize(query) if t != "微信"]

    support = lexical_support("微信怎么放行端口", ["查看端口"], Configured(10, {"放行": 1, "端口": 3}))
    assert [t.term for t in support.terms] == ["放行", "端口"]
    assert content_terms("微信怎么放行端口") == ["微信", "放行", "端口"]  # without an index: the analyzer's


def test_profile_shape_names_the_refusal_score() -> None:
    from ragtriage.config.profiles import describe_shape
    from ragtriage.config.settings import Settings

    # The default: lexical support with dense agreement.
    assert describe_shape(Settings()).endswith("top 6, refuse lexical_support < 0.2 (dense gap < 0.009)")
    lexical = Settings.model_validate(
        {
            "rerank": {
                "refusal_score": "lexical_support",
                "refusal_threshold": 0.15,
                "refusal_dense_gap": "off",
            }
        }
    )
    assert describe_shape(lexical).endswith("top 6, refuse lexical_support < 0.15")
    dense = Settings.model_validate({"rerank": {"refusal_score": "dense_cosine", "refusal_threshold": 0.3}})
    assert describe_shape(dense).endswith("top 6, refuse dense_cosine < 0.3")
    cross = Settings.model_validate(
        {"rerank": {"backend": "cross-encoder", "model": "m", "refusal_threshold": 0.3}}
    )
    assert describe_shape(cross).endswith("top 6, refuse cross_encoder < 0.3")
    # "off" (TOML has no null) turns refusal off.
    off = Settings.model_validate({"rerank": {"refusal_threshold": "off"}})
    assert off.rerank.refusal_threshold is None and "refuse" not in describe_shape(off)


class NeighbourFrequencies(TableFrequencies):
    """Document frequencies plus spelling neighbours from a word list (as the real indexes list them)."""

    def __init__(self, total: int, table: dict[str, int]) -> None:
        super().__init__(total, table)

    def near_terms(self, term: str, max_edits: int = 1) -> list[str]:
        from rapidfuzz.distance import DamerauLevenshtein

        return [
            w for w in self.table if w[:1] == term[:1] and DamerauLevenshtein.distance(term, w) <= max_edits
        ]


def test_out_of_vocabulary_name_vetoes_the_share() -> None:
    # ufw: Latin word in a Chinese query, df 0, no neighbour → the KB never mentions it: score 0,
    # the share is kept for the triager (same hand-computed 0.183851 as above).
    frequencies = NeighbourFrequencies(10, {"放行": 1, "端口": 3})
    support = lexical_support("ufw怎么放行端口", ["防火墙开放端口的方法"], frequencies)
    assert support.score == 0.0 and support.term_share == pytest.approx(0.183851, abs=1e-6)
    assert support.oov_names() == ["ufw"]
    assert [t.term for t in support.terms if t.oov] == ["ufw"]  # 放行 (CJK, df 1) is no name
    sentence = support.explain()
    assert sentence.startswith("lexical support 0: the KB never mentions ufw (no chunk holds it")
    assert "term share 0.184 over the top 1 candidates" in sentence
    assert "not found: 放行 (in 1 chunk of the KB, none of these)" in sentence and sentence.endswith(
        "found: 端口"
    )
    reason = refusal_reason(0.2, "lexical_support", support.score, 1, support)
    assert reason == (
        "lexical_support score 0.0000 < refusal_threshold 0.2: the KB never mentions ufw; "
        "the top 1 candidates also lack 放行"
    )


@pytest.mark.parametrize(
    "query, table, names",
    [
        # A name the KB holds (df > 0) is no veto, even when no candidate holds it.
        ("docker怎么配镜像", {"docker": 2, "镜像": 5}, []),
        # One edit from an indexed word of 5+ characters with the same first letter: a typo.
        ("tesing里的包坏了", {"testing": 4}, []),
        ("aptitute升级系统", {"aptitude": 4, "升级": 3, "系统": 5}, []),
        # Shorter words are not forgiven (logo is one edit from log, but it is another word).
        ("logo是谁设计的", {"log": 4, "设计": 2}, ["logo"]),
        # Different first letter: not a typo of it.
        ("resting时间", {"testing": 4, "时间": 2}, ["resting"]),
        # Letters with digits are names too (versions); digits alone are not.
        ("centos7上用yum回滚 22端口", {"端口": 2}, ["centos7", "yum"]),
        # No CJK character in the query: every word is Latin, none is singled out as a name.
        ("how to open port with ufw", {"port": 3, "open": 2}, []),
    ],
)
def test_which_words_are_out_of_vocabulary_names(query: str, table: dict[str, int], names: list[str]) -> None:
    support = lexical_support(query, ["任意候选文本"], NeighbourFrequencies(20, table))
    assert support.oov_names() == names
    assert support.score == (0.0 if names else support.term_share)


def test_without_spelling_neighbours_a_typo_counts_as_a_name() -> None:
    # An index that cannot list neighbours (TableFrequencies) gets no typo tolerance.
    support = lexical_support("tesing里的包坏了", ["x"], TableFrequencies(20, {"testing": 4}))
    assert support.oov_names() == ["tesing"] and support.score == 0.0


def test_a_misspelt_word_is_supported_by_the_word_it_stands_for() -> None:
    # tesing (df 0) is one edit from the indexed testing; the candidate holds testing, so tesing
    # counts as found (its weight stays that of a df-0 term), and it is no out-of-vocabulary name.
    frequencies = NeighbourFrequencies(20, {"testing": 4, "坏了": 2})
    support = lexical_support("tesing里的包坏了", ["testing 里的软件包"], frequencies)
    row = next(t for t in support.terms if t.term == "tesing")
    assert (row.spelled_as, row.supported, row.oov, row.df) == (["testing"], True, False, 0)
    assert support.oov_names() == [] and support.score == support.term_share
    assert "found: tesing (as testing)" in support.explain()


def test_ordinary_english_words_of_a_pasted_message_are_left_out() -> None:
    # unexpected, operator: common English in a run of Latin words, in no chunk → no names, and left
    # out of the share (recorded as ordinary words); the rest of the question is supported: share 1.
    query = "脚本换成sh就报 [: unexpected operator"
    candidates = ["bash 脚本换成 sh 就报错"]
    table = {"sh": 3, "脚本": 4, "换成": 2}
    support = lexical_support(query, candidates, NeighbourFrequencies(10, table))
    assert support.ordinary_words == ["unexpected", "operator"] and support.oov_names() == []
    assert [t.term for t in support.terms] == ["脚本", "换成", "sh"] and support.score == 1.0
    assert support.explain().endswith(
        "; ordinary English words left out (in no chunk; common English in a run of Latin words, so "
        "no name): unexpected, operator"
    )
    # A message word the KB holds (unexpected, df 1) is a term like any other: these candidates lack
    # it, so the share is (0.893818 + 1.481605 + 1.145132) / (… + idf(1) 1.99243) = 0.638593.
    held = lexical_support(query, candidates, NeighbourFrequencies(10, {**table, "unexpected": 1}))
    assert held.ordinary_words == ["operator"] and held.oov_names() == []
    assert held.score == pytest.approx(3.520555 / 5.512985, abs=1e-6)


@pytest.mark.parametrize(
    "query, table, names, ordinary",
    [
        # A rare word in the pasted run is a name the KB never mentions: it still vetoes.
        ("wireguard connection refused 怎么办", {}, ["wireguard"], ["connection", "refused"]),
        # A message word the KB holds is a term like any other (supported or not), never left out.
        ("连接数据库 connection refused 了", {"connection": 2, "数据库": 3}, [], ["refused"]),
        # A common word alone between CJK characters names what is asked: still a veto.
        ("screen怎么恢复会话", {"会话": 1}, ["screen"], []),
        # Identifiers are never ordinary (centos7); yum (Zipf 3.5) in a run is.
        ("centos7 yum update 报错", {"报错": 1}, ["centos7"], ["yum", "update"]),
    ],
)
def test_ordinary_words_and_names_in_one_query(
    query: str, table: dict[str, int], names: list[str], ordinary: list[str]
) -> None:
    support = lexical_support(query, ["任意候选文本"], NeighbourFrequencies(20, table))
    assert support.oov_names() == names and support.ordinary_words == ordinary
    assert support.score == (0.0 if names else support.term_share)


def test_a_question_that_is_only_an_error_message() -> None:
    # Nothing but a pasted message and question words: no content term left, so lexical support is
    # n/a and says why (refusal does not judge it).
    support = lexical_support("connection refused 怎么办", ["x"], TableFrequencies(20, {}))
    assert support.score is None and support.ordinary_words == ["connection", "refused"]
    assert support.note == "the query has no content term besides ordinary English words"
    # With markup too, both are named.
    both = lexical_support("<br> connection refused 怎么办", ["x"], TableFrequencies(20, {}))
    assert both.note == "the query has no content term besides markup and ordinary English words"
    # Without a CJK character nothing is singled out: the words are the query's terms.
    english = lexical_support("connection refused", ["x"], TableFrequencies(20, {}))
    assert english.ordinary_words == [] and english.score == 0.0 and english.oov_names() == []
