"""The Debian Reference PDF (zh-cn, 251 pages, from its .deb): outline → heading paths, Chinese intact."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.kb.chunking import ChunkingParams, chunk_document
from ragtriage.kb.loaders import load_document
from ragtriage.kb.types import ChunkRecord
from tests.conftest import SHARED_DIR

DEBS_DIR = SHARED_DIR / "data" / "debian-docs-zh"
TITLE = "Debian 参考手册"
# Per-character spacing (`对 于 使 用`), replacement characters and private-use code points.
SPACED_CJK = re.compile(r"(?:[\u4e00-\u9fff] ){3,}[\u4e00-\u9fff]")
MOJIBAKE = re.compile(r"[\ufffd\ue000-\uf8ff]|[ÃÂ][\x80-\xbf]")
RUNNING_HEADER = re.compile(r"Debian 参考手册 (?:\d+ / \d+|[ivxlc]+)\b")

pytestmark = [
    pytest.mark.realdata,
    pytest.mark.skipif(
        not any(DEBS_DIR.glob("debian-reference-zh-cn_*.deb")),
        reason=f"real data absent: no debian-reference-zh-cn_*.deb in {DEBS_DIR} "
        "(`apt-get download debian-reference-zh-cn` puts it there)",
    ),
]


@pytest.fixture(scope="module")
def pdf_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragtriage_demo.debian_docs import SOURCES, extract_source, find_deb

    [source] = [s for s in SOURCES if s.out_subdir == "reference-pdf"]
    out = tmp_path_factory.mktemp("debian")
    report = extract_source(find_deb(DEBS_DIR, source.package), source, out)
    return Path(report["dir"]) / "debian-reference.zh-cn.pdf"


@pytest.fixture(scope="module")
def chunks(pdf_path: Path) -> list[ChunkRecord]:
    document = load_document(pdf_path)
    assert (document.title, document.format, document.warnings) == (TITLE, "pdf", [])
    return chunk_document(
        document,
        doc_id="reference-pdf/debian-reference.zh-cn",
        params=ChunkingParams(),
        kb="default",
        version=1,
        status="published",
        updated_at=None,
    )


def _outline_paths(pdf_path: Path) -> list[tuple[str, ...]]:
    """Every outline entry as the path of titles from the top, read straight from the PDF."""
    pdf = pdfium.PdfDocument(str(pdf_path))
    stack: list[str] = []
    paths = []
    for item in pdf.get_toc(max_depth=16):
        del stack[item.level :]
        stack.append(" ".join(item.get_title().split()))
        paths.append(tuple(stack))
    pdf.close()
    return paths


def test_heading_paths_follow_the_pdf_outline(pdf_path: Path, chunks: list[ChunkRecord]) -> None:
    outline = _outline_paths(pdf_path)
    assert len(outline) > 400

    chunk_paths = {tuple(chunk.heading_path[1:]) for chunk in chunks if len(chunk.heading_path) > 1}
    assert all(chunk.heading_path[0] == TITLE for chunk in chunks)
    assert chunk_paths <= set(outline), f"paths not in the outline: {sorted(chunk_paths - set(outline))[:5]}"
    covered = {path[:depth] for path in chunk_paths for depth in range(1, len(path) + 1)}
    missing = [path for path in outline if path not in covered]
    assert len(missing) <= len(outline) // 50, f"outline entries with no chunk: {missing[:10]}"


def test_sections_carry_their_text_and_page_anchor(chunks: list[ChunkRecord]) -> None:
    root = [c for c in chunks if c.heading_path == [TITLE, "GNU/Linux 教程", "控制台基础", "root 账户"]]

    assert root and root[0].anchor == "page=30"
    assert root[0].content.startswith(
        "root 账户也被称作超级用户或特权用户。用这个账户，你能够履行下面的系统管理任务。"
    )
    assert "- 读、写和删除系统上的任何文件，不顾它们的文件权限" in root[0].content
    assert not root[0].content.startswith("1.1.3"), "the printed heading is not repeated in the text"


def test_chinese_text_is_intact(chunks: list[ChunkRecord]) -> None:
    text = "\n".join(chunk.content for chunk in chunks)

    assert len(chunks) > 400 and len(text) > 200_000
    assert not SPACED_CJK.search(text), SPACED_CJK.search(text)
    assert not MOJIBAKE.search(text), MOJIBAKE.search(text)
    assert not RUNNING_HEADER.search(text), "running page headers are dropped"
    assert "系统的使用与管理提供广泛的概览" in text, "a line break inside a Chinese sentence is joined"
    assert all(len(chunk.content) <= ChunkingParams().max_chars for chunk in chunks)


def test_kb_add_stores_the_pdf_under_its_folder_id(pdf_path: Path) -> None:
    result = CliRunner().invoke(cli, ["kb", "add", str(pdf_path.parent), "--no-index", "--json"])

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["added_doc_ids"], report["failed"], report["warnings"]) == (
        ["reference-pdf/debian-reference.zh-cn"],
        [],
        [],
    )
    listed = json.loads(CliRunner().invoke(cli, ["kb", "chunks", "--json"]).stdout)
    assert len(listed) == report["chunks_written"] > 400
    # The listing a triager reads shows each chunk's place in the outline.
    tsv = CliRunner().invoke(cli, ["kb", "chunks", "--doc", "reference-pdf/debian-reference.zh-cn"]).stdout
    header, *rows = tsv.splitlines()
    assert header == "chunk_id\tstatus\tanchor\ttitle\theading_path"
    paths = [row.split("\t")[4] for row in rows]
    assert f"{TITLE} › GNU/Linux 教程 › 控制台基础 › shell 提示符" in paths
    assert sum(path.count(" › ") >= 2 for path in paths) > len(paths) // 2
