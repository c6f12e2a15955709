"""Field mapping of `kb import`: ids as text, heading paths, flags, times, vectors, metadata, settings."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from pathlib import Path

import numpy as np
import pytest

from ragtriage.config.loading import load_settings
from ragtriage.config.settings import KBImportSettings
from ragtriage.errors import ConfigError, InputError
from ragtriage.kb.import_mapping import FieldMapper, parse_map_option, split_path
from ragtriage.kb.import_presets import LANGCHAIN, LLAMAINDEX_STORE, recognise
from ragtriage.kb.import_rows import RowError, SourceRow, heading_path, id_text, json_safe, timestamp


def _mapper(**settings: object) -> FieldMapper:
    return FieldMapper(KBImportSettings(**settings), {}, source_name="t.jsonl", vector_field=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value, expected",
    [(42, "42"), (42.0, "42"), ("0042", "0042"), (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
     ("  ", None), (None, None)],
)  # fmt: skip
def test_ids_are_kept_verbatim_as_text(value: object, expected: str | None) -> None:
    assert id_text(value) == expected


def test_map_option_merges_pairs_and_rejects_bad_ones() -> None:
    assert parse_map_option(["chunk_id=id,content=text", "title = h1"]) == {
        "chunk_id": "id",
        "content": "text",
        "title": "h1",
    }
    with pytest.raises(InputError, match="'chunk_id' is not field=column"):
        parse_map_option(["chunk_id"])
    with pytest.raises(InputError, match="unknown chunk field 'ordnal'; did you mean 'ordinal'"):
        parse_map_option(["ordnal=n"])


def test_map_option_refuses_a_field_mapped_to_two_columns() -> None:
    # Last-one-wins read 'sec_title' (a typo) and silently dropped the title the user mapped first.
    with pytest.raises(
        InputError, match=r"field 'title' is mapped twice \('section_title' and 'sec_title'\)"
    ):
        parse_map_option(["chunk_id=id,title=section_title,title=sec_title"])
    with pytest.raises(InputError, match="mapped twice"):
        parse_map_option(["title=section_title", "title=h1"])
    assert parse_map_option(["title=h1,title=h1"]) == {"title": "h1"}


def test_heading_path_from_list_json_or_separated_string() -> None:
    assert heading_path(["指南", " 安装 "], "r", " > ") == ["指南", "安装"]
    assert heading_path('["指南", "安装"]', "r", " > ") == ["指南", "安装"]
    assert heading_path("指南 > 安装 > ", "r", " > ") == ["指南", "安装"]
    assert heading_path("指南/安装", "r", "/") == ["指南", "安装"]
    with pytest.raises(RowError, match="starts like a JSON list"):
        heading_path('["指南", ', "r", " > ")


def test_times_become_aware_utc() -> None:
    utc = dt.timezone.utc
    assert timestamp("r", "2024-05-01T08:00:00Z") == dt.datetime(2024, 5, 1, 8, tzinfo=utc)
    assert timestamp("r", "2024-05-01T16:00:00+08:00") == dt.datetime(2024, 5, 1, 8, tzinfo=utc)
    assert (
        timestamp("r", 1714550400) == timestamp("r", 1714550400000) == dt.datetime(2024, 5, 1, 8, tzinfo=utc)
    )
    with pytest.raises(RowError, match="is not an ISO-8601 time"):
        timestamp("r", "yesterday")


def test_metadata_values_become_json() -> None:
    value = {"when": dt.date(2024, 5, 1), "n": decimal.Decimal("3"), "x": float("nan"), "b": b"\x00\x01"}
    assert json_safe(value) == {"when": "2024-05-01", "n": 3, "x": None, "b": "AAE="}


def test_status_filters_are_case_insensitive_and_flags_are_parsed() -> None:
    mapper = _mapper(retrievable_statuses=["READY", "published"])

    def retrievable(**values: object) -> bool:
        return mapper.map_row(
            SourceRow("r", {"chunk_id": uuid.uuid4().hex, "content": "正文", **values})
        ).retrievable

    assert retrievable(status="ready") and retrievable(status="PUBLISHED") and retrievable()
    assert not retrievable(status="DRAFT")
    assert not retrievable(deleted="true") and not retrievable(published=0)
    assert retrievable(deleted="0", published="yes")
    with pytest.raises(RowError, match="deleted 'maybe' is not true/false"):
        retrievable(deleted="maybe")


def test_unmapped_ordinals_count_within_each_document_and_vectors_decode() -> None:
    mapper = FieldMapper(KBImportSettings(), {}, source_name="t", vector_field="v")
    rows = [
        SourceRow("r1", {"chunk_id": 1, "doc_id": "a", "content": "x", "v": "[1, 0, 0]"}),
        SourceRow(
            "r2",
            {
                "chunk_id": 2,
                "doc_id": "b",
                "content": "y",
                "v": np.asarray([0, 1, 0], dtype=np.float32).tobytes(),
            },
        ),
        SourceRow("r3", {"chunk_id": 3, "doc_id": "a", "content": "z", "v": [0, 0, 2]}),
    ]
    chunks = [mapper.map_row(row) for row in rows]
    assert [c.ordinal for c in chunks] == [0, 0, 1]
    assert [c.vector.tolist() for c in chunks if c.vector is not None] == [[1, 0, 0], [0, 1, 0], [0, 0, 2]]
    assert all(c.meta == {} for c in chunks)


def test_import_settings_are_strict(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[kb.import]\nvector_feild = "embedding"\n', encoding="utf-8")
    with pytest.raises(
        ConfigError, match="unknown key 'kb.import.vector_feild'; did you mean 'kb.import.vector_field'"
    ):
        load_settings(config, environ={})
    config.write_text('[kb.import]\nmap = { chunkid = "id" }\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown chunk field 'chunkid'; did you mean 'chunk_id'"):
        load_settings(config, environ={})
    environ = {"RAGTRIAGE__KB__IMPORT__VECTOR_FIELD": "emb"}
    assert load_settings(None, environ=environ).kb.import_.vector_field == "emb"


def test_a_map_path_steps_into_objects_json_strings_and_lists() -> None:
    mapper = FieldMapper(
        KBImportSettings(),
        {
            "chunk_id": "payload.metadata.id",
            "content": "payload.node.text",
            "title": "payload.node.headings.1",
        },
        source_name="t",
        vector_field=None,
    )
    # Qdrant flattens nested payload objects into dotted columns; the node is a JSON string.
    row = SourceRow(
        "t: point 7",
        {"payload.metadata.id": 7, "payload.node": '{"text": "正文", "headings": ["指南", "安装"]}'},
    )

    chunk = mapper.map_row(row)

    assert (chunk.chunk_id, chunk.content, chunk.title) == ("7", "正文", "安装")
    assert chunk.meta == {"payload.node": row.values["payload.node"]}  # only part of it is a field


def test_split_path_takes_the_longest_column_a_path_starts_at() -> None:
    columns = {"payload", "payload.metadata.source", "node"}
    assert split_path("payload.metadata.source", columns) == (
        "payload.metadata.source",
        "payload.metadata.source",
        (),
    )
    assert split_path("node.a.b", columns) == ("node.a.b", "node", ("a", "b"))
    assert split_path("payload.x", columns) == ("payload.x", "payload", ("x",))
    assert split_path("nodes.a", columns) is None


def test_known_shapes_are_recognised_by_their_marks_only() -> None:
    assert recognise({"id", "payload._node_content", "payload._node_type", "payload.title"}) == (
        LLAMAINDEX_STORE,
        "payload",
    )
    assert recognise({"id", "payload.page_content", "payload.metadata.source"}) == (LANGCHAIN, "payload")
    assert recognise({"page_content", "metadata"}) == (LANGCHAIN, "")
    assert recognise({"id", "payload.page_content", "payload.text"}) is None


def test_langchain_markdown_header_keys_give_the_deepest_header_as_title() -> None:
    mapper = FieldMapper(KBImportSettings(), {}, source_name="docs.jsonl", vector_field=None)
    metadata = {"source": "faq.md", "Header 1": "Debian FAQ", "Header 2": "7.12. 保留软件包"}

    chunk = mapper.map_row(
        SourceRow("docs.jsonl:1", {"id": "c1", "page_content": "正文", "metadata": metadata})
    )

    assert (chunk.title, chunk.doc_id, mapper.recognised["title"]) == (
        "7.12. 保留软件包",
        "faq.md",
        "metadata.Header 2",
    )
