"""HTML footnotes join the section that cites them, in every common markup (real producers where installable)."""

from __future__ import annotations

from pathlib import Path

import markdown
import pytest
from docutils.core import publish_string
from markdown_it import MarkdownIt
from mdit_py_plugins.footnote import footnote_plugin

from ragtriage.kb.chunking import ChunkingParams, chunk_document
from ragtriage.kb.document import LoadedDocument
from ragtriage.kb.loaders import load_document

MD_SOURCE = "# 标题\n\n## 第一节\n\n正文一[^a]。\n\n## 第二节\n\n正文二。\n\n[^a]: 脚注甲。\n"
RST_SOURCE = (
    "标题\n====\n\n第一节\n------\n\n正文一 [#a]_。\n\n第二节\n------\n\n正文二。\n\n.. [#a] 脚注甲。\n"
)

# The Debian FAQ's DocBook output, cut down: the footnotes block follows the page's last section, and
# one footnote is cited from a paragraph that holds nothing but its marker.
DOCBOOK = """<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>第 11 章 定制</title></head><body>
<div class="chapter"><div class="titlepage"><h1 class="title"><a id="customizing"/>第 11 章 定制</h1></div>
<div class="section"><div class="titlepage"><h2 class="title"><a id="booting"></a>11.9. 启动</h2></div>
<p>传统的 System-V 风格的 init 也受支持。<a href="#ftn.idm1870" class="footnote" id="idm1870"><sup
class="footnote">[6]</sup></a></p><p>
<a href="#ftn.idm947" class="footnote" id="idm947"><sup class="footnote">[7]</sup></a>
</p></div>
<div class="section"><div class="titlepage"><h2 class="title"><a id="diverse"></a>11.11. 多样性</h2></div>
<p>使用 update-alternatives。</p><pre class="screen">update-alternatives --display x-window-manager</pre></div>
<div class="footnotes"><br /><hr width="100" align="left" />
<div id="ftn.idm1870" class="footnote"><p><a href="#idm1870" class="para"><sup class="para">[6] </sup></a>
2014 年，Debian 将默认的 init 系统改为了 systemd。</p></div>
<div id="ftn.idm947" class="footnote"><p><a href="#idm947" class="para"><sup class="para">[7] </sup></a>
历史上，软件包曾按发布版本保存。</p></div></div></div>
<div class="navfooter"><table><tr><td>上一页</td></tr></table></div></body></html>
"""

# pandoc 3 (HTML5), written by hand: pandoc itself is not a Python package.
PANDOC = """<html><body><h2 id="first">第一节</h2>
<p>正文一<a href="#fn1" class="footnote-ref" id="fnref1" role="doc-noteref"><sup>1</sup></a>。</p>
<h2 id="second">第二节</h2><p>正文二。</p>
<section id="footnotes" class="footnotes footnotes-end-of-document" role="doc-endnotes"><hr />
<ol><li id="fn1"><p>脚注甲。<a href="#fnref1" class="footnote-back" role="doc-backlink">↩︎</a></p></li></ol>
</section></body></html>"""

# pandoc's EPUB 3 writer: one <aside epub:type="footnote"> per note.
PANDOC_EPUB = """<html><body><h2 id="first">第一节</h2>
<p>正文一<a href="#fn1" class="footnote-ref" id="fnref1" epub:type="noteref">1</a>。</p>
<h2 id="second">第二节</h2><p>正文二。</p>
<aside id="fn1" class="footnote" epub:type="footnote"><p>脚注甲。<a href="#fnref1"
class="footnote-back" role="doc-backlink">↩︎</a></p></aside></body></html>"""

# MediaWiki: a <sup class="reference"> marker and an <ol class="references"> list.
MEDIAWIKI = """<html><body><h2><span class="mw-headline" id="first">第一节</span></h2>
<p>正文一<sup id="cite_ref-1" class="reference"><a href="#cite_note-1">[1]</a></sup>。</p>
<h2><span class="mw-headline" id="second">第二节</span></h2><p>正文二。</p>
<div class="reflist"><ol class="references"><li id="cite_note-1"><span class="mw-cite-backlink"><b><a
href="#cite_ref-1">^</a></b></span> <span class="reference-text">脚注甲。</span></li></ol></div>
</body></html>"""

# Word's "Save as web page": named anchors on both sides, no class on the marker.
WORD = """<html><body><h2 id="first">第一节</h2>
<p class="MsoNormal">正文一<a style="mso-footnote-id:ftn1" href="#_ftn1" name="_ftnref1"><span
class="MsoFootnoteReference">[1]</span></a>。</p>
<h2 id="second">第二节</h2><p class="MsoNormal">正文二。</p>
<div style="mso-element:footnote-list"><br clear="all"><hr align="left" size="1" width="33%">
<div style="mso-element:footnote" id="ftn1"><p class="MsoFootnoteText"><a style="mso-footnote-id:ftn1"
href="#_ftnref1" name="_ftn1"><span class="MsoFootnoteReference">[1]</span></a> 脚注甲。</p></div></div>
</body></html>"""


def _write(tmp_path: Path, name: str, content: str) -> Path:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return path


def _blocks_by_heading(document: LoadedDocument) -> dict[str, list[str]]:
    return {section.heading: [block.text for block in section.blocks] for section in document.sections}


def test_docbook_footnotes_go_after_the_citing_paragraph_not_into_the_last_section(tmp_path: Path) -> None:
    document = load_document(_write(tmp_path, "customizing.zh-cn.html", DOCBOOK))

    sections = {s.anchor: [b.text for b in s.blocks] for s in document.sections}
    assert sections["booting"] == [
        "传统的 System-V 风格的 init 也受支持。[6]",
        "[6] 2014 年，Debian 将默认的 init 系统改为了 systemd。",
        # The marker-only paragraph is not kept as a lone "[7]" before the footnote that repeats it.
        "[7] 历史上，软件包曾按发布版本保存。",
    ]
    assert sections["diverse"] == [
        "使用 update-alternatives。",
        "update-alternatives --display x-window-manager",
    ]


def _python_markdown() -> str:
    return markdown.markdown(MD_SOURCE, extensions=["footnotes"])


def _markdown_it() -> str:
    return MarkdownIt().use(footnote_plugin).render(MD_SOURCE)


def _docutils(writer: str) -> str:
    return publish_string(RST_SOURCE, writer=writer, settings_overrides={"output_encoding": "unicode"})


@pytest.mark.parametrize(
    "produce, first_section",
    [
        pytest.param(_python_markdown, ["正文一1。", "[1] 脚注甲。"], id="python-markdown"),
        pytest.param(_markdown_it, ["正文一[1]。", "[1] 脚注甲。"], id="markdown-it"),
        pytest.param(lambda: _docutils("html5"), ["正文一 [1]。", "[1] 脚注甲。"], id="docutils-html5-aside"),
        pytest.param(
            lambda: _docutils("html4"), ["正文一 [1]。", "[1] | 脚注甲。"], id="docutils-html4-table"
        ),
        pytest.param(lambda: PANDOC, ["正文一1。", "[1] 脚注甲。"], id="pandoc-html5"),
        pytest.param(lambda: PANDOC_EPUB, ["正文一1。", "[1] 脚注甲。"], id="pandoc-epub-aside"),
        pytest.param(lambda: MEDIAWIKI, ["正文一[1]。", "[1] 脚注甲。"], id="mediawiki"),
        pytest.param(lambda: WORD, ["正文一[1]。", "[1] 脚注甲。"], id="word"),
    ],
)
def test_every_footnote_markup_joins_the_citing_section(
    tmp_path: Path, produce: object, first_section: list[str]
) -> None:
    assert callable(produce)
    document = load_document(_write(tmp_path, "notes.html", str(produce())))

    assert _blocks_by_heading(document) == {"第一节": first_section, "第二节": ["正文二。"]}


def test_a_footnote_cited_from_two_sections_goes_to_the_first(tmp_path: Path) -> None:
    html = """<h2 id="a">甲</h2><p>一<a href="#fn1" class="footnote-ref" id="r1"><sup>1</sup></a>。</p>
    <h2 id="b">乙</h2><p>二<a href="#fn1" class="footnote-ref" id="r2"><sup>1</sup></a>。</p>
    <h2 id="c">丙</h2><p>三。</p>
    <section class="footnotes"><ol><li id="fn1"><p>共用的脚注。</p></li></ol></section>"""
    document = load_document(_write(tmp_path, "shared.html", html))

    assert {s.anchor: [b.text for b in s.blocks] for s in document.sections} == {
        "a": ["一1。", "[1] 共用的脚注。"],
        "b": ["二1。"],
        "c": ["三。"],
    }


def test_unreferenced_footnotes_and_ones_cited_only_from_navigation_stay_where_they_were(
    tmp_path: Path,
) -> None:
    html = """<nav><a href="#fn2" class="footnote-ref"><sup>2</sup></a></nav>
    <h2 id="a">甲</h2><p>一。</p><h2 id="b">乙</h2><p>二。</p>
    <section class="footnotes"><ol><li id="fn1"><p>没人引用。</p></li><li id="fn2"><p>只在导航里引用。</p></li></ol>
    </section>"""
    document = load_document(_write(tmp_path, "orphans.html", html))

    assert {s.anchor: [b.text for b in s.blocks] for s in document.sections} == {
        "a": ["一。"],
        "b": ["二。", "- 没人引用。", "- 只在导航里引用。"],
    }


def test_section_links_and_a_link_to_the_whole_notes_list_are_not_footnotes(tmp_path: Path) -> None:
    html = """<h2 id="a">甲</h2><p>见<a href="#b"><sup>乙节</sup></a>和<a href="#footnotes">注释</a>。</p>
    <p>另见<a href="#note-b">乙的说明</a>。</p>
    <h2 id="b">乙</h2><p id="note-b">二。</p>
    <section id="footnotes" class="footnotes"><ol><li id="fn1"><p>脚注。</p></li></ol></section>"""
    document = load_document(_write(tmp_path, "links.html", html))

    assert {s.anchor: [b.text for b in s.blocks] for s in document.sections} == {
        "a": ["见乙节和注释。", "另见乙的说明。"],
        "b": ["二。", "- 脚注。"],
    }


def test_footnote_placed_before_its_marker_moves_down_to_it(tmp_path: Path) -> None:
    html = """<h2 id="a">甲</h2><aside class="footnote" id="f1" role="doc-footnote"><p>先写的脚注。</p></aside>
    <p>一。</p><h2 id="b">乙</h2><p>二<a href="#f1" role="doc-noteref">[1]</a>。</p>"""
    document = load_document(_write(tmp_path, "early.html", html))

    assert {s.anchor: [b.text for b in s.blocks] for s in document.sections} == {
        "a": ["一。"],
        "b": ["二[1]。", "[1] 先写的脚注。"],
    }


def test_footnotes_cited_from_a_list_item_or_a_heading_are_not_list_items(tmp_path: Path) -> None:
    html = """<h2 id="a">甲<a href="#fn1" class="footnote-ref"><sup>1</sup></a></h2>
    <ul><li><p>第一项<a href="#fn2" class="footnote-ref"><sup>2</sup></a></p></li><li>第二项</li></ul>
    <h2 id="b">乙</h2><p>二。</p>
    <section class="footnotes"><ol><li id="fn1">标题的脚注。</li><li id="fn2"><p>列表的脚注。</p></li></ol></section>"""
    document = load_document(_write(tmp_path, "lists.html", html))

    assert {s.anchor: [b.text for b in s.blocks] for s in document.sections} == {
        "a": ["[1] 标题的脚注。", "- 第一项2", "[2] 列表的脚注。", "- 第二项"],
        "b": ["二。"],
    }


def test_footnotes_citing_only_each_other_are_kept(tmp_path: Path) -> None:
    html = """<h2 id="a">甲</h2><p>一。</p><h2 id="b">乙</h2><p>二。</p>
    <div class="footnotes"><div class="footnote" id="ftn.1"><p>甲注，见<a href="#ftn.2">[2]</a></p></div>
    <div class="footnote" id="ftn.2"><p>乙注，见<a href="#ftn.1">[1]</a></p></div></div>"""
    document = load_document(_write(tmp_path, "cycle.html", html))

    everything = [block.text for section in document.sections for block in section.blocks]
    assert any("甲注" in text for text in everything) and any("乙注" in text for text in everything)


def test_chunks_carry_the_footnote_under_the_citing_anchor(tmp_path: Path) -> None:
    document = load_document(_write(tmp_path, "customizing.zh-cn.html", DOCBOOK))

    chunks = chunk_document(document, doc_id="faq/customizing.zh-cn", params=ChunkingParams())

    by_anchor = {chunk.anchor: chunk.content for chunk in chunks}
    assert list(by_anchor) == ["booting", "diverse"]
    assert "systemd" in by_anchor["booting"] and "历史上" in by_anchor["booting"]
    assert "systemd" not in by_anchor["diverse"] and "[6]" not in by_anchor["diverse"]


def test_two_footnotes_with_the_same_text_cited_together_are_both_kept(tmp_path: Path) -> None:
    html = """<h2 id="a">甲</h2><p>一<a href="#fn1" class="footnote-ref"><sup>1</sup></a>二<a href="#fn2"
    class="footnote-ref"><sup>2</sup></a>。</p><h2 id="b">乙</h2><p>三。</p>
    <section class="footnotes"><ol><li id="fn1"><p>同上。</p></li><li id="fn2"><p>同上。</p></li></ol></section>"""
    document = load_document(_write(tmp_path, "twins.html", html))

    assert [b.text for b in document.sections[0].blocks] == ["一1二2。", "[1] 同上。", "[2] 同上。"]
