"""KB loaders: Markdown (front matter, slugs), HTML (anchors, DocBook navigation), plain text, bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragtriage.kb.document import DocumentLoadError, LoadedDocument
from ragtriage.kb.loaders import load_document
from ragtriage.kb.text import github_slug
from tests.conftest import TEST_DATA_DIR

KB_BAD = TEST_DATA_DIR / "kb_bad"


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _section_map(document: LoadedDocument) -> dict[str, tuple[list[str], list[str]]]:
    """anchor → (heading path, block texts)."""
    return {str(s.anchor): (s.heading_path, [b.text for b in s.blocks]) for s in document.sections}


# ---------------------------------------------------------------- Markdown

MARKDOWN = """---
doc_id: pay/refund
title: 退款政策
product_line: 支付
version: v2.3
updated_at: 2024-05-01
status: ready
tags: [退款, 售后]
owner: 客服部
---
导语在第一个标题之前。

# 退款政策

## 退款 政策（2024）?

退款在**七个**工作日内到账。
第二行接着写。

- 第一项
- 第二项 `code`

```bash
apt-get install foo
```

## FAQ

问一。

## FAQ

问二。

### Hello, World!

> 引用的话。
"""


def test_markdown_front_matter_fills_every_metadata_field(tmp_path: Path) -> None:
    document = load_document(_write(tmp_path, "refund.md", MARKDOWN))

    meta = document.meta
    assert (meta.doc_id, meta.title, meta.product_line, meta.doc_version) == (
        "pay/refund",
        "退款政策",
        "支付",
        "v2.3",
    )
    assert meta.updated_at == "2024-05-01"
    assert meta.status == "ready"
    assert meta.tags == ["退款", "售后"]
    assert meta.extra == {"owner": "客服部"}
    assert document.title == "退款政策"


def test_markdown_anchors_are_github_slugs_with_chinese_kept_and_repeats_numbered(tmp_path: Path) -> None:
    document = load_document(_write(tmp_path, "refund.md", MARKDOWN))

    sections = _section_map(document)
    assert list(sections) == ["None", "退款-政策2024", "faq", "faq-1", "hello-world"]
    assert sections["退款-政策2024"][0] == ["退款政策", "退款 政策（2024）?"]
    assert sections["hello-world"][0] == ["退款政策", "FAQ", "Hello, World!"]
    assert sections["None"] == (["退款政策"], ["导语在第一个标题之前。"])


def test_markdown_blocks_keep_paragraphs_list_items_and_code(tmp_path: Path) -> None:
    document = load_document(_write(tmp_path, "refund.md", MARKDOWN))

    blocks = next(s.blocks for s in document.sections if s.anchor == "退款-政策2024")
    assert [(b.kind, b.text) for b in blocks] == [
        ("paragraph", "退款在七个工作日内到账。第二行接着写。"),
        ("list_item", "- 第一项"),
        ("list_item", "- 第二项 code"),
        ("code", "apt-get install foo"),
    ]
    quote = next(s.blocks for s in document.sections if s.anchor == "hello-world")
    assert [(b.kind, b.text) for b in quote] == [("quote", "引用的话。")]


def test_markdown_title_falls_back_to_first_h1_then_file_stem(tmp_path: Path) -> None:
    with_h1 = load_document(_write(tmp_path, "a.md", "# 安装指南\n\n步骤一。\n"))
    without = load_document(_write(tmp_path, "install-notes.md", "## 步骤\n\n步骤一。\n"))

    assert with_h1.title == "安装指南"
    assert with_h1.sections[0].heading_path == ["安装指南"]
    assert with_h1.sections[0].anchor == "安装指南"
    assert without.title == "install-notes"
    assert without.sections[0].heading_path == ["install-notes", "步骤"]


@pytest.mark.parametrize(
    "heading, slug",
    [
        ("退款 政策（2024）?", "退款-政策2024"),
        ("Hello, World!", "hello-world"),
        ("API_v2 -- 说明", "api_v2----说明"),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


@pytest.mark.parametrize(
    "text, line, reason",
    [
        ("---\ntitle: a\nproduct_line: [pay\nstatus: published\n---\n# A\n\nx\n", 4, "not valid YAML"),
        ("---\ntitle: a\n# never closed\n\nbody\n", 1, "never closed"),
        ("---\ntitle: a\nstatus: draft\n---\nbody\n", 3, "status 'draft'"),
        ("---\n- a\n- b\n---\nbody\n", 2, "key: value pairs"),
        ("---\nupdated_at: last tuesday\n---\nbody\n", 2, "not an ISO date"),
    ],
)
def test_broken_front_matter_names_file_and_line(tmp_path: Path, text: str, line: int, reason: str) -> None:
    path = _write(tmp_path, "broken.md", text)

    with pytest.raises(DocumentLoadError) as caught:
        load_document(path)

    assert caught.value.line == line
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert caught.value.fix


# ---------------------------------------------------------------- HTML

DOCBOOK = """<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "x.dtd"><html xmlns="http://www.w3.org/1999/xhtml">
<head><title>第 8 章 软件包管理工具</title></head><body>
<div class="navheader"><table summary="Navigation header"><tr><th>第 8 章 软件包管理工具</th></tr>
<tr><td><a accesskey="p" href="a.html"><img src="prev.png" alt="上一页" /></a></td></tr></table><hr /></div>
<div class="chapter"><div class="titlepage"><div><div>
<h1 class="title"><a id="pkgtools"/>第 8 章 软件包管理工具</h1>
</div></div></div><div class="toc"><p><strong>目录</strong></p>
<dl class="toc"><dt><a href="#dpkg">8.1.1. dpkg</a></dt></dl></div>
<div class="section"><div class="titlepage"><div><div>
<h2 class="title"><a id="pkgprogs"></a>8.1. 有哪些工具？</h2>
</div></div></div><p>
有多个工具可以管理 Debian
软件包，从图形界面到<span class="emphasis"><em>底层</em></span>工具。
</p>
<div class="section"><h3 class="title"><a id="dpkg"></a>8.1.1. dpkg</h3><p>常用选项：</p>
<div class="itemizedlist"><ul><li><p>列出所有选项：<code class="literal">dpkg --help</code>。</p></li>
<li><p>安装软件包。</p><p>第二段。</p></li></ul></div>
<pre class="screen"> apt-get update      -&gt;  apt update
 apt-get upgrade     -&gt;  apt upgrade</pre></div></div></div>
<div class="navfooter"><hr /><table summary="Navigation footer"><tr><td>Debian 常见问题</td>
<td><a accesskey="h" href="index.html"><img src="home.png" alt="起始页" /></a></td>
<td>第 9 章 保持最新</td></tr></table></div>
</body></html>
"""


def test_docbook_html_anchors_come_from_inner_a_ids_and_navigation_is_dropped(tmp_path: Path) -> None:
    document = load_document(_write(tmp_path, "pkgtools.zh-cn.html", DOCBOOK))

    assert document.title == "第 8 章 软件包管理工具"
    sections = _section_map(document)
    assert list(sections) == ["pkgprogs", "dpkg"]
    assert sections["pkgprogs"] == (
        ["第 8 章 软件包管理工具", "8.1. 有哪些工具？"],
        ["有多个工具可以管理 Debian 软件包，从图形界面到底层工具。"],
    )
    heading_path, blocks = sections["dpkg"]
    assert heading_path == ["第 8 章 软件包管理工具", "8.1. 有哪些工具？", "8.1.1. dpkg"]
    assert blocks[:3] == ["常用选项：", "- 列出所有选项：dpkg --help。", "- 安装软件包。"]
    assert blocks[-1] == " apt-get update      ->  apt update\n apt-get upgrade     ->  apt upgrade"
    everything = " ".join(b.text for s in document.sections for b in s.blocks)
    for navigation_text in ("上一页", "起始页", "目录", "第 9 章 保持最新", "Debian 常见问题"):
        assert navigation_text not in everything
    assert document.warnings == []


def test_html_anchor_sources_heading_id_preceding_a_name_and_section_id(tmp_path: Path) -> None:
    html = """<html><head><title>T</title></head><body>
    <h2 id="own">自带 id</h2><p>一。</p>
    <a name="before"></a><h2>前面的锚点</h2><p>二。</p>
    <section id="wrapped"><h2>外层 section</h2><p>三。</p></section>
    <h2>没有锚点</h2><p>四。</p>
    </body></html>"""
    document = load_document(_write(tmp_path, "anchors.html", html))

    assert [s.anchor for s in document.sections] == ["own", "before", "wrapped", None]


def test_html_without_headings_loads_as_one_section_with_a_warning(tmp_path: Path) -> None:
    titled = load_document(KB_BAD / "no_headings.html")
    untitled = load_document(
        _write(tmp_path, "terms-2024.html", "<html><body><p>只有正文。</p></body></html>")
    )

    assert titled.title == "服务条款"
    assert [s.heading_path for s in titled.sections] == [["服务条款"]]
    assert [b.text for b in titled.sections[0].blocks] == [
        "本服务条款适用于所有用户。",
        "如有疑问请联系客服。",
    ]
    assert "no h1–h6 headings" in titled.warnings[0] and "<title>" in titled.warnings[0]
    assert untitled.title == "terms-2024"
    assert "file name" in untitled.warnings[0]


def test_html_table_becomes_one_block_of_rows(tmp_path: Path) -> None:
    html = (
        "<h2 id='t'>表</h2><table><tr><th>软件包</th><th>大小</th></tr>"
        "<tr><td>grub</td><td>12</td></tr></table>"
    )
    document = load_document(_write(tmp_path, "t.html", html))

    assert [(b.kind, b.text) for b in document.sections[0].blocks] == [("table", "软件包 | 大小\ngrub | 12")]


def test_html_in_gb18030_with_a_charset_declaration(tmp_path: Path) -> None:
    html = (
        '<html><head><meta charset="gbk"><title>发票</title></head>'
        "<body><h1>发票</h1><p>红字发票。</p></body></html>"
    )
    document = load_document(_write(tmp_path, "gbk.html", html.encode("gb18030")))

    assert document.title == "发票"
    assert document.sections[0].blocks[0].text == "红字发票。"


# ---------------------------------------------------------------- plain text

TEXT = "退款说明\n\n退款在七个工作日内到账。\n如未到账请联系客服。\n\n第二段。"


@pytest.mark.parametrize(
    "encoded",
    [
        TEXT.encode("utf-8"),
        b"\xef\xbb\xbf" + TEXT.encode("utf-8"),
        TEXT.encode("gb18030"),
        TEXT.encode("utf-16"),
    ],
    ids=["utf-8", "utf-8-bom", "gb18030", "utf-16-bom"],
)
def test_text_paragraphs_and_title_line_in_every_supported_encoding(tmp_path: Path, encoded: bytes) -> None:
    document = load_document(_write(tmp_path, "refund.txt", encoded))

    assert document.title == "退款说明"
    assert [s.heading_path for s in document.sections] == [["退款说明"]]
    assert [b.text for b in document.sections[0].blocks] == [
        "退款在七个工作日内到账。如未到账请联系客服。",
        "第二段。",
    ]


def test_text_whose_first_line_is_a_sentence_is_titled_by_file_name(tmp_path: Path) -> None:
    document = load_document(_write(tmp_path, "notes.txt", "这是一句话。\n\n另一句话。"))

    assert document.title == "notes"
    assert len(document.sections[0].blocks) == 2


# ---------------------------------------------------------------- bad files


@pytest.mark.parametrize(
    "name, reason, line",
    [
        ("empty.md", "empty file", None),
        ("binary.txt", "binary file", None),
        ("undecodable.txt", "cannot decode byte 80", 1),
        ("broken_front_matter.md", "front matter is not valid YAML", 4),
    ],
)
def test_bad_files_raise_one_line_naming_the_file_and_the_fix(
    name: str, reason: str, line: int | None
) -> None:
    path = KB_BAD / name

    with pytest.raises(DocumentLoadError) as caught:
        load_document(path)

    error = caught.value
    assert reason in error.reason
    assert error.line == line
    assert str(path) in str(error) and "fix: " in str(error)
    assert "\n" not in str(error)


def test_whitespace_only_and_markup_only_files_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(DocumentLoadError, match="empty file"):
        load_document(_write(tmp_path, "blank.txt", "  \n\n \t\n"))
    with pytest.raises(DocumentLoadError, match="no text after parsing"):
        load_document(_write(tmp_path, "only-meta.md", "---\ntitle: x\n---\n"))
    with pytest.raises(DocumentLoadError, match="unsupported file type"):
        load_document(_write(tmp_path, "data.csv", "a,b\n"))


def test_utf16_mark_followed_by_garbage_is_refused_as_binary(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(b"\xff\xfe\xfa\x80\x81" * 30)
    with pytest.raises(DocumentLoadError, match="byte-order mark but decodes to unassigned"):
        load_document(path)


def test_real_utf16_text_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "y.txt"
    path.write_bytes("报销流程\n\n先填写报销单，再提交审批。".encode("utf-16"))
    assert "报销单" in " ".join(
        block.text for section in load_document(path).sections for block in section.blocks
    )
