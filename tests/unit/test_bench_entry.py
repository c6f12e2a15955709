"""`scripts/bench.py`: RESULT lines, target verdicts and the table between the markers."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("bench", "bench_entry")


OUTPUT = """\
some human-readable line
RESULT name=ingest_rate value=41234 unit=lines/s target=>=30000 ratio=0.62 baseline=json.loads lines=1000
RESULT name=metrics_batch value=1.5 unit=s target=ratio<=0.333 ratio=0.5 baseline=pytrec_eval
RESULT name=index_full_build value=12.5 unit=s
not a RESULT line
"""


def test_result_lines_are_parsed_with_their_notes(bench: ModuleType) -> None:
    results = bench.parse_results(OUTPUT)
    assert [r.name for r in results] == ["ingest_rate", "metrics_batch", "index_full_build"]
    ingest = results[0]
    assert (ingest.value, ingest.unit, ingest.target, ingest.ratio, ingest.baseline) == (
        41234.0,
        "lines/s",
        ">=30000",
        0.62,
        "json.loads",
    )
    assert ingest.notes == {"lines": "1000"}


@pytest.mark.parametrize(
    "value, target, ratio, verdict",
    [
        (41234.0, ">=30000", None, "pass"),
        (2000.0, ">=30000", None, "fail"),
        (150.0, "<=200", None, "pass"),
        (1.5, "ratio<=0.333", 0.5, "fail"),
        (1.5, "ratio<=0.333", 0.3, "pass"),
        (1.5, "ratio<=0.333", None, "-"),
        (12.5, "", None, "-"),
        (None, "<=10", None, "-"),
    ],
)
def test_verdict_compares_value_or_ratio_with_the_target(
    bench: ModuleType, value: float | None, target: str, ratio: float | None, verdict: str
) -> None:
    assert bench.Result(name="x", value=value, target=target, ratio=ratio).verdict() == verdict


def test_table_keeps_rows_of_benchmarks_not_run_and_the_text_around(
    bench: ModuleType, tmp_path: Path
) -> None:
    doc = tmp_path / "benchmarks.md"
    old_row = (
        "| `queue` | queue_first_page | 120 ms | - | <=200 | pass | full | 2026-01-01 00:00 | 1.0 | `x` |"
    )
    doc.write_text(
        f"# Benchmarks\n\nprose before\n\n{bench.START_MARKER}\n{bench.HEADER}\n{old_row}\n"
        f"| `ingest` | stale | 1 | - | - | - | full | - | - | `y` |\n{bench.END_MARKER}\n\nprose after\n",
        encoding="utf-8",
    )
    run = bench.BenchRun(
        "ingest", ["python", "scripts/bench_ingest.py"], 0, 1.0, bench.parse_results(OUTPUT)[:1], False
    )
    bench.write_table([run], doc)
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Benchmarks\n\nprose before") and text.rstrip().endswith("prose after")
    assert old_row in text and "| `ingest` | stale" not in text
    ingest_row = next(line for line in text.splitlines() if "ingest_rate" in line)
    assert "41,234 lines/s" in ingest_row and "0.62 × json.loads" in ingest_row and "| pass |" in ingest_row
    assert "cores" in text and "load average" in text
    # Every first-round target has a row, measured or not.
    for name in bench.TARGETS:
        assert f"| `{name}` |" in text
