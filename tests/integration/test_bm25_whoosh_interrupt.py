"""Ctrl-C while the default engine indexes a big batch (`kb add`/`kb import`/`kb reindex` of
2,000+ chunks, written by Whoosh's own writer processes): the writing process stops with one
line, its processes print nothing and are gone,
and nothing is committed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragtriage.index.bm25 import WhooshIndex
from tests.terminal_signals import as_from_a_terminal, child_pids

PROC = Path("/proc")
pytestmark = pytest.mark.skipif(not (PROC / "self" / "task").is_dir(), reason="watches /proc (Linux)")
REPO_ROOT = Path(__file__).resolve().parents[2]

# Production-shaped ids (UUIDs) and Chinese text; enough of it that the writer processes are still
# segmenting when the interrupt comes.
WRITER = """
import sys, uuid
from pathlib import Path
from ragtriage.index.bm25 import BM25Document, WhooshIndex

index = WhooshIndex(Path(sys.argv[1]), procs=2, multiproc_min_docs=100)
text = "出差结束后十五天内提交发票原件，VPN 连接失败时先检查客户端版本。会议室可以提前七天预订。" * 6
docs = [
    BM25Document(str(uuid.UUID(int=n + 1, version=4)), str(n // 10), f"第 {n} 节", f"{text}{n}", "h", "h")
    for n in range(20000)
]
try:
    index.apply(docs)
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    sys.exit(130)
print("finished")
"""


def test_ctrl_c_during_a_multiprocess_whoosh_write_stops_its_processes_quietly(tmp_path: Path) -> None:
    folder = tmp_path / "whoosh"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=as_from_a_terminal,  # a test run started with `&` would pass on SIGINT ignored
    )
    deadline = time.monotonic() + 120
    while len(child_pids(process.pid)) < 2:  # the two segmenting processes are at work
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(
                f"the write ended or hung before its writer processes started: {process.communicate()}"
            )
        time.sleep(0.01)
    time.sleep(0.5)

    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    stdout, stderr = process.communicate(timeout=120)

    assert (process.returncode, stdout, stderr) == (130, "", "interrupted\n")
    with pytest.raises(ProcessLookupError):  # the writer processes are gone too
        for _ in range(100):
            os.killpg(process.pid, 0)
            time.sleep(0.05)
    assert WhooshIndex(folder).search("发票", 5)[0] == []  # nothing was committed
