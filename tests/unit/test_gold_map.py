"""Gold refs (doc_id + anchor or span) map onto whatever chunking the KB has (pure, no store)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragtriage.eval.cases import EvalCase, GoldRef
from ragtriage.eval.gold_map import ChunkPlace, map_ref, resolve_case
from ragtriage.kb.chunking import ChunkingParams, chunk_document, document_text
from ragtriage.kb.document import Block, DocumentMeta, LoadedDocument, Section

DOC_ID = "8f14e45f-ceea-4c6e-9e3a-2b7c1d0e5f61"  # a foreign, UUID-like document id


def _document() -> LoadedDocument:
    deadline = "出差结束后十五天内提交发票原件和行程单。超过期限需要部门负责人审批。逾期超过六十天的单据财务不再受理。"
    hotel = "一线城市住宿标准每晚六百元。其他城市每晚四百元。超标部分由个人承担。"
    code = "\n".join(f"step {i}: run `expense submit --id {i}`" for i in range(12))
    return LoadedDocument(
        title="差旅报销",
        meta=DocumentMeta(),
        sections=[
            Section(["差旅报销"], None, [Block("paragraph", "适用于全体员工。")]),
            Section(
                ["差旅报销", "报销期限"],
                "deadline",
                [Block("paragraph", deadline), Block("list_item", "  附件须清晰。 ")],
            ),
            Section(["差旅报销", "住宿"], "hotel", [Block("paragraph", hotel), Block("code", code + "\n")]),
        ],
        source_path=None,
        format="markdown",
    )


def _places(params: ChunkingParams) -> tuple[list[ChunkPlace], dict[str, str]]:
    chunks = chunk_document(_document(), doc_id=DOC_ID, params=params)
    places = [ChunkPlace(c.chunk_id, c.doc_id, c.anchor, c.char_start, c.char_end) for c in chunks]
    return places, {c.chunk_id: c.content for c in chunks}


SMALL = ChunkingParams(target_chars=30, max_chars=45, overlap_chars=10)
LARGE = ChunkingParams(target_chars=400, max_chars=600, overlap_chars=100)


@pytest.mark.parametrize("params", [SMALL, LARGE, ChunkingParams()])
def test_chunk_offsets_point_at_their_text_in_the_document(params: ChunkingParams) -> None:
    text = document_text(_document())
    chunks = chunk_document(_document(), doc_id=DOC_ID, params=params)
    assert chunks and all(c.char_start is not None and c.char_end is not None for c in chunks)
    for chunk in chunks:
        segment = text[chunk.char_start : chunk.char_end]
        # A chunk of whole blocks is the document text itself; packed windows start and end alike.
        assert segment.startswith(chunk.content[:8]) and segment.endswith(chunk.content[-8:])
    assert [c.char_start for c in chunks] == sorted(c.char_start for c in chunks)  # type: ignore[type-var]


def test_a_span_promoted_under_one_chunking_maps_under_another() -> None:
    small, small_text = _places(SMALL)
    large, large_text = _places(LARGE)
    assert len(small) > len(large)
    gold = next(p for p in small if "六十天" in small_text[p.chunk_id])
    ref = GoldRef(
        doc_id=DOC_ID, anchor=gold.anchor, start=gold.char_start, end=gold.char_end, chunk_id=gold.chunk_id
    )
    mapped = map_ref(ref, large)
    assert len(mapped) == 1 and "六十天" in large_text[mapped[0]]
    # And back: the large chunk's span covers several small chunks of the same section only.
    big = next(p for p in large if p.chunk_id == mapped[0])
    back = map_ref(GoldRef(doc_id=DOC_ID, start=big.char_start, end=big.char_end), small)
    assert gold.chunk_id in back and len(back) > 1
    assert all(p.anchor == "deadline" for p in small if p.chunk_id in back)


def test_anchor_gold_maps_to_every_chunk_of_the_section_and_falls_back_without_offsets() -> None:
    small, _ = _places(SMALL)
    assert map_ref(GoldRef(doc_id=DOC_ID, anchor="hotel"), small) == [
        p.chunk_id for p in small if p.anchor == "hotel"
    ]
    # Imported chunks carry no offsets: a span ref with an anchor still maps by the anchor.
    imported = [ChunkPlace(str(i), DOC_ID, "hotel" if i else None, None, None) for i in range(3)]
    assert map_ref(GoldRef(doc_id=DOC_ID, anchor="hotel", start=0, end=5), imported) == ["1", "2"]
    assert map_ref(GoldRef(doc_id=DOC_ID, start=0, end=5), imported) == []
    assert map_ref(GoldRef(doc_id=DOC_ID, anchor="gone"), small) == []


def test_resolve_case_keeps_live_ids_drops_dead_ones_and_reports_unmapped_refs() -> None:
    large, _ = _places(LARGE)
    case = EvalCase(
        case_id="c1",
        query="住宿标准",
        gold={"dead#1234567890": 1, large[0].chunk_id: 2},
        gold_refs=[GoldRef(doc_id=DOC_ID, anchor="hotel", grade=3), GoldRef(doc_id="1024", anchor="x")],
    )
    mapping = resolve_case(case, {DOC_ID: large})
    hotel = [p.chunk_id for p in large if p.anchor == "hotel"]
    assert mapping.case.gold == {large[0].chunk_id: 2, **{cid: 3 for cid in hotel}}
    assert [r.label for r in mapping.unmapped] == ["1024#x"]
    untouched = EvalCase(case_id="c2", query="q", gold={"dead#1": 1})
    assert resolve_case(untouched, {DOC_ID: large}).case.gold == {"dead#1": 1}


def test_a_ref_taken_from_a_live_chunk_maps_to_that_chunk_not_its_whole_section() -> None:
    # Production's chunks (UUIDs, no offsets): one section in two parts sharing an anchor.
    parts = ["3f0c9a52-1d4e-4b7a-9c11-0a1b2c3d4e5f", "7e2d8b14-5a6f-4c3b-8d22-1f2e3d4c5b6a"]
    imported = [ChunkPlace(cid, DOC_ID, "puttingonhold", None, None) for cid in parts]
    ref = GoldRef(doc_id=DOC_ID, anchor="puttingonhold", chunk_id=parts[0])
    case = EvalCase(case_id="c1", query="怎样不让软件包被升级", gold={parts[0]: 1}, gold_refs=[ref])
    assert resolve_case(case, {DOC_ID: imported}).case.gold == {parts[0]: 1}
    # Once that chunk is gone (re-chunked), the ref falls back to its section.
    rechunked = [ChunkPlace(cid, DOC_ID, "puttingonhold", None, None) for cid in ("41", "42")]
    assert resolve_case(case, {DOC_ID: rechunked}).case.gold == {"41": 1, "42": 1}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"doc_id": "d"}, "needs an anchor or a span"),
        ({"doc_id": "d", "start": 5}, "give both start and end"),
        ({"doc_id": "d", "start": 9, "end": 3}, "must be greater than start"),
    ],
)
def test_bad_refs_are_rejected(ref: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        GoldRef.model_validate(ref)
