"""`ragtriage eval score`: TREC run files scored against qrels, end to end through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragtriage.cli import cli

QRELS = "q1 0 x1 1\nq2 0 x2 1\nq2 0 x3 1\nq2 0 x4 1\nq3 0 x5 1\nq4 0 x6 1\nq5 0 x7 0\n"
# Known fault 4: q3 returned nothing, so the run has no line for it; q9 has no qrels.
RUN = "q1 Q0 x1 1 9.0 sys\nq2 Q0 x4 1 8.0 sys\nq4 Q0 x6 1 7.0 sys\nq4 Q0 x6 2 6.0 sys\nq9 Q0 x1 1 5.0 sys\n"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    qrels = tmp_path / "qrels.txt"
    run = tmp_path / "run.txt"
    qrels.write_text(QRELS, encoding="utf-8")
    run.write_text(RUN, encoding="utf-8")
    return qrels, run


def invoke(*args: str):
    return CliRunner().invoke(cli, ["eval", "score", *args], catch_exceptions=False)


def test_json_output_has_per_query_means_and_counts(files):
    qrels, run = files
    result = invoke("--qrels", str(qrels), "--run", str(run), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) >= {"per_query", "mean", "queries", "skipped_no_qrels", "warnings"}
    assert report["mean"]["mrr"] == 0.75
    assert report["queries"] == 4 and report["skipped_no_qrels"] == 1
    assert report["per_query"]["q3"]["mrr"] == 0.0
    assert report["per_query"]["q2"]["recall@10"] == pytest.approx(1 / 3)
    assert report["per_query"]["q2"]["mrr"] == 1.0
    assert report["per_query"]["q4"]["p@5"] == 0.2  # the repeated x6 counts once
    assert set(report["per_query"]["q1"]) == {
        f"{m}@{k}" for m in ("p", "recall", "hit", "ndcg") for k in (1, 3, 5, 10, 20)
    } | {"mrr"}
    warnings = "\n".join(report["warnings"])
    assert "missing from the run; they score 0" in warnings and "q3" in warnings
    assert "repeat ids" in warnings and "q4" in warnings
    assert "no qrels and were skipped: q9" in warnings
    assert "no relevant id" in warnings and "q5" in warnings


def test_metrics_and_ks_select_the_columns(files):
    qrels, run = files
    result = invoke(
        "--qrels", str(qrels), "--run", str(run), "--json", "--metrics", "p@5,recall@10", "--metrics", "mrr@1"
    )
    report = json.loads(result.stdout)
    assert list(report["mean"]) == ["p@5", "recall@10", "mrr@1"]
    result = invoke("--qrels", str(qrels), "--run", str(run), "--json", "--ks", "2")
    assert list(json.loads(result.stdout)["mean"]) == ["p@2", "recall@2", "hit@2", "ndcg@2", "mrr"]


def test_table_output_goes_to_stdout_and_warnings_to_stderr(files):
    qrels, run = files
    result = invoke("--qrels", str(qrels), "--run", str(run), "--metrics", "mrr,ndcg@10")
    assert result.exit_code == 0
    assert "mrr" in result.stdout and "0.7500" in result.stdout and "4 queries" in result.stdout
    assert "warning:" not in result.stdout
    assert "skipped (no qrels): 1" in result.stderr
    assert "warning: 1 judged queries are missing from the run" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metrics", "ndgc@10"], "did you mean ndcg@10?"),
        (["--metrics", "coverage@30"], "needs the candidate list before rerank"),
        (["--ks", "0"], "not a positive integer"),
    ],
)
def test_bad_metric_options_exit_2(files, args, message):
    qrels, run = files
    result = CliRunner().invoke(cli, ["eval", "score", "--qrels", str(qrels), "--run", str(run), *args])
    assert result.exit_code == 2
    assert message in result.output


def test_bad_run_line_is_one_stderr_line_and_exit_2(files, tmp_path):
    qrels, _ = files
    bad_run = tmp_path / "bad.run"
    bad_run.write_text("q1 Q0 x1 1 9.0 sys\nq1 Q0 x2 2\n", encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-m", "ragtriage", "eval", "score", "--qrels", str(qrels), "--run", str(bad_run)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr.strip() == (
        f"input error: {bad_run}:2: a run line has 6 columns `qid Q0 docid rank score tag`, found 4 "
        "(this looks like a qrels line; pass it as --qrels)"
    )


def test_swapped_files_are_explained(files):
    qrels, run = files
    result = CliRunner().invoke(cli, ["eval", "score", "--qrels", str(run), "--run", str(qrels)])
    assert result.exit_code != 0
    assert "this looks like a TREC run line" in str(result.exception)
    assert "swapped" in str(result.exception)


def test_id_namespace_mismatch_is_flagged(tmp_path):
    qrels = tmp_path / "qrels"
    run = tmp_path / "run"
    qrels.write_text("q1 0 faq#c1 1\n", encoding="utf-8")
    run.write_text("q1 Q0 faq 1 1.0 sys\n", encoding="utf-8")
    report = json.loads(invoke("--qrels", str(qrels), "--run", str(run), "--json").stdout)
    assert any("chunk ids vs document ids" in warning for warning in report["warnings"])
