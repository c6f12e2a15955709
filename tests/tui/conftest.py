"""A small real home for TUI tests: the fixture KB (embeddings from the shipped cache), a dozen logged
requests at frozen times, diagnosed once per session and copied for every test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragtriage.workspace import Workspace

#: A logged query whose text is Rich/Textual markup: it must show literally.
MARKUP_QUERY = "[bold]x[/bold] 年假 [link=http://x]y[/link]"
#: Answer-key ids used for the test traffic: one per designed failure plus a few that succeed.
QIDS = ("q002", "q003", "q004", "q005", "q006", "q007", "q010", "q011", "q012", "q013", "q014", "q015")
SIZE = (120, 36)


def _build(home: Path) -> None:
    from datetime import timedelta

    from ragtriage.index.kb_sync import add_paths
    from ragtriage.logs.ingest import ingest_lines
    from ragtriage_demo.demo import (
        FIXTURES,
        TRAFFIC_START,
        diagnose_flagged,
        fixture_answer_keys,
        generate_traffic,
        seed_embedding_cache,
        traffic_line,
        write_demo_config,
    )

    write_demo_config(home, FIXTURES / "aliases.toml")
    # Refusal off, as the fixture traffic's production ran: the markup query's words (bold, link,
    # http) are in no chunk, so the default refusal's out-of-vocabulary veto would refuse it and
    # change its queue row; how a refusal is shown is tested in tests/unit/test_lexical_support.py.
    with (home / "config.toml").open("a", encoding="utf-8") as config:
        config.write('\n[rerank]\nrefusal_threshold = "off"\n')
    workspace = Workspace.open(home)
    try:
        seed_embedding_cache(workspace)
        add_paths(workspace.home, workspace.settings, workspace.engine, [FIXTURES / "kb"])
        keys = [key for key in fixture_answer_keys(workspace) if key.qid in QIDS]
        lines = generate_traffic(workspace, keys, "fx")
        markup_trace = workspace.pipeline.run(MARKUP_QUERY)
        lines.append(traffic_line("fx-markup", TRAFFIC_START - timedelta(hours=1), markup_trace, ["nope"]))
        ingest_lines(workspace.engine, lines, source="tui-test", flagging=workspace.settings.logs.flagging)
        diagnose_flagged(workspace, keys)
    finally:
        workspace.close()


@pytest.fixture(scope="session")
def base_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per session (about half a minute, mostly the first pipeline build)."""
    home = tmp_path_factory.mktemp("tui-base") / "home"
    _build(home)
    return home


@pytest.fixture
def tui_home(base_home: Path, tmp_path: Path) -> Path:
    """A private copy of the base home (tests write labels, notes and runs)."""
    home = tmp_path / "tui-home"
    shutil.copytree(base_home, home)
    return home


@pytest.fixture
def workspace(tui_home: Path) -> Iterator[Workspace]:
    """A workspace on the private home, closed after the test."""
    ws = Workspace.open(tui_home)
    yield ws
    ws.close()
