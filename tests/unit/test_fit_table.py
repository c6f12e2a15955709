"""`FitTable` layout: numbers and headers are never cut; a two-word header wraps before anything is cut."""

from __future__ import annotations

from rich.cells import cell_len

from ragtriage.render.fit import Col, FitTable, plain_lines


def _sweep_like() -> FitTable:
    table = FitTable(
        [
            Col("chars", "number", justify="right"),
            Col("chunks", "number", justify="right"),
            Col("cases", "number", justify="right"),
            Col("unmapped", "number", justify="right"),
            Col("hit@5", "number", justify="right"),
            Col("recall@10", "number", justify="right"),
            Col("mrr", "number", justify="right"),
            Col("refusal acc", "number", justify="right"),
            Col("best", "label"),
        ]
    )
    table.add_row("400", "4", "0", "0", "n/a", "n/a", "n/a", "0.0000", "")
    return table


def test_number_columns_wrap_a_header_at_its_space_instead_of_cutting_cells() -> None:
    # 56 cells of content + 28 of borders is 84: it fits at 80 only with "refusal acc" on two lines.
    lines = plain_lines([_sweep_like()], 80)
    assert all(cell_len(line) <= 80 for line in lines), lines
    text = "\n".join(lines)
    assert "…" not in text
    assert "refusal" in text and " acc " in text and "recall@10" in text and "unmapped" in text
    assert text.count("n/a") == 3 and "0.0000" in text


def test_too_narrow_for_every_header_goes_vertical_without_cutting() -> None:
    lines = plain_lines([_sweep_like()], 60)
    assert all(cell_len(line) <= 60 for line in lines)
    assert "…" not in "\n".join(lines) and any(line.startswith("refusal acc:") for line in lines)


def test_a_vertical_table_brings_back_the_columns_left_out_to_fit() -> None:
    # A queue row with a UUID: even without its optional columns it is too wide for 60 cells, so
    # it goes vertical, where every column has room again.
    table = FitTable(
        [
            Col("time", "label"),
            Col("request_id", "id"),
            Col("query", "clip", min_width=16),
            Col("reasons", "clip", min_width=10, drop_order=2),
            Col("label", "label", drop_order=1),
            Col("status", "label"),
        ],
        show_edge=False,
    )
    table.add_row(
        "12-02 00:22", "21636369-8b52-4b4a-97b7-50923ceb3ffd", "怎么查看版本", "bad_rating", "—", "new"
    )
    narrow = plain_lines([table], 60)
    assert [line.split(":")[0] for line in narrow] == [
        "time",
        "request_id",
        "query",
        "reasons",
        "label",
        "status",
    ]
    assert "reasons:    bad_rating" in [line.rstrip() for line in narrow]
    # Wide enough once the first optional column is left out: a one-line row without it.
    row = plain_lines([table], 90)
    assert len(row) == 3 and "label" not in row[0] and "reasons" in row[0]
    assert "21636369-8b52-4b4a-97b7-50923ceb3ffd" in row[2]
