"""Ctrl-C during `kb import`: a real import process, interrupted as a terminal does (SIGINT to its
whole process group), exits 130 with one line saying what was left, and nothing is half-imported:
no chunk in the KB, no manifest, no BM25 index, no dense point, no process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragtriage import locations
from ragtriage.interrupts import latched_interrupts
from ragtriage.store.kb_repo import kb_revision
from ragtriage.workspace import Workspace
from tests.conftest import RunCli
from tests.terminal_signals import as_from_a_terminal, child_pids, default_sigint

PROC = Path("/proc")
pytestmark = pytest.mark.skipif(not (PROC / "self" / "task").is_dir(), reason="watches /proc (Linux)")
REPO_ROOT = Path(__file__).resolve().parents[2]
ROWS = 4000
NOTHING_IMPORTED = "kb import: interrupted; nothing was imported (the KB and its indexes are as they were)"
SENTENCES = [
    "出差结束后十五天内提交发票原件。",
    "VPN 连接失败时先检查客户端版本。",
    "会议室可以提前七天预订。",
]


def _export(path: Path) -> Path:
    """A Parquet chunk export with UUID ids and unit 384-d vectors (nothing to embed)."""
    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(ROWS, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    table = pa.table(
        {
            "id": [str(uuid.UUID(int=int(n) + 1, version=4)) for n in range(ROWS)],
            "document_id": [f"doc-{n // 10}" for n in range(ROWS)],
            "content": [f"{SENTENCES[n % 3]}第{n}条。" * 8 for n in range(ROWS)],
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), 384),
        }
    )
    pq.write_table(table, path, row_group_size=500)
    return path


def _has_open(pid: int, path: Path) -> bool:
    for fd in (PROC / str(pid) / "fd").glob("*"):
        try:
            if Path(os.readlink(fd)) == path:
                return True
        except OSError:
            pass
    return False


def _streamed_points(pid: int) -> bool:
    """The import has written a batch inside its transaction and sent its points to the dense
    process (its spill file, unlinked but open, is not empty)."""
    for fd in (PROC / str(pid) / "fd").glob("*"):
        try:
            if "points.pickle" in os.readlink(fd) and fd.stat().st_size > 0:
                return True
        except OSError:
            pass
    return False


def _wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the import ended or hung before {what} (exit {process.poll()})")
        time.sleep(0.01)


@pytest.mark.parametrize("moment", ["source opened", "pass writing, workers forked"])
def test_ctrl_c_stops_the_import_and_leaves_nothing(tmp_path: Path, moment: str) -> None:
    export = _export(tmp_path / "chunks.parquet")
    home = tmp_path / "home"
    home.mkdir()
    # Small batches: the pass writes several inside its transaction. The dense process and the
    # segmenters are forked before the pass.
    (home / "config.toml").write_text(
        '[kb.import]\nbatch_size = 100\n[index]\nbm25_engine = "bm25s"\n',
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "ragtriage", "--home", str(home), "kb", "import", str(export)]
    command += ["--map", "chunk_id=id,doc_id=document_id", "--vector-field", "embedding"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=as_from_a_terminal,  # a test run started with `&` would pass on SIGINT ignored
    )
    if moment == "source opened":
        _wait_for(lambda: _has_open(process.pid, export), process, "it opened the export")
    else:
        segmenters = min(2, os.cpu_count() or 1)  # `bm25_procs` (2), one: none forked
        workers = 1 + (segmenters if segmenters > 1 else 0)
        _wait_for(
            lambda: len(child_pids(process.pid)) >= workers and _streamed_points(process.pid),
            process,
            "it forked its workers and wrote a batch",
        )

    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == 130, stderr
    assert stderr.endswith(NOTHING_IMPORTED + "\n")
    assert not stderr.startswith("\n") and "\n\n" not in stderr  # no empty line before it (click's)
    assert "Traceback" not in stderr
    with pytest.raises(ProcessLookupError):  # the dense process and the segmenters are gone too
        for _ in range(100):
            os.killpg(process.pid, 0)
            time.sleep(0.05)
    workspace = Workspace.open(home)
    try:
        assert kb_revision(workspace.engine, workspace.settings.kb.name) == 0
    finally:
        workspace.close()
    assert not locations.manifest_path(home).exists()
    assert not (locations.bm25s_dir(home) / "current").exists()


def test_the_parquet_reader_never_imports_pandas(tmp_path: Path) -> None:
    """Arrow's first `to_numpy` imports pandas from C++, which drops a KeyboardInterrupt raised during
    that import: a Ctrl-C in that second or two was ignored and the import ran to its end."""
    values = pa.array(np.arange(12, dtype=np.float32))
    table = pa.table({"id": ["a", "b", "c"], "v": pa.FixedSizeListArray.from_arrays(values, 4)})
    pq.write_table(table, tmp_path / "v.parquet")
    code = (
        "import sys, pathlib\n"
        "from ragtriage.kb.import_files import FileSource\n"
        f"source = FileSource(pathlib.Path({str(tmp_path / 'v.parquet')!r}), vector_field='v')\n"
        "rows = [row for batch in source.batches() for row in batch]\n"
        "print([row.vector.tolist() for row in rows], 'pandas' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    rows = [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]]
    assert result.stdout.strip() == f"{rows} False"


def test_a_swallowed_interrupt_is_raised_again_at_the_next_check() -> None:
    with default_sigint():  # as in a terminal, however this test run was started
        with latched_interrupts() as check:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)
            except KeyboardInterrupt:
                pass  # what a library that clears the error does
            with pytest.raises(KeyboardInterrupt):
                check()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("terminal, prefix", [(False, ""), (True, "\r")])
def test_the_ctrl_c_message_is_one_line_with_no_empty_line_before_it(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, terminal: bool, prefix: str
) -> None:
    """On a terminal it starts over the `^C` the terminal echoed (a carriage return), in a pipe as is."""

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("ragtriage.commands.kb_import.run_import", interrupted)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    path = tmp_path / "chunks.jsonl"
    path.write_text('{"chunk_id": "a", "content": "出差"}\n', encoding="utf-8")

    outcome = run_cli(["kb", "import", str(path)])

    assert outcome.code == 130
    # (on a terminal the progress display's cursor and clearing codes come first, without a line)
    assert outcome.err.endswith(prefix + NOTHING_IMPORTED + "\n") and outcome.err.count("\n") == 1
