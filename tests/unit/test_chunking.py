"""Chunking properties: size limits, whole sentences, overlap, section boundaries, stable ids."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtriage.config.settings import KBSettings
from ragtriage.kb.chunking import (
    ChunkingParams,
    chunk_document,
    section_chunk_texts,
    sentence_windows,
    split_sentences,
)
from ragtriage.kb.document import Block, LoadedDocument, Section

SMALL = ChunkingParams(target_chars=100, max_chars=150, overlap_chars=30)


def _doc(*sections: Section, title: str = "文档") -> LoadedDocument:
    return LoadedDocument(title=title, sections=list(sections))


def _section(heading: str, *paragraphs: str) -> Section:
    return Section(
        heading_path=["文档", heading], anchor=heading, blocks=[Block("paragraph", p) for p in paragraphs]
    )


def test_params_come_from_kb_settings_and_are_validated() -> None:
    assert ChunkingParams.from_settings(KBSettings()) == ChunkingParams(800, 1200, 150)
    with pytest.raises(ValueError, match="target_chars"):
        ChunkingParams(target_chars=900, max_chars=800, overlap_chars=10)
    with pytest.raises(ValueError, match="overlap_chars"):
        ChunkingParams(target_chars=100, max_chars=200, overlap_chars=100)


@pytest.mark.parametrize(
    "text, sentences",
    [
        ("第一句。第二句！第三句？第四句；尾巴", ["第一句。", "第二句！", "第三句？", "第四句；", "尾巴"]),
        ("Version v2.3 ships today. Really? Yes!", ["Version v2.3 ships today. ", "Really? ", "Yes!"]),
        ("他说：“好。”然后走了。", ["他说：“好。”", "然后走了。"]),
        ("行一\n行二\n\n行三", ["行一\n", "行二\n\n", "行三"]),
        ('第二句！"Hello." ok', ["第二句！", '"Hello." ', "ok"]),
    ],
)
def test_split_sentences(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences
    assert "".join(split_sentences(text)) == text


def test_small_paragraphs_of_one_section_are_packed_up_to_target() -> None:
    paragraphs = [f"第{i}段内容。" * 3 for i in range(6)]  # 15 chars each
    chunks = section_chunk_texts(_section("A", *paragraphs), SMALL)

    assert chunks == ["\n\n".join(paragraphs[:5]), paragraphs[5]]
    assert all(len(chunk) <= SMALL.target_chars for chunk in chunks)


def test_a_paragraph_between_target_and_max_stands_alone_uncut() -> None:
    middle = "这是一个比目标长但比上限短的段落。" * 7  # 119 chars
    chunks = section_chunk_texts(_section("A", "短段。", middle, "另一个短段。"), SMALL)

    assert chunks == ["短段。", middle, "另一个短段。"]


def test_sentence_windows_overlap_by_whole_trailing_sentences() -> None:
    sentences = [f"这是第{i:02d}句话。" for i in range(40)]  # 8 chars each
    windows = sentence_windows("".join(sentences), SMALL)

    assert len(windows) > 3
    for previous, current in zip(windows, windows[1:], strict=False):
        previous_sentences = split_sentences(previous)
        overlap = "".join(previous_sentences[-3:])  # 3 × 8 chars ≤ 30
        assert current.startswith(overlap)
        assert len(current) <= SMALL.target_chars
    covered = set().union(*(split_sentences(w) for w in windows))
    assert covered == set(sentences)


def test_a_single_sentence_over_max_is_cut_at_a_comma_into_pieces_under_max() -> None:
    clause = "一二三四五六七八九十，"  # 11 chars
    sentence = clause * 30 + "完。"  # 332 chars, no sentence end before the last
    chunks = section_chunk_texts(_section("A", sentence), SMALL)

    assert all(len(chunk) <= SMALL.max_chars for chunk in chunks)
    assert all(chunk.endswith("，") for chunk in chunks[:-1])
    assert len(chunks) >= 3


def test_code_blocks_are_windowed_by_lines() -> None:
    code = "\n".join(f"echo line-{i:03d} && true" for i in range(20))  # 25 chars per line
    section = Section(heading_path=["文档", "脚本"], anchor="s", blocks=[Block("code", code)])
    chunks = section_chunk_texts(section, SMALL)

    assert len(chunks) > 1
    for chunk in chunks:
        assert all(line.startswith("echo line-") and line.endswith("&& true") for line in chunk.split("\n"))


# ---------------------------------------------------------------- properties (hypothesis)

_SENTENCE = st.builds(
    lambda body, end: body + end,
    st.text(alphabet="退款发票审批流程状态abcxyz ", min_size=1, max_size=60).filter(
        lambda s: s.strip() != ""
    ),
    st.sampled_from(["。", "！", "？", "；"]),
)
_PARAGRAPH = st.lists(_SENTENCE, min_size=1, max_size=12)
_SECTIONS = st.lists(st.lists(_PARAGRAPH, min_size=1, max_size=4), min_size=1, max_size=4)


def _build(sections: list[list[list[str]]]) -> LoadedDocument:
    # A marker per section makes every sentence traceable to its section.
    built = []
    for number, paragraphs in enumerate(sections):
        texts = ["".join(f"§{number}{sentence}" for sentence in paragraph) for paragraph in paragraphs]
        built.append(_section(f"节{number}", *texts))
    return _doc(*built)


@settings(max_examples=150, deadline=None)
@given(sections=_SECTIONS)
def test_chunks_respect_max_keep_sentences_whole_and_never_span_sections(
    sections: list[list[list[str]]],
) -> None:
    document = _build(sections)
    chunks = chunk_document(document, doc_id="d", params=SMALL)

    for chunk in chunks:
        assert len(chunk.content) <= SMALL.max_chars
        section_number = chunk.heading_path[-1].removeprefix("节")
        markers = {part[0] for part in chunk.content.split("§")[1:]}
        assert markers == {section_number}, "a chunk mixes sections"
        assert chunk.title == chunk.heading_path[-1]
    for number, paragraphs in enumerate(sections):
        section_text = "\n".join(c.content for c in chunks if c.heading_path[-1] == f"节{number}")
        for paragraph in paragraphs:
            for sentence in paragraph:
                assert f"§{number}{sentence}" in section_text, "a sentence was cut or lost"
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert len({c.chunk_id for c in chunks}) == len(chunks)


# ---------------------------------------------------------------- ids


def test_chunk_ids_of_unchanged_sections_survive_an_edit_elsewhere() -> None:
    before = chunk_document(
        _doc(_section("A", "甲。"), _section("B", "乙。"), _section("C", "丙。")), doc_id="d", params=SMALL
    )
    after = chunk_document(
        _doc(_section("A", "甲。"), _section("B", "乙改了。", "新增一段。" * 30), _section("C", "丙。")),
        doc_id="d",
        params=SMALL,
    )

    assert before[0].chunk_id == after[0].chunk_id
    assert before[2].chunk_id == after[-1].chunk_id
    assert before[1].chunk_id not in {c.chunk_id for c in after}
    assert after[-1].ordinal == len(after) - 1
    assert all(c.chunk_id.startswith("d#") for c in after)


def test_identical_chunks_in_one_document_get_numbered_ids() -> None:
    section = _section("A", "重复。")
    chunks = chunk_document(_doc(section, section, section), doc_id="d", params=SMALL)

    base = chunks[0].chunk_id
    assert [c.chunk_id for c in chunks] == [base, f"{base}-2", f"{base}-3"]


def test_chunks_carry_document_metadata_and_hashes() -> None:
    document = _doc(_section("A", "甲。"))
    document.meta.product_line = "支付"
    document.meta.doc_version = "v2.3"
    [chunk] = chunk_document(document, doc_id="pay/x", params=SMALL, kb="kb1", version=3, status="ready")

    assert (chunk.kb, chunk.version, chunk.status, chunk.product_line, chunk.doc_version) == (
        "kb1",
        3,
        "ready",
        "支付",
        "v2.3",
    )
    assert chunk.anchor == "A" and chunk.heading_path == ["文档", "A"]
    assert len(chunk.content_hash) == 64
