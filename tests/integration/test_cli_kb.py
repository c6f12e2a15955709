"""`ragtriage kb …` through click's CliRunner, plus one real subprocess for the exit code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ragtriage.cli import cli
from ragtriage.errors import NotFoundError
from tests.conftest import TEST_DATA_DIR

GUIDE = "# 安装指南\n\n## 准备\n\n先备份数据。\n\n## 安装\n\n运行安装程序。\n"


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "guide.md").write_text(GUIDE, encoding="utf-8")
    (folder / "notes.txt").write_text("备注\n\n第一条。\n", encoding="utf-8")
    return folder


def test_kb_add_prints_a_summary_and_json(kb_dir: Path) -> None:
    result = _run("kb", "add", str(kb_dir), "--no-index")

    assert result.exit_code == 0, result.output
    assert "files: 2 seen, 2 added, 0 changed, 0 unchanged, 0 failed" in result.stdout
    assert "index: not updated" in result.stdout
    again = _run("kb", "add", str(kb_dir), "--no-index", "--json")
    report = json.loads(again.stdout)
    assert (report["files_seen"], report["unchanged"], report["kb_revision"]) == (2, 2, 2)


def test_kb_stats_chunks_show_and_remove(kb_dir: Path, home: Path) -> None:
    assert _run("kb", "add", str(kb_dir), "--no-index").exit_code == 0

    stats = json.loads(_run("kb", "stats", "--json").stdout)
    assert (stats["revision"], stats["documents"], stats["chunks"]) == (2, {"published": 2}, {"published": 3})
    assert stats["index"]["state"] == "missing"
    assert "revision 2" in _run("kb", "stats").stdout

    listing = _run("kb", "chunks", "--doc", "kb/guide").stdout.splitlines()
    assert listing[0] == "chunk_id\tstatus\tanchor\ttitle\theading_path"
    assert [line.split("\t")[2:] for line in listing[1:]] == [
        ["准备", "准备", "安装指南 › 准备"],
        ["安装", "安装", "安装指南 › 安装"],
    ]
    chunks = json.loads(_run("kb", "chunks", "--json").stdout)
    assert len(chunks) == 3 and all(c["content"] == "" for c in chunks)
    with_content = json.loads(_run("kb", "chunks", "--doc", "kb/guide", "--json", "--with-content").stdout)
    assert [c["content"] for c in with_content] == ["先备份数据。", "运行安装程序。"]

    first_id = with_content[0]["chunk_id"]
    shown = _run("kb", "show", first_id)
    assert shown.exit_code == 0
    assert "heading_path: 安装指南 › 准备" in shown.stdout and shown.stdout.rstrip().endswith("先备份数据。")
    shown_json = json.loads(_run("kb", "show", first_id, "--json").stdout)
    assert shown_json["neighbours"] == [with_content[1]["chunk_id"]]

    removed = _run("kb", "remove", "kb/guide", "--no-index")
    assert removed.exit_code == 0 and "removed: kb/guide (2 chunks)" in removed.stdout
    assert [c["doc_id"] for c in json.loads(_run("kb", "chunks", "--json").stdout)] == ["kb/notes"]


def test_unknown_ids_raise_not_found(kb_dir: Path) -> None:
    _run("kb", "add", str(kb_dir), "--no-index")

    for args in (
        ["kb", "show", "kb/guide#nope"],
        ["kb", "chunks", "--doc", "nope"],
        ["kb", "remove", "nope"],
    ):
        result = _run(*args)
        assert isinstance(result.exception, NotFoundError), args


def test_kb_add_on_bad_files_names_each_with_its_fix_and_exits_2(tmp_path: Path) -> None:
    folder = tmp_path / "bad"
    shutil.copytree(TEST_DATA_DIR / "kb_bad", folder)

    result = _run("kb", "add", str(folder), "--no-index")

    assert result.exit_code == 2
    failed_lines = [line for line in result.stderr.splitlines() if line.startswith("kb add: failed: ")]
    assert len(failed_lines) == 4
    assert any(
        f"{folder / 'broken_front_matter.md'}:4: front matter is not valid YAML" in line
        for line in failed_lines
    )
    assert all("; fix: " in line for line in failed_lines)
    assert f"warning: {folder / 'no_headings.html'}: no h1–h6 headings" in result.stderr
    assert "2 added" in result.stdout


def test_installed_console_script_exits_2_on_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "empty.md"
    bad.write_bytes(b"")
    env = {**os.environ, "RAGTRIAGE_HOME": str(tmp_path / "home")}

    # The console script pip installed next to this interpreter (whatever the venv is called).
    script = Path(sys.executable).parent / "ragtriage"
    assert script.exists(), f"no installed console script at {script}; run pip install -e ."
    completed = subprocess.run(
        [str(script), "kb", "add", str(bad), "--no-index"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )

    assert completed.returncode == 2, completed.stderr
    assert f"kb add: failed: {bad}: empty file; fix: add content or remove the file" in completed.stderr
    assert "files: 1 seen, 0 added, 0 changed, 0 unchanged, 1 failed" in completed.stdout
