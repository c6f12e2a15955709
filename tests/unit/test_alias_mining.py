"""Alias mining over diagnoses, and the alias file writer (keeps entries; refuses broken files)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ragtriage.errors import InputError
from ragtriage.triage.alias_mining import add_aliases, mine_aliases
from ragtriage.triage.diagnose import Diagnosis, Suggestion
from ragtriage.triage.facts import AliasPair


def _diagnosis(
    request_id: str, label: str, pairs: list[tuple[str, str]], confirmed: bool = False
) -> Diagnosis:
    return Diagnosis(
        request_id=request_id,
        query="q",
        suggestion=Suggestion(
            label=label,
            confidence=0.7,
            confirmed_by="alias_added" if confirmed else None,
            alias_pairs=[
                AliasPair(term=t, synonym=s, score=0.5, sources=["shared characters"]) for t, s in pairs
            ],
        ),
    )


def test_mining_aggregates_pairs_with_their_supporting_requests() -> None:
    diagnoses = [
        _diagnosis("r1", "alias_missing", [("补休", "调休")], confirmed=True),
        _diagnosis("r2", "alias_missing", [("补休", "调休")]),
        _diagnosis("r3", "alias_missing", [("普票", "增值税普通发票")]),
        _diagnosis("r4", "bm25_miss", [("催单", "升级")]),
        _diagnosis("r5", "alias_missing", [("报账", "报销")]),
    ]
    mined = mine_aliases(diagnoses, known={"报销": ["报账"]})
    assert [(m.term, m.synonyms, m.request_ids, m.confirmed) for m in mined] == [
        ("补休", ["调休"], ["r1", "r2"], 1),
        ("普票", ["增值税普通发票"], ["r3"], 0),
    ]


def test_add_creates_appends_and_keeps_existing_entries(tmp_path: Path) -> None:
    path = tmp_path / "aliases.toml"
    path.write_text('# keep me\n"报销" = ["报账"]\n', encoding="utf-8")
    change = add_aliases(path, "补休", ["调休"])
    assert change.added == ["调休"] and not change.created
    text = path.read_text(encoding="utf-8")
    assert text.startswith('# keep me\n"报销" = ["报账"]\n')
    assert tomllib.loads(text) == {"报销": ["报账"], "补休": ["调休"]}
    again = add_aliases(path, "报销", ["报账", "报帐"])
    assert again.added == ["报帐"] and again.already_present == ["报账"]
    assert tomllib.loads(path.read_text(encoding="utf-8")) == {"报销": ["报账", "报帐"], "补休": ["调休"]}


def test_add_creates_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "new" / "aliases.toml"
    assert add_aliases(path, "普票", ["增值税普通发票"]).created
    assert tomllib.loads(path.read_text(encoding="utf-8")) == {"普票": ["增值税普通发票"]}


def test_syntax_error_names_file_and_line_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "aliases.toml"
    broken = '"报销" = ["报账"]\n"补休" = ["调休"\n'
    path.write_text(broken, encoding="utf-8")
    with pytest.raises(InputError, match=r"aliases\.toml:\d+: not valid TOML"):
        add_aliases(path, "普票", ["增值税普通发票"])
    assert path.read_text(encoding="utf-8") == broken


def test_empty_synonyms_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="at least one different synonym"):
        add_aliases(tmp_path / "a.toml", "报销", ["报销", " "])
