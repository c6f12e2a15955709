"""`--help` texts a new user reads first: they name what the command accepts and define each figure."""

from __future__ import annotations

from click.testing import CliRunner

from ragtriage.cli import cli


def _help(*command: str) -> str:
    result = CliRunner().invoke(cli, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_kb_add_help_names_every_format_it_reads() -> None:
    text = _help("kb", "add")
    for name in ("Markdown", "HTML", ".docx", ".pptx", "PDF"):
        assert name in text
