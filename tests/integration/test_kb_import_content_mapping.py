"""`kb import` warns (never refuses) when the mapping makes content equal another mapped field:
content read from the title's column, from a column named like a title while the text column is
left as metadata, or equal to the title on at least half of the rows. Real SQLite home."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli


def _rows(count: int = 10) -> list[dict[str, Any]]:
    return [
        {
            "id": f"c{n}",
            "document_id": n // 3,
            "text": f"第{n}段：报销需要在出差结束后十五天内提交发票原件。",
            "section_title": f"报销时限 {n}",
        }
        for n in range(count)
    ]


def _import(tmp_path: Path, rows: list[dict[str, Any]], mapping: str) -> dict[str, Any]:
    path = tmp_path / "chunks.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    result = CliRunner().invoke(cli, ["kb", "import", str(path), "--map", mapping, "--no-index", "--json"])
    assert result.exit_code == 0, result.output  # a warning, not an error
    return dict(json.loads(result.stdout))


def test_content_from_the_title_column_is_warned_with_the_fix(tmp_path: Path) -> None:
    report = _import(
        tmp_path, _rows(), "chunk_id=id,doc_id=document_id,content=section_title,title=section_title"
    )
    [warning] = report["mapping_warnings"]
    assert warning.startswith("--map content=section_title reads the same column as title")
    assert "fix: --map content=text" in warning
    assert report["added"] == 10  # imported all the same


def test_content_from_a_title_named_column_is_warned(tmp_path: Path) -> None:
    report = _import(tmp_path, _rows(), "chunk_id=id,doc_id=document_id,content=section_title")
    [warning] = report["mapping_warnings"]
    assert (
        "reads a column named like a title while 'text'" in warning and "fix: --map content=text" in warning
    )


@pytest.mark.parametrize(("equal", "warned"), [(5, True), (4, False), (0, False)])
def test_content_equal_to_the_title_on_half_of_the_rows(tmp_path: Path, equal: int, warned: bool) -> None:
    rows = [{"key": r["id"], "body": r["text"], "name": r["section_title"]} for r in _rows()]
    for row in rows[:equal]:
        row["body"] = row["name"]
    report = _import(tmp_path, rows, "chunk_id=key,content=body,title=name")
    if warned:
        [warning] = report["mapping_warnings"]
        assert f"the content equals the chunk's title on {equal} of 10 rows" in warning
        assert warning.startswith("--map content=body:")
    else:
        assert report["mapping_warnings"] == []


def test_a_sound_mapping_has_no_warning_and_the_text_report_shows_one(tmp_path: Path) -> None:
    report = _import(tmp_path, _rows(), "chunk_id=id,doc_id=document_id,content=text,title=section_title")
    assert report["mapping_warnings"] == []
    path = tmp_path / "chunks.jsonl"
    result = CliRunner().invoke(
        cli,
        [
            "kb",
            "import",
            str(path),
            "--map",
            "chunk_id=id,content=section_title,title=section_title",
            "--no-index",
        ],
        env={"COLUMNS": "200"},
    )
    assert (
        result.exit_code == 0
        and "warning: --map content=section_title reads the same column as title" in result.output
    )
