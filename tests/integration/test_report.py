"""`ragtriage report` and `eval gate --report`: one self-contained HTML file from two stored runs
(tiny real KB), every logged text escaped, and a comparison across eval sets refused."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ragtriage.eval.cases import EvalCase
from ragtriage.eval.runner import run_eval
from ragtriage.store import eval_repo as eval_store
from ragtriage.workspace import Workspace
from tests.conftest import run_ragtriage
from tests.service_home import XSS_QUERY, XSS_TAG, EvalHome

#: Anything that would make a browser fetch something: a URL in src/href/action, CSS url() of anything
#: but a fragment of the page itself (SVG clip paths use `url(#id)`), or @import.
NETWORK_REFERENCE = re.compile(
    r"""(?:src|href|action|srcset|poster|data)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?(?!#)|@import""",
    re.I,
)


class _Elements(HTMLParser):
    """Tags and attributes of a document, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(html)
    return parser.tags


def _mrr_pair(eval_home: EvalHome) -> tuple[float, float, list[float]]:
    """(base mean MRR, variant mean MRR, per-case deltas) as stored: the report must print these."""
    workspace = Workspace.open(eval_home.home)
    try:
        means = [
            eval_store.get_run(workspace.engine, run).aggregates["means"]["mrr"]
            for run in (eval_home.base_run, eval_home.variant_run)
        ]
        per_case = [
            {
                row.case_id: row.metrics["mrr"]
                for row in eval_store.run_case_results(workspace.engine, run, snapshots=False)
                if "mrr" in row.metrics  # a no-answer case has no ranking metrics
            }
            for run in (eval_home.base_run, eval_home.variant_run)
        ]
    finally:
        workspace.close()
    deltas = [per_case[1][case] - per_case[0][case] for case in sorted(per_case[0]) if case in per_case[1]]
    return means[0], means[1], deltas


@pytest.fixture(scope="module")
def comparison_report(eval_home: EvalHome, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("report") / "nested" / "report.html"
    result = run_ragtriage(
        eval_home.home, "report", str(eval_home.base_run), "--compare", "variant", "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == f"wrote {out}"
    return out.read_text(encoding="utf-8")


def test_report_is_one_file_without_network_references_or_scripts(comparison_report: str) -> None:
    assert NETWORK_REFERENCE.search(comparison_report) is None
    tags = _elements(comparison_report)
    assert not [t for t, _ in tags if t in ("script", "link", "iframe", "img", "object", "embed")]
    assert not [a for _, a in tags for name in a if name.startswith("on")]  # no event handlers


def test_report_holds_the_charts_as_inline_svg(comparison_report: str) -> None:
    charts = [a for t, a in _elements(comparison_report) if t == "svg" and a.get("class") == "chart"]
    labels = [a["aria-label"] for a in charts]
    assert len(charts) == 3, labels
    assert labels[0].startswith("metric by bucket") and "per-case" in labels[1] and "rank-shift" in labels[2]
    for section in ("chart-buckets", "chart-scatter", "chart-rank-shift"):
        figure = comparison_report.split(f'id="{section}"', 1)[1].split("</figure>", 1)[0]
        assert figure.count("<path") + figure.count("<use") >= 6, section  # bars and dots were drawn


def test_report_has_metrics_config_dataset_significance_and_worst_cases(
    comparison_report: str, eval_home: EvalHome
) -> None:
    text = re.sub(r"<[^>]+>", " ", comparison_report)
    text = re.sub(r"\s+", " ", text)
    assert "run 1 (base) vs run 2 (variant)" in text
    assert "default@7" in text and "granularity chunk" in text
    assert "recall@5 1.0000 0.8333 -0.1667" in text  # metric table: A, B, delta over 6 paired cases
    base_mrr, variant_mrr, deltas = _mrr_pair(eval_home)
    wins, losses = sum(d > 0 for d in deltas), sum(d < 0 for d in deltas)
    assert (len(deltas), wins, losses) == (6, 0, 1)  # the variant loses one case's gold, nothing else moves
    mean_delta = sum(deltas) / len(deltas)
    # win/tie/loss, mean delta and the exact sign test (one loss of six cannot be significant)
    assert f"mrr 0 5 1 {mean_delta:.4f} 1.0000 not significant (exact, n = 6)" in text
    assert f"mrr {base_mrr:.4f} {variant_mrr:.4f} {variant_mrr - base_mrr:+.4f}" in text
    assert "rerank.top_n 6 1" in text  # the setting that differs between the runs
    assert "2 settings differ between A and B:" in text and "(s)" not in text
    # The regressed case with its gold journey in both runs: reached the final context in A, cut in B.
    travel = eval_home.chunks["travel"]
    assert "Regressed cases on mrr" in text and "出差回来发票多久内要交 &lt;script&gt;" in text
    # In A every stage kept it (its ranks depend on the rerank weights; the journey's words do not).
    assert re.search(rf"{re.escape(travel)}( [1-6]){{5}} reached the final context", text)
    assert re.search(rf"{re.escape(travel)} – 1 1 2 – final", text)


def test_logged_and_document_text_is_escaped(eval_home: EvalHome, tmp_path: Path) -> None:
    out = tmp_path / "single.html"
    assert run_ragtriage(eval_home.home, "report", "base", "-o", str(out)).returncode == 0
    html = out.read_text(encoding="utf-8")
    for raw in (XSS_TAG, '<script>alert("q")</script>'):
        assert raw not in html
    assert "tag:&lt;img src=x onerror=alert(1)&gt;" in html  # the tag in the bucket table
    assert not [t for t, _ in _elements(html) if t in ("script", "img")]
    assert "财务" in html and "tag:人事" in html


def test_a_logged_query_in_the_worst_cases_is_escaped(comparison_report: str) -> None:
    assert XSS_QUERY not in comparison_report
    assert "出差回来发票多久内要交 &lt;script&gt;alert(&#34;q&#34;)&lt;/script&gt;" in comparison_report


def test_compare_with_a_run_of_another_eval_set_is_one_line_and_exit_2(
    eval_home: EvalHome, tmp_path: Path
) -> None:
    other = tmp_path / "home"
    result = run_ragtriage(
        eval_home.home, "report", "base", "--compare", "no-such-run", "-o", str(other / "x.html")
    )
    assert result.returncode == 2 and result.stderr.strip() == (
        "not found: no eval run 'no-such-run'; list them with `ragtriage eval runs`"
    )
    workspace = Workspace.open(eval_home.home, None)
    try:
        eval_store.add_cases(
            workspace.engine, "other-set", [EvalCase(case_id="o1", query="请假要谁审批", gold={"leave#x": 1})]
        )
        other_run = run_eval(workspace, "other-set", name="other").run_id
    finally:
        workspace.close()
    result = run_ragtriage(
        eval_home.home, "report", "base", "--compare", str(other_run), "-o", str(tmp_path / "x.html")
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"input error: --compare {other_run}: run {other_run}")
    assert "'other-set'" in lines[0] and "same eval set" in lines[0]
    assert not (tmp_path / "x.html").exists()


def test_gate_writes_the_report_next_to_its_verdict(eval_home: EvalHome, tmp_path: Path) -> None:
    out = tmp_path / "gate.html"
    result = run_ragtriage(
        eval_home.home,
        "eval",
        "gate",
        "--run",
        "variant",
        "--baseline",
        "base",
        "--max-drop",
        "mrr=0.05",
        "--report",
        str(out),
    )
    base_mrr, variant_mrr, _ = _mrr_pair(eval_home)
    assert base_mrr - variant_mrr > 0.05  # the drop the gate must catch
    assert result.returncode == 1
    assert "gate FAILED for run 2" in result.stdout and f"wrote {out}" in result.stderr
    html = out.read_text(encoding="utf-8")
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert "CI gate: FAILED for run 2 against run 1" in text
    assert f"FAIL --max-drop mrr=0.05 mrr {base_mrr:.4f} → {variant_mrr:.4f}" in text
    assert "run 1 (base) vs run 2 (variant)" in text


def test_eval_show_prints_the_run_as_the_api_returns_it(eval_home: EvalHome) -> None:
    result = run_ragtriage(eval_home.home, "eval", "show", "base", "--limit", "2")
    assert result.returncode == 0, result.stderr
    assert "run 1 (base) of KB default on default@7: complete, 7/7 cases" in result.stdout
    assert "cases 1–2 of 7; next page: --offset 2" in result.stdout
