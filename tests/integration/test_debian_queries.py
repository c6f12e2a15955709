"""The Debian query set (`fixtures/debian_queries/`) is consistent with its rules and with the KB.

Sizes (≥ 120 answerable, ≥ 12 no-answer), the split by position (every third line held out), unique
case ids, one style tag per answerable case, and every gold `(doc_id, anchor)` mapping onto a chunk
of the Debian FAQ + Reference added with `kb add --no-index` (no embedding: a few seconds). Needs
`../shared/data/debian-docs-zh/` and skips, saying so, only when it is absent.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli
from ragtriage.eval.gold_map import resolve_cases
from ragtriage.workspace import Workspace
from tests.conftest import SHARED_DIR, load_script

pytestmark = pytest.mark.realdata

DEBS_DIR = SHARED_DIR / "data" / "debian-docs-zh"
MIN_ANSWERABLE, MIN_NO_ANSWER = 120, 12


debian_faq = load_script("debian_faq")
debian_queries = load_script("debian_queries")


@pytest.fixture(scope="module")
def cases() -> list:
    """Every case of the query files (a bad line fails here, naming file and line)."""
    files = debian_queries.query_files()
    assert [f.name for f in files] == sorted(debian_queries.FILE_PREFIXES), files
    return debian_queries.load_query_cases(files)


@pytest.fixture(scope="module")
def kb_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh home with the FAQ and the Reference added without indexing (doc ids `faq/…`, `reference/…`)."""
    if not debian_faq.debs_available(DEBS_DIR):
        pytest.skip(
            f"real data absent: no {debian_faq.FAQ_PACKAGE}_*.deb in {DEBS_DIR} "
            "(`apt-get download debian-faq-zh-cn debian-reference-zh-cn` puts them there)"
        )
    root = tmp_path_factory.mktemp("debian-queries")
    extracted = debian_faq.ensure_extracted(root / "extracted", DEBS_DIR)
    home = root / "home"
    home.mkdir()
    (home / "config.toml").write_text("", encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("RAGTRIAGE__")]:
            patch.delenv(name)
        result = CliRunner().invoke(
            cli,
            [
                "--home",
                str(home),
                "--config",
                str(home / "config.toml"),
                "kb",
                "add",
                "--no-index",
                str(extracted / "faq"),
                str(extracted / "reference"),
            ],
        )
    assert result.exit_code == 0, result.output
    yield home


def test_sizes_ids_and_tags(cases: list) -> None:
    answerable = [c for c in cases if c.answerable]
    no_answer = [c for c in cases if not c.answerable]
    assert len(answerable) >= MIN_ANSWERABLE, f"{len(answerable)} answerable cases, need {MIN_ANSWERABLE}"
    assert len(no_answer) >= MIN_NO_ANSWER, f"{len(no_answer)} no-answer cases, need {MIN_NO_ANSWER}"
    ids = Counter(c.case.case_id for c in cases)
    assert not [i for i, n in ids.items() if n > 1]
    assert debian_queries.rule_problems(cases) == []


def test_split_is_every_third_line(cases: list) -> None:
    for path in {c.path for c in cases}:
        lines = [c for c in cases if c.path == path]
        assert [c.line for c in lines] == list(range(1, len(lines) + 1)), f"{path.name}: blank lines"
        held = [c.line for c in lines if c.tag("split") == "heldout"]
        assert held == list(range(3, len(lines) + 1, 3)), path.name
    share = sum(1 for c in cases if c.tag("split") == "heldout") / len(cases)
    assert 0.30 <= share <= 0.34


def test_every_gold_ref_maps_to_a_chunk(cases: list, kb_home: Path) -> None:
    workspace = Workspace.open(kb_home, kb_home / "config.toml")
    try:
        mappings = resolve_cases(workspace.engine, [c.case for c in cases])
    finally:
        workspace.close()
    unmapped = [
        f"{item.path.name}:{item.line} {item.case.case_id}: {ref.doc_id}#{ref.anchor}"
        for item, mapping in zip(cases, mappings, strict=True)
        for ref in mapping.unmapped
    ]
    assert unmapped == []
    answerable = [m for item, m in zip(cases, mappings, strict=True) if item.answerable]
    assert all(m.case.relevant_ids for m in answerable)


def test_rule_problems_name_file_line_and_field(tmp_path: Path) -> None:
    """The checker itself: a misplaced split, a missing style and a wrong prefix are each reported."""
    bad = tmp_path / "faq.jsonl"
    lines = [
        '{"case_id": "faq-001", "query": "改主机名", "gold_refs": [{"doc_id": "faq/a", "anchor": "x"}], '
        '"tags": ["style:short", "split:tune"]}',
        '{"case_id": "refa-002", "query": "换源", "gold_refs": [{"doc_id": "faq/a", "anchor": "x"}], '
        '"tags": ["style:short", "split:tune"]}',
        '{"case_id": "faq-003", "query": "火星天气", "positive_chunk_ids": [], "tags": ["no_answer", "split:tune"]}',
        '{"case_id": "faq-004", "query": "装软件", "gold_refs": [{"doc_id": "faq/a", "anchor": "x"}], '
        '"tags": ["split:tune"]}',
    ]
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    problems = debian_queries.rule_problems(debian_queries.load_query_cases([bad]))
    assert problems == [
        "faq.jsonl:2: case_id 'refa-002' should start with 'faq-'",
        "faq.jsonl:3: tags has split:tune, the line's position makes it split:heldout",
        "faq.jsonl:4: tags needs one style:… of colloquial, abbreviation, short, multi-constraint, typo",
    ]


def test_a_case_id_used_twice_names_both_places(tmp_path: Path) -> None:
    line = '{"case_id": "refb-001", "query": "换源", "gold_refs": [{"doc_id": "reference/ch02.zh-cn", "anchor": "x"}]}'
    (tmp_path / "reference-a.jsonl").write_text(line + "\n", encoding="utf-8")
    (tmp_path / "reference-b.jsonl").write_text(line + "\n", encoding="utf-8")
    from ragtriage.errors import InputError

    with pytest.raises(
        InputError, match=r"reference-b.jsonl:1: case_id 'refb-001' is also at reference-a.jsonl:1"
    ):
        debian_queries.load_query_cases(debian_queries.query_files(tmp_path))


def test_the_debian_alias_file_maps_user_words_onto_the_documents_terms(kb_home: Path) -> None:
    """`fixtures/debian_queries/aliases.toml` (a KB configuration, not a default): each group's first
    member is a term the documents use (so `alias_mode = "replace"` swaps users' words for it), and
    no member is one character (the rule rewrite matches members as substrings of the query)."""
    from sqlmodel import Session, select

    from ragtriage.pipeline.rewrite import load_aliases
    from ragtriage.store.kb_tables import ChunkRow

    dictionary = load_aliases(debian_queries.QUERY_DIR / "aliases.toml")
    assert len(dictionary) >= 10
    workspace = Workspace.open(kb_home, kb_home / "config.toml")
    try:
        with Session(workspace.engine) as session:
            text = "\n".join(f"{r.title}\n{r.content}" for r in session.exec(select(ChunkRow))).lower()
    finally:
        workspace.close()
    assert [g[0] for g in dictionary.groups if g[0].lower() not in text] == []
    assert [m for g in dictionary.groups for m in g if len(m) < 2] == []
