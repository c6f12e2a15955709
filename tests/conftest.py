"""Test isolation: no test sees the developer's config, home or caches; nothing goes to the network."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

# numba reads this when it is first imported, and re-reads it later: set for the whole session before
# any test imports it (bm25s imports numba when installed), or kernels compiled with the JIT on call
# kernels defined with it off. ranx's kernels take minutes of JIT compilation per process on 2 cores
# for the oracle tests' tiny runs; interpreted they run the same code in a second.
os.environ["NUMBA_DISABLE_JIT"] = "1"

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from ragtriage.store import triage_repo
    from ragtriage.workspace import Workspace

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = REPO_ROOT.parent / "shared"
FIXTURES_DIR = REPO_ROOT / "fixtures"
TEST_DATA_DIR = Path(__file__).resolve().parent / "data"


def load_script(name: str, module_name: str | None = None) -> ModuleType:
    """Import `scripts/<name>.py` as module `module_name` (default `name`); scripts/ is not a package,
    and its modules import each other by name, so scripts/ goes on sys.path."""
    scripts = str(REPO_ROOT / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    spec = importlib.util.spec_from_file_location(module_name or name, REPO_ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


#: Settings that load the fixture KB's alias dictionary.
ALIASES_CONFIG = f'[rewrite]\nalias_file = "{(FIXTURES_DIR / "aliases.toml").as_posix()}"\n'

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


@pytest.fixture
def workspace(home: Path) -> Iterator[Workspace]:
    """A workspace on this test's home (its `config.toml`, if the test wrote one), closed after the
    test. Modules that need another workspace define their own fixture of this name."""
    from ragtriage.workspace import Workspace

    opened = Workspace.open(home, None)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="session")
def eval_home(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A home with the tiny KB, promoted badcases and runs `base` and `variant` (tests.service_home),
    built once per worker. Tests may add runs but must not change the eval set."""
    from tests.service_home import build_eval_home, isolated_env

    root = tmp_path_factory.mktemp("eval_home")
    with isolated_env(root / "home"):
        return build_eval_home(root)


@pytest.fixture(scope="session")
def llamaindex_production(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A team's LlamaIndex production over Debian FAQ pages, traced by OpenInference
    (`tests.llamaindex_production`), built once per session (about 20 s); skipped, saying so, when
    the Debian packages are not in ../shared/data."""
    from tests.llamaindex_production import FAQ_DEB, build_llamaindex_production, faq_available

    if not faq_available():
        pytest.skip(f"real data absent: no {FAQ_DEB} (the LlamaIndex production is built over it)")
    return build_llamaindex_production(tmp_path_factory.mktemp("llamaindex-production"))


@pytest.fixture(scope="session")
def langchain_production(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A team's LangChain production over two Debian Reference chapters, traced by OpenInference
    (`tests.langchain_production`), built once per session (about 40-80 s on 2 cores, embedding
    the chunks); skipped, saying so, when the Debian Reference package is not in ../shared/data."""
    from tests.langchain_production import REFERENCE_DEB, reference_available

    if not reference_available():
        pytest.skip(f"real data absent: no {REFERENCE_DEB} (the LangChain production is built over it)")
    from tests.langchain_production import build_langchain_production

    return build_langchain_production(tmp_path_factory.mktemp("langchain-production"))


class CliOutcome(NamedTuple):
    """What one run of the console entry point gave."""

    code: int
    out: str
    err: str


RunCli = Callable[[list[str]], CliOutcome]


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> RunCli:
    """Run the console entry point on `args` as a shell would (`cli.main`: a `RagtriageError` is one
    stderr line and exit 2); returns (exit code, stdout, stderr)."""
    from ragtriage.cli import main

    def run(args: list[str]) -> CliOutcome:
        monkeypatch.setattr(sys, "argv", ["ragtriage", *args])
        try:
            main()
            code = 0
        except SystemExit as stop:
            code = int(stop.code or 0)
        captured = capsys.readouterr()
        return CliOutcome(code, captured.out, captured.err)

    return run


def copy_fixture_docs(folder: Path, relatives: Iterable[str]) -> Path:
    """Copy the fixture KB's documents `relatives` (paths under fixtures/kb) into `folder`; returns it."""
    for relative in relatives:
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES_DIR / "kb" / relative, folder / relative)
    return folder


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    """Write `rows` as UTF-8 JSON Lines (Chinese kept as is); returns `path`."""
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


@contextmanager
def fixture_workspace(root: Path, docs: Iterable[str], config: str = ALIASES_CONFIG) -> Iterator[Workspace]:
    """`root/home` with settings `config`, whose KB is the fixture documents `docs` (copied to
    `root/kb`) added and indexed, the embedding cache seeded; the workspace is open inside the block."""
    from ragtriage.index.kb_sync import add_paths
    from ragtriage.workspace import Workspace
    from ragtriage_demo.demo import seed_embedding_cache

    home, kb = root / "home", copy_fixture_docs(root / "kb", docs)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config, encoding="utf-8")
    workspace = Workspace.open(home)
    try:
        seed_embedding_cache(workspace)
        add_paths(workspace.home, workspace.settings, workspace.engine, [kb])
        yield workspace
    finally:
        workspace.close()


def triage_record(home: Path, request_id: str) -> triage_repo.TriageRecord:
    """The triage record of `request_id` as stored in `home` now."""
    from ragtriage.store import triage_repo
    from ragtriage.workspace import Workspace

    workspace = Workspace.open(home)
    try:
        return triage_repo.get_record(workspace.engine, request_id)
    finally:
        workspace.close()


def live_postgres_engine() -> Engine:
    """An engine on `RAGTRIAGE_TEST_POSTGRES_URL` (CI starts a throwaway server); skips without one."""
    from ragtriage.store.db import make_engine

    url = os.environ.get(
        "RAGTRIAGE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@localhost:5432/postgres"
    )
    pytest.importorskip("psycopg")
    try:
        engine = make_engine(url)
        with engine.connect():
            pass
    except Exception as error:  # any connection failure means: no server here
        pytest.skip(f"no PostgreSQL server reachable at {url}: {error}")
    return engine


def run_ragtriage(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m ragtriage --home HOME ARGS…` as its own process (text output, 300 s at most)."""
    return subprocess.run(
        [sys.executable, "-m", "ragtriage", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def stored_requests(home: Path) -> dict[str, Any]:
    """Request id → the `RequestLog` `logs ingest` stored in `home`."""
    from sqlalchemy import select

    from ragtriage.logs.schema import RequestLog
    from ragtriage.store.db import read_session
    from ragtriage.store.log_tables import RequestLogRow
    from ragtriage.workspace import Workspace

    workspace = Workspace.open(home)
    try:
        with read_session(workspace.engine) as session:
            rows = session.execute(select(RequestLogRow)).scalars().all()
            return {row.request_id: RequestLog.model_validate_json(row.body) for row in rows}
    finally:
        workspace.close()
