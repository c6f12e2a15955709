"""The index sync imports bm25s without numba (half a CPU-second per process), and the index it
then builds and searches gives the same scores as one built with numba loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ragtriage.index.bm25s_index import BM25sIndex
from tests.conftest import REPO_ROOT
from tests.integration.test_bm25s_index import tiny_docs

QUERIES = ["红字发票怎么开", "请假要谁审批", "VPN 连接失败"]

_CHILD = """
import json, sys
from pathlib import Path
from ragtriage.index.indexer import _bm25s_index_class

index = _bm25s_index_class()(Path(sys.argv[1]))
from tests.integration.test_bm25s_index import tiny_docs  # bm25s: imported by the index

index.apply(tiny_docs())
hits = {q: [[h.chunk_id, h.score] for h in index.search(q, 5)[0]] for q in json.loads(sys.argv[2])}
import bm25s
loaded = "numba" in sys.modules
import numba  # still importable afterwards
print(json.dumps({"hits": hits, "numba_loaded": loaded, "bm25s_numba": bm25s.NUMBA_AVAILABLE}))
"""


def test_bm25s_is_imported_without_numba_and_scores_the_same(tmp_path: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "child"), json.dumps(QUERIES)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    found = json.loads(child.stdout.strip().splitlines()[-1])
    assert found["numba_loaded"] is False and found["bm25s_numba"] is False

    here = BM25sIndex(tmp_path / "here")  # this process: bm25s as pytest imported it
    here.apply(tiny_docs())
    expected = {q: [[h.chunk_id, h.score] for h in here.search(q, 5)[0]] for q in QUERIES}
    assert found["hits"] == expected
    assert all(found["hits"][q] for q in QUERIES)
