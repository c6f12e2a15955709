"""`ragtriage serve` as a real uvicorn process on a loopback port: a CI job starts an evaluation over
HTTP, waits for it and fetches its results; a token makes the bearer header required; binding beyond
localhost without a token, or to a busy port, is refused with one line and exit 2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.service_home import EvalHome, serve


def test_a_ci_job_starts_an_evaluation_waits_and_fetches_the_results(eval_home: EvalHome) -> None:
    with serve(eval_home.home) as url, httpx.Client(base_url=url, timeout=60) as client:
        started = client.post("/api/v1/knowledge-bases/default/retrieval/evaluate", json={"name": "ci"})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        deadline = time.monotonic() + 180
        while True:
            run = client.get(f"/api/v1/retrieval/evaluations/{run_id}", params={"limit": 3}).json()
            if run["status"] != "running" or time.monotonic() > deadline:
                break
            assert run["progress"]["running_here"] is True
            time.sleep(0.3)
        assert run["status"] == "complete" and run["progress"]["fraction"] == 1.0
        assert run["cases"]["total"] == 7 and len(run["cases"]["items"]) == 3
        base = client.get(f"/api/v1/retrieval/evaluations/{eval_home.base_run}").json()
        assert run["aggregates"]["means"] == base["aggregates"]["means"]
        listed = client.get("/api/v1/knowledge-bases/default/retrieval/runs").json()["runs"]
        assert listed[0]["run_id"] == run_id and listed[0]["name"] == "ci"
        page = client.get("/")
        assert page.status_code == 200 and f"/runs/{run_id}/report" in page.text


def test_with_a_token_requests_need_the_bearer_header(eval_home: EvalHome) -> None:
    with serve(eval_home.home, token="ci-secret") as url, httpx.Client(base_url=url, timeout=30) as client:
        runs = "/api/v1/knowledge-bases/default/retrieval/runs"
        refused = client.get(runs)
        assert refused.status_code == 401 and refused.json()["title"] == "unauthorized"
        assert client.get(runs, headers={"Authorization": "Bearer ci-secret"}).status_code == 200


def _serve_error(home: Path, *args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAGTRIAGE_API_TOKEN"}
    result = subprocess.run(
        [sys.executable, "-m", "ragtriage", "--home", str(home), "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    return result.returncode, result.stderr.strip()


def test_binding_beyond_localhost_without_a_token_is_refused(eval_home: EvalHome) -> None:
    code, err = _serve_error(eval_home.home, "--host", "0.0.0.0", "--port", "0")
    assert code == 2
    assert err.startswith("input error: --host 0.0.0.0 makes the API reachable from other machines")
    assert "RAGTRIAGE_API_TOKEN" in err and len(err.splitlines()) == 1


def test_a_busy_port_is_one_line_and_exit_2(eval_home: EvalHome) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        code, err = _serve_error(eval_home.home, "--port", str(port))
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in err and "--port" in err
