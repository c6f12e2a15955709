"""`hanging_text` and `chunk_place`: lines within the width, ids whole, CJK two cells a character,
nothing cut; what a chunk is in words."""

from __future__ import annotations

import io

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from ragtriage.render.fit import plain_lines
from ragtriage.render.text import Hanging, chunk_place, hanging_text

UUIDS = [f"{n:08x}-0000-4000-8000-0000c0ffee{n:02x}" for n in range(4)]


def _lines(text: str, width: int, indent: int) -> list[str]:
    console = Console(file=io.StringIO(), width=width)
    return hanging_text(console, text, indent=indent).plain.split("\n")


@pytest.mark.parametrize("width", [50, 80])
def test_ids_stay_whole_and_continuations_hang(width: int) -> None:
    text = f"  dense: gained {', '.join(UUIDS)}; 1 moved — no documented reason"
    lines = _lines(text, width, 6)
    assert all(cell_len(line) <= width for line in lines)
    assert lines[0].startswith("  dense: gained")
    assert all(line.startswith("      ") and not line.startswith("       ") for line in lines[1:])
    assert all(line == line.rstrip() for line in lines)
    words = " ".join(lines).split()
    assert [w.rstrip(",;") for w in words if w.count("-") == 4] == UUIDS
    assert " ".join(words) == " ".join(text.split())


def test_the_first_line_uses_the_whole_width() -> None:
    lines = _lines("x" * 10 + " " + "y" * 67 + " " + "z" * 5, 80, 4)
    assert lines == ["x" * 10 + " " + "y" * 67, "    " + "z" * 5]


def test_cjk_counts_two_cells_and_folds_between_characters_nothing_cut() -> None:
    text = (
        "出差结束后十五天内提交发票原件和行程单，超过期限需要部门负责人审批。\n\n第二段：跨年度的差旅费用。"
    )
    lines = _lines(text, 30, 0)
    assert all(cell_len(line) <= 30 for line in lines)
    assert lines[0] == "出差结束后十五天内提交发票原件"
    assert "".join(lines) == text.replace("\n", "")
    assert "" in lines, "the blank line between paragraphs stays"


def test_a_tab_before_the_break_does_not_shift_the_rest() -> None:
    lines = _lines("a\tb " + "c" * 70 + " tail", 80, 2)
    assert lines[-1] == "  tail" and "c" * 70 in lines[0]


@pytest.mark.parametrize(
    ("doc_title", "heading_path", "title", "expected"),
    [
        ("请假流程说明", ["人事", "请假", "代批"], "代批", "请假流程说明 › 人事 › 请假 › 代批"),
        ("安装指南", ["安装指南", "准备"], "准备", "安装指南 › 准备"),  # the H1 is the document's title
        (None, [], "前加签与后加签", "前加签与后加签"),  # imported with a title column only
        (None, ["审批", "加签"], "前加签与后加签", "审批 › 加签 › 前加签与后加签"),
        (None, [], "", ""),
    ],
)
def test_chunk_place(doc_title: str | None, heading_path: list[str], title: str, expected: str) -> None:
    assert chunk_place(doc_title, heading_path, title) == expected


def test_hanging_wraps_each_line_at_the_width_it_is_rendered_at() -> None:
    text = Text(
        f"request: {UUIDS[0]}\nfinal: {', '.join(UUIDS)}\nquery: 休假期间怎么设置代批人以及审批单怎么转交"
    )
    lines = plain_lines([Hanging(text)], 46)
    assert lines[0] == f"request: {UUIDS[0]}"
    assert lines[1] == f"final: {UUIDS[0]},"
    assert all(cell_len(line) <= 46 for line in lines)
    assert [line[:2] for line in lines[2:5]] == ["  ", "  ", "  "]
    assert "".join(line.strip() for line in lines).endswith("query:休假期间怎么设置代批人以及审批单怎么转交")
