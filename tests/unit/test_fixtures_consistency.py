"""The fixture KB, the alias dictionary and the query set agree with each other and with the README."""

from __future__ import annotations

import datetime as dt
import json
import re
import tomllib
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

FIXTURES_DIR = Path(__file__).resolve().parents[2] / "fixtures"
KB_DIR = FIXTURES_DIR / "kb"
QUERIES_PATH = FIXTURES_DIR / "queries.jsonl"
ALIASES_PATH = FIXTURES_DIR / "aliases.toml"
README_PATH = FIXTURES_DIR / "README.md"

FRONT_MATTER_KEYS = {"doc_id", "title", "product_line", "version", "updated_at", "status", "tags"}
PRODUCT_LINES = {"云办公", "财务云"}
QUERY_KEYS = {
    "qid", "query", "gold_doc", "gold_section", "gold_sections", "kind", "intended_label", "holdout",
}  # fmt: skip
KINDS = {
    "paraphrase", "colloquial", "short", "alias", "error_code",
    "multi_constraint", "no_answer", "split_answer", "version_conflict",
}  # fmt: skip
# The default root-cause taxonomy of DESIGN.md.
LABELS = {
    "index_stale", "chunk_split_bad", "rewrite_error", "alias_missing", "bm25_miss", "dense_drift",
    "rerank_error", "generation_error", "no_answer_in_kb", "label_error",
}  # fmt: skip
# User term → the KB's term; left out of aliases.toml on purpose (fixtures/README.md lists them too).
MISSING_ALIASES = {
    "补休": "调休",
    "普票": "增值税普通发票",
    "催单": "升级",
    "全电票": "数电发票",
    "代批": "审批委托",
    "停用": "冻结",
}
# Over-broad variants in aliases.toml that make the rule rewrite drift (the rewrite_error queries).
OVER_BROAD_ALIASES = {"撤销": "作废", "单子": "工单", "过期": "超时"}
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _split_front_matter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    """YAML between the leading `---` lines, and the body after it."""
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.S)
    if match is None:
        raise AssertionError(f"{path}: no front matter between leading '---' lines")
    meta = yaml.safe_load(match.group(1))
    if not isinstance(meta, dict):
        raise AssertionError(f"{path}: front matter is not a mapping")
    return meta, match.group(2)


def _headings(body: str) -> list[tuple[int, str]]:
    """(level, text) of every Markdown heading outside fenced code, in document order."""
    found: list[tuple[int, str]] = []
    in_fence = False
    for line in body.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        match = None if in_fence else HEADING.match(line)
        if match:
            found.append((len(match.group(1)), match.group(2)))
    return found


@cache
def _kb() -> dict[str, dict[str, Any]]:
    """doc id → {meta, body, headings (level ≥ 2, in order)} for every fixture document."""
    docs: dict[str, dict[str, Any]] = {}
    for path in sorted(KB_DIR.rglob("*.md")):
        meta, body = _split_front_matter(path.read_text(encoding="utf-8"), path)
        doc_id = path.relative_to(KB_DIR).with_suffix("").as_posix()
        docs[doc_id] = {
            "path": path,
            "meta": meta,
            "body": body,
            "sections": [text for level, text in _headings(body) if level >= 2],
        }
    return docs


@cache
def _queries() -> list[dict[str, Any]]:
    """Every line of queries.jsonl, parsed."""
    rows = []
    for line_no, line in enumerate(QUERIES_PATH.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise AssertionError(f"{QUERIES_PATH}:{line_no}: {error}") from error
    return rows


def _aliases() -> dict[str, Any]:
    with ALIASES_PATH.open("rb") as handle:
        return tomllib.load(handle)


# --- knowledge base --------------------------------------------------------------------------


def test_kb_size_fits_the_bundled_embedder() -> None:
    docs = _kb()
    assert 40 <= len(docs) <= 50
    total_chars = sum(len(doc["body"]) for doc in docs.values())
    assert total_chars <= 90_000, f"{total_chars} characters: embedding would take too long in tests"
    assert 150 <= sum(len(doc["sections"]) for doc in docs.values()) <= 250


@pytest.mark.parametrize("doc_id", sorted(_kb()))
def test_document_front_matter_and_shape(doc_id: str) -> None:
    doc = _kb()[doc_id]
    meta, path = doc["meta"], doc["path"]
    assert set(meta) == FRONT_MATTER_KEYS, f"{path}: keys {sorted(meta)}"
    assert meta["doc_id"] == doc_id, f"{path}: doc_id must equal the path under fixtures/kb"
    assert isinstance(meta["title"], str) and meta["title"]
    assert meta["product_line"] in PRODUCT_LINES
    assert re.fullmatch(r"v\d+(\.\d+){1,2}", str(meta["version"])), f"{path}: version {meta['version']!r}"
    assert isinstance(meta["updated_at"], dt.date) or dt.date.fromisoformat(str(meta["updated_at"]))
    assert meta["status"] in {"published", "ready"}
    assert isinstance(meta["tags"], list) and meta["tags"] and all(isinstance(t, str) for t in meta["tags"])
    assert 2 <= len(doc["sections"]) <= 6, f"{path}: {len(doc['sections'])} sections"
    assert len(set(doc["sections"])) == len(doc["sections"]), f"{path}: duplicate section headings"
    assert 300 <= len(CJK.findall(doc["body"])) <= 1500, f"{path}: Chinese character count out of range"


def test_kb_holds_both_product_lines_unpublished_docs_and_old_versions() -> None:
    metas = [doc["meta"] for doc in _kb().values()]
    assert {meta["product_line"] for meta in metas} == PRODUCT_LINES
    assert 1 <= sum(meta["status"] == "ready" for meta in metas) <= 2
    old_new_pairs = [("leave/annual-leave-2023", "leave/annual-leave-2025"),
                     ("invoice/red-invoice-v3-0", "invoice/red-invoice"),
                     ("workorder/sla-2024", "workorder/sla-2025")]  # fmt: skip
    for old, new in old_new_pairs:
        old_meta, new_meta = _kb()[old]["meta"], _kb()[new]["meta"]
        assert str(old_meta["updated_at"]) < str(new_meta["updated_at"]), (old, new)
        shared = set(_kb()[old]["sections"]) & set(_kb()[new]["sections"])
        assert shared, f"{old} and {new} should share near-duplicate sections"


# --- alias dictionary ------------------------------------------------------------------------


def test_aliases_parse_with_tomllib_and_have_the_agreed_shape() -> None:
    aliases = _aliases()
    assert 20 <= len(aliases) <= 30
    for term, variants in aliases.items():
        assert isinstance(variants, list) and variants, f"{ALIASES_PATH}: {term} needs a list of synonyms"
        assert all(isinstance(v, str) and v.strip() and v != term for v in variants), term


def test_deliberately_missing_aliases_are_missing_and_documented() -> None:
    aliases = _aliases()
    known_terms = set(aliases) | {variant for variants in aliases.values() for variant in variants}
    readme = README_PATH.read_text(encoding="utf-8")
    kb_text = "".join(doc["body"] for doc in _kb().values())
    for user_term, kb_term in MISSING_ALIASES.items():
        assert user_term not in known_terms, f"{user_term} must stay out of aliases.toml"
        assert user_term not in kb_text, f"the KB must not use the user term {user_term}"
        assert kb_term in kb_text
        assert user_term in readme and kb_term in readme, f"README must list {user_term} → {kb_term}"


def test_over_broad_aliases_are_present() -> None:
    aliases = _aliases()
    for variant, term in OVER_BROAD_ALIASES.items():
        assert variant in aliases.get(term, []), f"{term} = [..., {variant!r}] is the rewrite_error trap"


# --- query set -------------------------------------------------------------------------------


def test_query_lines_have_the_agreed_fields() -> None:
    queries = _queries()
    assert 120 <= len(queries) <= 180
    qids = [row["qid"] for row in queries]
    assert len(set(qids)) == len(qids)
    assert len({row["query"] for row in queries}) == len(queries), "duplicate query text"
    for row in queries:
        assert set(row) == QUERY_KEYS, row["qid"]
        assert re.fullmatch(r"q\d{3}", row["qid"])
        assert isinstance(row["query"], str) and row["query"].strip()
        assert row["kind"] in KINDS, row["qid"]
        assert row["intended_label"] is None or row["intended_label"] in LABELS, row["qid"]
        assert isinstance(row["holdout"], bool)


def test_gold_points_at_real_documents_and_headings() -> None:
    docs = _kb()
    for row in _queries():
        qid, gold_doc = row["qid"], row["gold_doc"]
        if row["kind"] == "no_answer" or row["intended_label"] == "no_answer_in_kb":
            assert gold_doc is None and row["gold_section"] is None and row["gold_sections"] == [], qid
            assert row["kind"] == "no_answer" and row["intended_label"] == "no_answer_in_kb", qid
            continue
        assert gold_doc in docs, f"{qid}: gold_doc {gold_doc!r} is not a fixture document"
        sections = docs[gold_doc]["sections"]
        heading = row["gold_section"]
        assert heading in sections, f"{qid}: {heading!r} is not a heading of {gold_doc}"
        assert row["gold_sections"][0] == row["gold_section"], qid
        assert all(section in sections for section in row["gold_sections"]), qid


def test_split_answers_span_adjacent_sections() -> None:
    for row in _queries():
        if row["kind"] != "split_answer":
            assert len(row["gold_sections"]) <= 1, row["qid"]
            continue
        sections = _kb()[row["gold_doc"]]["sections"]
        positions = [sections.index(section) for section in row["gold_sections"]]
        adjacent = list(range(positions[0], positions[0] + len(positions)))
        assert len(positions) >= 2 and positions == adjacent, (
            f"{row['qid']}: split answers must name adjacent sections in document order"
        )


def test_every_label_is_exercised_and_holdout_is_about_a_quarter() -> None:
    queries = _queries()
    per_label = Counter(row["intended_label"] for row in queries)
    for label in LABELS:
        assert per_label[label] >= 4, f"only {per_label[label]} queries designed for {label}"
        assert sum(1 for r in queries if r["intended_label"] == label and not r["holdout"]) >= 2, label
    holdout_share = sum(row["holdout"] for row in queries) / len(queries)
    assert 0.2 <= holdout_share <= 0.3
    assert {row["kind"] for row in queries} == KINDS


def test_label_traps_match_the_kb() -> None:
    docs = _kb()
    for row in _queries():
        label, gold_doc = row["intended_label"], row["gold_doc"]
        unpublished = gold_doc is not None and docs[gold_doc]["meta"]["status"] == "ready"
        assert unpublished == (label == "index_stale"), (
            f"{row['qid']}: only index_stale queries are answered by an unpublished (ready) document"
        )
        if label == "alias_missing":
            assert any(term in row["query"] for term in MISSING_ALIASES), row["qid"]
        if label == "rewrite_error":
            assert any(term in row["query"] for term in OVER_BROAD_ALIASES), row["qid"]
        if label == "chunk_split_bad":
            assert row["kind"] == "split_answer", row["qid"]
