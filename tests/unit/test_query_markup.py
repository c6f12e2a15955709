"""Which words of a query are markup (`pipeline.lexical_support.markup_words`): exactly the tag, entity, URL-scheme,
file-extension and code-fence words, never the names a question is about."""

from __future__ import annotations

import pytest

from ragtriage.pipeline.lexical_support import markup_words


@pytest.mark.parametrize(
    ("query", "markup"),
    [
        ("表格里怎么用<br>换行", {"br"}),
        ("表格里怎么用<BR/>换行", {"br"}),  # case and a self-closing tag
        ("</td>后面多了空格", {"td"}),
        ('<img src="a.png" alt="图">图片不显示', {"img", "src", "png", "alt"}),
        ("&nbsp;空格怎么打", {"nbsp"}),
        ("&nbsp空格怎么去掉", {"nbsp"}),  # the usual entities without their semicolon
        ("&#160;是什么字符", set()),  # a numeric entity has no Latin word
        ("config.yaml文件放在哪", {"yaml"}),
        ("报销单.xlsx怎么提交", {"xlsx"}),  # a Chinese file name
        ("README.md怎么写", {"md"}),
        ("https://deb.debian.org打不开", {"https", "org"}),
        ("```bash 代码块怎么高亮", {"bash"}),
        ("**加粗**和# 标题怎么写", set()),  # Markdown emphasis and headings yield no word
        # A script element is code throughout (the HTML loader drops it with its contents).
        ('出差回来发票多久内要交 <script>alert("q")</script>', {"script", "alert", "q"}),
        ("[b]加粗[/b]和[color=red]红字[/color]怎么打", {"b", "color", "red"}),  # BBCode
        # Rich console tags; the text between them (x, y) stays prose.
        ("[bold]x[/bold] 年假 [link=http://x]y[/link]", {"bold", "link", "http"}),
    ],
)
def test_markup(query: str, markup: set[str]) -> None:
    assert markup_words(query) == markup


@pytest.mark.parametrize(
    "query",
    [
        "wsl里怎么装debian",  # plain names
        "用`systemctl`重启服务",  # inline code names what is asked about
        "a<b并且c>d怎么写",  # comparisons are no tags
        "makefile里的$@ $< $^分别是啥意思",
        "AT&T的网络",  # & without an entity name
        "LANG=zh_CN.UTF-8 每一段代表啥",  # an encoding, not an extension
        "v2.4.0有什么新功能",  # a version
        ".bashrc怎么改",  # a dot file: its name is the name
        "table标签<table>怎么加边框",  # also written as prose: a word, not only markup
        "[文档]在哪看",  # a Markdown link's text, no BBCode name
        "[ -f x ]是什么意思",  # a shell test
        "报错[: unexpected operator",  # an error message is no markup
    ],
)
def test_no_markup(query: str) -> None:
    assert markup_words(query) == set()
