"""Word, PowerPoint and PDF loaders on files written by python-docx, python-pptx and fpdf2 in the test."""

from __future__ import annotations

import io
from pathlib import Path

import docx
import pptx
import pytest
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from fpdf import FPDF
from PIL import Image
from pptx.util import Inches

from ragtriage.kb.chunking import ChunkingParams, chunk_document
from ragtriage.kb.document import DocumentLoadError, LoadedDocument
from ragtriage.kb.loaders import load_document


def _chunks(document: LoadedDocument) -> list[tuple[list[str], str | None, str]]:
    chunks = chunk_document(
        document,
        doc_id="d",
        params=ChunkingParams(),
        kb="default",
        version=1,
        status="published",
        updated_at=None,
    )
    return [(chunk.heading_path, chunk.anchor, chunk.content) for chunk in chunks]


def _bookmark(paragraph: docx.text.paragraph.Paragraph, name: str) -> None:
    """Wrap the paragraph in a Word bookmark, as Word does for headings listed in a table of contents."""
    start = OxmlElement("w:bookmarkStart")
    start.set(qn("w:id"), "0")
    start.set(qn("w:name"), name)
    end = OxmlElement("w:bookmarkEnd")
    end.set(qn("w:id"), "0")
    paragraph._p.insert(0, start)  # noqa: SLF001
    paragraph._p.append(end)  # noqa: SLF001


@pytest.fixture
def handbook(tmp_path: Path) -> Path:
    document = docx.Document()
    document.add_paragraph("员工手册", style="Title")
    document.add_paragraph("本手册适用于全体员工。")
    document.add_heading("请假制度", level=1)
    document.add_heading("年假", level=2)
    document.add_paragraph("入职满一年的员工享有五天年假。")
    document.add_paragraph("年假须提前三天申请。", style="List Bullet")
    document.add_paragraph("未休年假可顺延至次年三月。", style="List Bullet 2")
    sick = document.add_heading("病假", level=2)
    _bookmark(sick, "_Toc1234")
    document.add_paragraph("病假需提供医院证明。")
    table = document.add_table(rows=2, cols=2)
    for (row, col), text in {
        (0, 0): "天数",
        (0, 1): "审批人",
        (1, 0): "三天以内",
        (1, 1): "直属主管",
    }.items():
        table.cell(row, col).text = text
    document.add_heading("报销制度", level=1)
    document.add_paragraph("差旅费用在出差结束后十五天内报销。")
    path = tmp_path / "handbook.docx"
    document.save(str(path))
    return path


def test_docx_headings_come_from_word_heading_styles(handbook: Path) -> None:
    document = load_document(handbook)

    assert (document.title, document.format, document.warnings) == ("员工手册", "docx", [])
    assert _chunks(document) == [
        (["员工手册"], None, "本手册适用于全体员工。"),
        (
            ["员工手册", "请假制度", "年假"],
            "年假",
            "入职满一年的员工享有五天年假。\n\n- 年假须提前三天申请。\n\n- 未休年假可顺延至次年三月。",
        ),
        (
            ["员工手册", "请假制度", "病假"],
            "_Toc1234",
            "病假需提供医院证明。\n\n天数 | 审批人\n三天以内 | 直属主管",
        ),
        (["员工手册", "报销制度"], "报销制度", "差旅费用在出差结束后十五天内报销。"),
    ]


def test_docx_custom_style_based_on_a_heading_and_outline_level_count_as_headings(tmp_path: Path) -> None:
    document = docx.Document()
    custom = document.styles.add_style("公司标题", docx.enum.style.WD_STYLE_TYPE.PARAGRAPH)
    custom.base_style = document.styles["Heading 2"]
    document.add_heading("总则", level=1)
    document.add_paragraph("第一条", style="公司标题")
    document.add_paragraph("本制度自发布之日起施行。")
    path = tmp_path / "制度.docx"
    document.save(str(path))

    loaded = load_document(path)

    assert loaded.title == "制度"
    assert [(s.heading_path, s.anchor) for s in loaded.sections] == [(["制度", "总则", "第一条"], "第一条")]


def test_docx_without_headings_is_one_section_with_a_warning(tmp_path: Path) -> None:
    document = docx.Document()
    document.core_properties.title = "会议纪要"
    document.add_paragraph("下周一上线新版审批流程。")
    path = tmp_path / "minutes.docx"
    document.save(str(path))

    loaded = load_document(path)

    assert (loaded.title, loaded.warnings) == ("会议纪要", ["no heading styles: loaded as one section"])
    assert _chunks(loaded) == [(["会议纪要"], None, "下周一上线新版审批流程。")]


def test_pptx_slides_become_sections_headed_by_their_titles(tmp_path: Path) -> None:
    deck = pptx.Presentation()
    cover = deck.slides.add_slide(deck.slide_layouts[0])
    cover.shapes.title.text = "财务系统培训"
    cover.placeholders[1].text = "2026 年第四季度"
    content = deck.slides.add_slide(deck.slide_layouts[1])
    content.shapes.title.text = "红字发票"
    body = content.placeholders[1].text_frame
    body.text = "先申请红字信息表"
    sub = body.add_paragraph()
    sub.text = "信息表审核约需一天"
    sub.level = 1
    content.notes_slide.notes_text_frame.text = "提醒学员带上原发票号码。"
    untitled = deck.slides.add_slide(deck.slide_layouts[6])
    box = untitled.shapes.add_textbox(Inches(1), Inches(1), Inches(6), Inches(1))
    box.text_frame.text = "问答环节"
    table = untitled.shapes.add_table(2, 2, Inches(1), Inches(3), Inches(6), Inches(1)).table
    for (row, col), text in {(0, 0): "问题", (0, 1): "答复", (1, 0): "能否补开", (1, 1): "可以"}.items():
        table.cell(row, col).text = text
    path = tmp_path / "training.pptx"
    deck.save(str(path))

    document = load_document(path)

    assert (document.title, document.format) == ("财务系统培训", "pptx")
    assert _chunks(document) == [
        (["财务系统培训"], "slide=1", "2026 年第四季度"),
        (
            ["财务系统培训", "红字发票"],
            "slide=2",
            "- 先申请红字信息表\n\n- 信息表审核约需一天\n\n提醒学员带上原发票号码。",
        ),
        (["财务系统培训", "Slide 3"], "slide=3", "问答环节\n\n问题 | 答复\n能否补开 | 可以"),
    ]
    assert document.sections[1].blocks[1].text == "  - 信息表审核约需一天", "level 1 is indented"


def _outlined_pdf(path: Path, *, outline: bool = True, encrypt: bool = False) -> Path:
    """A three-page PDF with a running header, page numbers and (optionally) an outline."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.set_title("Operations Guide")
    if encrypt:
        pdf.set_encryption(owner_password="owner", user_password="secret")
    pdf.set_auto_page_break(auto=False)
    sections = [
        (0, "Installation", "Install the package with the system package manager before first use."),
        (1, "Requirements", "A machine with two cores and four gigabytes of memory is enough."),
        (0, "Backups", "Back up the data folder every night; keep seven copies."),
    ]
    for level, title, body in sections:
        pdf.add_page()
        pdf.set_font("Helvetica", size=9)
        pdf.cell(0, 8, "Operations Guide - internal", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=14)
        if outline:
            pdf.start_section(title, level=level)
        pdf.cell(0, 10, title, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, body)
        pdf.set_y(-20)
        pdf.cell(0, 8, str(pdf.page_no()), align="C")
    pdf.output(str(path))
    return path


def test_pdf_outline_gives_heading_paths_and_page_anchors(tmp_path: Path) -> None:
    document = load_document(_outlined_pdf(tmp_path / "guide.pdf"))

    assert (document.title, document.format, document.warnings) == ("Operations Guide", "pdf", [])
    assert _chunks(document) == [
        (
            ["Operations Guide", "Installation"],
            "page=1",
            "Install the package with the system package manager before first use.",
        ),
        (
            ["Operations Guide", "Installation", "Requirements"],
            "page=2",
            "A machine with two cores and four gigabytes of memory is enough.",
        ),
        (
            ["Operations Guide", "Backups"],
            "page=3",
            "Back up the data folder every night; keep seven copies.",
        ),
    ]


def test_pdf_without_outline_is_one_section_with_a_warning(tmp_path: Path) -> None:
    document = load_document(_outlined_pdf(tmp_path / "flat.pdf", outline=False))

    assert [s.heading_path for s in document.sections] == [["Operations Guide"]]
    assert "no outline" in document.warnings[0]
    text = "\n".join(b.text for b in document.sections[0].blocks)
    assert "Back up the data folder" in text and "internal" not in text, "running header dropped"


def test_encrypted_pdf_fails_with_the_fix(tmp_path: Path) -> None:
    path = _outlined_pdf(tmp_path / "locked.pdf", encrypt=True)

    with pytest.raises(DocumentLoadError) as caught:
        load_document(path)

    assert (caught.value.path, caught.value.reason) == (
        str(path),
        "encrypted PDF: it needs a password to open",
    )
    assert "qpdf --decrypt" in caught.value.fix


def test_scanned_pdf_without_text_fails_with_the_fix(tmp_path: Path) -> None:
    scan = io.BytesIO()
    Image.new("L", (400, 560), color=200).save(scan, format="PNG")
    pdf = FPDF()
    for _ in range(2):
        pdf.add_page()
        pdf.image(scan, x=0, y=0, w=210, h=297)
    path = tmp_path / "scan.pdf"
    pdf.output(str(path))

    with pytest.raises(DocumentLoadError) as caught:
        load_document(path)

    assert caught.value.reason == "no text on any of its 2 pages (a scanned PDF has only images)"
    assert "ocrmypdf" in caught.value.fix


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("damaged.pdf", b"%PDF-1.7\nnot really a pdf", "not a readable PDF (damaged or another format)"),
        ("locked.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 504, "encrypted with a password"),
        ("text.pptx", "这不是演示文稿".encode(), "not a readable .pptx file"),
    ],
)
def test_unreadable_office_and_pdf_files_name_the_reason(
    tmp_path: Path, name: str, content: bytes, reason: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)

    with pytest.raises(DocumentLoadError) as caught:
        load_document(path)

    assert caught.value.reason.startswith(reason) and caught.value.fix


def test_legacy_word_file_is_refused_with_the_format_to_save_as(tmp_path: Path) -> None:
    path = tmp_path / "old.doc"
    path.write_bytes(b"\xd0\xcf\x11\xe0")

    with pytest.raises(DocumentLoadError, match=r"save it as \.docx"):
        load_document(path)
