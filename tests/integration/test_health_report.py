"""`ragtriage report --monitor`: the figures of `ragtriage monitor` over the fixture request logs as one
self-contained HTML file with a trend chart."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import FIXTURES_DIR, run_ragtriage


def test_health_report_of_the_fixture_logs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert (
        run_ragtriage(home, "logs", "ingest", str(FIXTURES_DIR / "logs" / "requests.jsonl")).returncode == 0
    )
    out = tmp_path / "health.html"
    result = run_ragtriage(home, "report", "--monitor", "--since", "2026-11-01", "-o", str(out))
    assert result.returncode == 0, result.stderr
    html = out.read_text(encoding="utf-8")
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert "Retrieval health by day" in text and "267 requests" in text
    assert "2026-11-03 146 0.0000 0.4384" in text  # requests, empty-result and rewrite-trigger rate
    assert html.count('<svg class="chart"') == 1 and "<script" not in html
    assert re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|url\(\s*["']?(?!#)|@import""", html) is None


def test_monitor_takes_no_run(tmp_path: Path) -> None:
    result = run_ragtriage(tmp_path / "home", "report", "3", "--monitor", "-o", str(tmp_path / "x.html"))
    assert result.returncode == 2 and "--monitor reports the stored logs, not a run" in result.stderr
    result = run_ragtriage(tmp_path / "home", "report", "-o", str(tmp_path / "x.html"))
    assert result.returncode == 2 and "give a RUN" in result.stderr
