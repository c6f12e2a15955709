"""Test isolation: no test sees the developer's config, home or caches; nothing goes to the network."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = REPO_ROOT.parent / "shared"
FIXTURES_DIR = REPO_ROOT / "fixtures"
TEST_DATA_DIR = Path(__file__).resolve().parent / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point RAGTRIAGE_HOME and the config file into tmp_path; drop RAGTRIAGE__ overrides and COLUMNS."""
    home = tmp_path / "home"
    monkeypatch.setenv("RAGTRIAGE_HOME", str(home))
    monkeypatch.delenv("RAGTRIAGE_CONFIG_FILE", raising=False)
    for name in list(os.environ):
        if name.startswith("RAGTRIAGE__"):
            monkeypatch.delenv(name, raising=False)
    # xdist workers inherit COLUMNS=80 from somewhere in their start-up; output width must come
    # from each test (CliRunner env or monkeypatch), not from how the suite was launched.
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    return home


@pytest.fixture
def home(isolated_environment: Path) -> Path:
    """The isolated data folder of this test."""
    return isolated_environment


@pytest.fixture(scope="session")
def eval_home(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A home with the tiny KB, promoted badcases and runs `base` and `variant` (tests.service_home),
    built once per worker. Tests may add runs but must not change the eval set."""
    from tests.service_home import build_eval_home, isolated_env

    root = tmp_path_factory.mktemp("eval_home")
    with isolated_env(root / "home"):
        return build_eval_home(root)
