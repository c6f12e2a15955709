"""`ragtriage demo --headless` on a fresh home, then again (the second run reuses everything)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def demo_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, list[subprocess.CompletedProcess[str]]]:
    home = tmp_path_factory.mktemp("demo") / "home"
    runs = []
    for _ in range(2):
        runs.append(
            subprocess.run(
                [sys.executable, "-m", "ragtriage", "demo", "--home", str(home), "--headless"],
                capture_output=True,
                text=True,
                timeout=900,
            )
        )
    return home, runs


def test_first_run_builds_everything_and_prints_the_summary(demo_runs) -> None:  # type: ignore[no-untyped-def]
    home, runs = demo_runs
    first = runs[0]
    assert first.returncode == 0, first.stderr
    stdout = " ".join(first.stdout.split())  # Rich wraps table titles
    assert "flagged requests by suggested root cause" in stdout
    assert "gold journey (replay)" in stdout
    # The case the demo points a new user to is one whose suggestion its own replay confirms.
    assert "replay)" in stdout.split("showcase", 1)[1] and "confirmed by the" in stdout
    assert "eval run 1" in stdout and "recall@5" in stdout
    assert (home / "config.toml").exists() and (home / "aliases.toml").exists()


def test_second_run_reuses_what_exists(demo_runs) -> None:  # type: ignore[no-untyped-def]
    _, runs = demo_runs
    second = runs[1]
    assert second.returncode == 0, second.stderr
    assert "reused: kb, logs, diagnosis, eval" in " ".join(second.stderr.split())
    # Reuse is shown by what the second run says and did, not by its wall time (flaky under load).
    assert "eval run 1" in " ".join(second.stdout.split())  # no second run was started


@pytest.mark.realdata
def test_real_demo_over_the_debian_faq_has_badcases(tmp_path: Path) -> None:
    """`demo --real --headless`: the FAQ is extracted, indexed and served by an imperfect production."""
    from ragtriage_demo.debian_docs import DEFAULT_DEBS_DIR

    if not any(DEFAULT_DEBS_DIR.glob("debian-faq-zh-cn_*.deb")):
        pytest.skip(f"real data absent: no debian-faq-zh-cn_*.deb in {DEFAULT_DEBS_DIR}")
    home = tmp_path / "home"
    run = subprocess.run(
        [sys.executable, "-m", "ragtriage", "demo", "--real", "--headless", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stderr
    stdout = " ".join(run.stdout.split())
    flagged = int(stdout.split(" flagged requests by")[0].split()[-1])
    assert flagged > 0
    assert "gold journey (replay)" in stdout and "recall@5" in stdout


def test_without_a_terminal_demo_prints_the_summary_and_tui_explains(demo_runs) -> None:  # type: ignore[no-untyped-def]
    home, _ = demo_runs
    demo = subprocess.run(
        [sys.executable, "-m", "ragtriage", "demo", "--home", str(home)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert demo.returncode == 0, demo.stderr
    assert "not a terminal" in demo.stderr
    assert "flagged requests by suggested root cause" in " ".join(demo.stdout.split())
    tui = subprocess.run(
        [sys.executable, "-m", "ragtriage", "tui", "--home", str(home)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tui.returncode == 2
    assert "the TUI needs a terminal" in tui.stderr and "Traceback" not in tui.stderr
