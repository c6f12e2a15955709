"""`replay --gold` with a gold id no index can return: a production DRAFT chunk, or an id the KB lacks.

Without a note the gold journey says `dropped at recall`, and the triager hunts a retrieval fault.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from ragtriage.cli import cli
from tests.integration.test_kb_import_files import MAP, ROWS, UUID_A


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def test_replay_says_when_a_gold_id_is_unknown_or_deleted(tmp_path: Path) -> None:
    export = tmp_path / "chunks.jsonl"
    export.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in ROWS), encoding="utf-8")
    assert _run("kb", "import", str(export), "--map", MAP).exit_code == 0  # row 43 is a DRAFT

    unknown = "9d3c1f2e-0000-4000-8000-00000000beef"
    replayed = _run("replay", "--query", "VPN 网关", "--gold", "43", "--gold", unknown, "--gold", UUID_A)
    assert replayed.exit_code == 0, replayed.output
    notes = " ".join(replayed.stderr.split())
    assert f"note: gold {unknown} is not in the KB, so no index returns it" in notes
    assert "note: gold chunk 43 is deleted in the KB (not published (status=DRAFT) when imported)" in notes
    assert UUID_A not in replayed.stderr  # a live gold chunk gets no note

    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"query": "VPN 网关", "gold": ["43"]}) + "\n", encoding="utf-8")
    from_file = _run("replay", "--queries", str(queries), "--json")
    assert from_file.exit_code == 0, from_file.output
    assert "gold chunk 43 is deleted" in " ".join(from_file.stderr.split())
    assert json.loads(from_file.stdout.splitlines()[0])["query"]  # stdout stays JSON lines
