"""Known framework shapes of `kb import` rows, read with no `--map` (a small table).

A row (a Qdrant point, a JSONL/JSON line) whose payload carries a shape's `marks` is read with that
shape's paths: LlamaIndex's vector stores keep the node as a JSON string in `_node_content`
(`payload._node_content.text`), LangChain's keep `page_content` beside a `metadata` object, and a
LlamaIndex docstore holds the serialised nodes themselves. `--map` still wins field by field.
Paths step into objects and JSON strings (`import_mapping`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["POINT_ID", "PRESETS", "Preset", "recognise"]

#: The column holding a Qdrant point's id; its payload keys are `payload.<key>`.
POINT_ID = "id"
_ROOTS = ("payload", "")

#: The deepest of LangChain's MarkdownHeaderTextSplitter keys (as its docs name them) is the section.
_TITLE_KEYS = (
    "title",
    "section_title",
    "header",
    "heading",
    "section",
    *(f"Header {n}" for n in range(6, 0, -1)),
)
_DOC_TITLE_KEYS = ("document_title", "doc_title", "file_name", "filename")


def _under(prefix: str, keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{prefix}.{key}" for key in keys)


@dataclass(frozen=True)
class Preset:
    """One framework's row shape: how to recognise it and where each chunk field is."""

    name: str
    """How the import report names it: `a LlamaIndex vector-store collection`."""
    marks: tuple[str, ...]
    """Payload keys that all occur in the framework's rows (and together in no other shape)."""
    fields: Mapping[str, tuple[str, ...]]
    """Chunk field → payload paths tried in order on each row (the first with a value is read)."""
    dropped: tuple[str, ...] = ()
    """Payload keys that are the framework's bookkeeping, not kept as chunk metadata."""

    def paths(self, root: str) -> dict[str, list[str]]:
        """Field → full column paths under `root` (`payload` for Qdrant points, `""` for a row that
        is the payload itself); a point's own id comes first for `chunk_id`."""
        joined = {name: [_join(root, path) for path in paths] for name, paths in self.fields.items()}
        if root:
            joined["chunk_id"] = [POINT_ID, *joined.get("chunk_id", [])]
        return joined

    def dropped_columns(self, root: str) -> frozenset[str]:
        return frozenset(_join(root, key) for key in self.dropped)


LLAMAINDEX_STORE = Preset(
    name="a LlamaIndex vector-store collection",
    marks=("_node_content", "_node_type"),
    fields={
        "chunk_id": ("_node_content.id_",),
        "content": ("_node_content.text",),
        "doc_id": ("ref_doc_id", "doc_id", "document_id"),
        # LlamaIndex also writes the node's metadata keys flat into the payload.
        "title": _TITLE_KEYS,
        "doc_title": _DOC_TITLE_KEYS,
    },
    dropped=("_node_content", "_node_type", "ref_doc_id", "doc_id", "document_id"),
)
LLAMAINDEX_NODE = Preset(
    name="LlamaIndex nodes (a docstore)",
    marks=("id_", "text", "relationships"),
    fields={
        "chunk_id": ("id_",),
        "content": ("text",),
        "doc_id": ("relationships.1.node_id", "ref_doc_id"),  # "1" is NodeRelationship.SOURCE
        "title": _under("metadata", _TITLE_KEYS),
        "doc_title": _under("metadata", _DOC_TITLE_KEYS),
    },
    dropped=(
        "id_",
        "text",
        "embedding",
        "relationships",
        "excluded_embed_metadata_keys",
        "excluded_llm_metadata_keys",
        "metadata_template",
        "metadata_separator",
        "text_template",
        "mimetype",
        "class_name",
    ),
)
LANGCHAIN = Preset(
    name="LangChain documents",
    marks=("page_content", "metadata"),
    fields={
        "chunk_id": ("id",),
        "content": ("page_content",),
        "doc_id": _under("metadata", ("doc_id", "document_id", "source", "file_path")),
        "title": _under("metadata", _TITLE_KEYS),
        "doc_title": _under("metadata", _DOC_TITLE_KEYS),
    },
    dropped=("type",),
)
PRESETS = (LLAMAINDEX_STORE, LLAMAINDEX_NODE, LANGCHAIN)


def recognise(columns: Collection[str], row: Mapping[str, Any] | None = None) -> tuple[Preset, str] | None:
    """The known shape the columns of a row carry and its root (`payload` or `""`), or None.

    A mark is there as a column, as the prefix of flattened columns (`payload.metadata.source`),
    or as a key of an object column of `row` (a JSON dump of Qdrant points: `{"id", "payload": {…}}`).
    """
    for preset in PRESETS:
        for root in _ROOTS:
            if all(_has(_join(root, mark), columns, row) for mark in preset.marks):
                return preset, root
    return None


def _has(path: str, columns: Collection[str], row: Mapping[str, Any] | None) -> bool:
    prefix = f"{path}."
    if path in columns or any(column.startswith(prefix) for column in columns):
        return True
    head, _, key = path.partition(".")
    value = row.get(head) if row is not None and key else None
    return isinstance(value, Mapping) and key in value


def _join(root: str, path: str) -> str:
    return f"{root}.{path}" if root else path
