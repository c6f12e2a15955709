"""Which words of a query are ordinary English words (`pipeline.lexical_support.ordinary_words`): common English
(wordfreq, the real small list) standing in a run of Latin words of a CJK query, never a name that
stands alone, an identifier, or a rare word such as a tool's name."""

from __future__ import annotations

import pytest

from ragtriage.pipeline.lexical_support import ORDINARY_ZIPF, english_runs, ordinary_words, zipf_frequency


@pytest.mark.parametrize(
    ("query", "ordinary"),
    [
        # Pasted error messages and log lines.
        ("apt 报错 E: Unable to locate package 怎么办", {"e", "unable", "locate", "package"}),
        ("脚本跑的时候提示 [: unexpected operator 是什么意思", {"unexpected", "operator"}),
        ("连接数据库 connection refused 了", {"connection", "refused"}),
        ("ssh 登录提示 Permission denied (publickey)", {"permission", "denied"}),
        # A rare word in the same run is a name: wireguard stays, the message words go.
        ("wireguard connection refused 怎么办", {"connection", "refused"}),
        ("nginx kubernetes 怎么配合", set()),  # two names in a run, both rare
        # A word alone between CJK characters names what is asked, however common in English.
        ("screen怎么用", set()),
        ("debian官方logo是谁设计的", set()),
        ("怎么把win启动项找回来", set()),
        ("apt 怎么换源", set()),
        # A common word in a run of names-of-things is read as English (`win mac linux` is no message,
        # but each word is common English and the KB spells them out where it covers them).
        ("移动硬盘要在win mac linux上都能读写", {"win", "mac", "linux"}),
        # Also standing alone elsewhere in the query: a name.
        ("screen 断开后 screen session 怎么恢复", {"session"}),
        # Identifiers (a digit, `_`, `.`) are never ordinary words. yum (Zipf 3.5) in a run reads as
        # English: the cost of the cut (docs/benchmarks.md); alone it is a name.
        ("centos7 yum update 报错", {"yum", "update"}),
        ("centos7上用yum回滚", set()),
        ("怎么生成 zh_CN.UTF-8 locale 文件", set()),
        # Full-width text is normalized first (NFKC).
        ("连接提示 ｃｏｎｎｅｃｔｉｏｎ ｒｅｆｕｓｅｄ", {"connection", "refused"}),
        # No CJK character: every word is Latin, a run says nothing about pasting.
        ("E: Unable to locate package", set()),
        ("connection refused", set()),
        ("", set()),
    ],
)
def test_ordinary_words(query: str, ordinary: set[str]) -> None:
    assert ordinary_words(query) == ordinary


def test_runs_are_stretches_between_cjk_characters() -> None:
    in_runs, alone = english_runs("apt-get 报错 E: Unable to locate、dpkg 坏了")
    # `apt-get` is one piece (a run of one), `E: Unable to locate` four (the analyzer drops the stop
    # word to); 、 ends a run.
    assert alone == {"apt", "get", "dpkg"} and in_runs == {"e", "unable", "locate"}


def test_candidates_limit_the_lookups() -> None:
    query = "连接数据库 connection refused 了"
    assert ordinary_words(query, {"refused"}) == {"refused"}
    assert ordinary_words(query, set()) == set()


def test_the_cut_separates_message_words_from_tool_names() -> None:
    # The real wordfreq small list (Zipf ≥ 3 or 0): common English above the cut, tool names below.
    for word in ["unexpected", "operator", "unable", "locate", "refused", "connection", "make", "screen"]:
        assert zipf_frequency(word) >= ORDINARY_ZIPF, word
    for word in ["wireguard", "nginx", "kubernetes", "ufw", "systemctl", "qdrant", "debian"]:
        assert zipf_frequency(word) < ORDINARY_ZIPF, word
    # A higher cut makes fewer words ordinary.
    assert ordinary_words("连接数据库 connection refused 了", cut=7.0) == set()
