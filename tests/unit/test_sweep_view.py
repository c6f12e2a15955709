"""The chunk-size sweep table at 80 columns stays one row per size: the KB size and the unmapped
count make room first (the unmapped counts are repeated in a line below)."""

from __future__ import annotations

import pytest

from ragtriage.commands.eval_sweep import print_sweep
from ragtriage.eval.chunk_sweep import SweepRow, SweepTable


def _row(chars: int, chunks: int, unmapped: int, mrr: float, best: bool) -> SweepRow:
    return SweepRow(
        target_chars=chars,
        max_chars=chars * 3 // 2,
        overlap_chars=150,
        documents=17,
        chunks=chunks,
        ranking_cases=120,
        unmapped_cases=unmapped,
        metrics={"hit@5": 0.9917, "recall@10": 0.9917, "mrr": mrr},
        best=best,
    )


def test_the_sweep_table_stays_horizontal_at_80_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    table = SweepTable(
        dataset="default",
        dataset_version=1,
        metrics=["hit@5", "recall@10", "mrr"],
        rows=[_row(800, 172, 0, 0.9708, True), _row(2000, 155, 3, 0.9625, False)],
        cases=120,
    )
    print_sweep(table)
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines()), out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 2 and "◀ best" in rows[0] and "0.9708" in rows[0] and "0.9625" in rows[1], out
    assert "scored as misses: 800 chars 0, 2000 chars 3" in " ".join(out.split())
