"""Triage records: changes with audit rows, optimistic concurrency, mutation-tracked JSON, two writers."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm.attributes import flag_modified  # noqa: F401  (documented alternative, not needed here)

from ragtriage.errors import InputError, NotFoundError
from ragtriage.logs.ingest import ingest_lines
from ragtriage.logs.queue import list_queue
from ragtriage.store import triage_repo
from ragtriage.store.db import make_engine, read_session, sqlite_url, write_session
from ragtriage.store.log_tables import TriageAuditRow, TriageRow
from ragtriage.store.triage_repo import ConflictError
from tests.conftest import live_postgres_engine


def _flagged(engine: Engine, *request_ids: str) -> None:
    lines = [
        json.dumps({"request_id": rid, "raw_query": f"query {rid}", "feedback": {"rating": "down"}})
        for rid in request_ids
    ]
    ingest_lines(engine, lines)


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = make_engine(sqlite_url(tmp_path / "store.db"))
    _flagged(engine, "r1", "r2")
    return engine


def test_changes_bump_the_revision_and_write_audit_rows(engine: Engine) -> None:
    record = triage_repo.get_record(engine, "r1")
    assert (record.status, record.revision, record.reasons) == ("new", 1, ["bad_rating"])
    record = triage_repo.set_status(engine, "r1", "in_progress", expected_revision=1, user="alice")
    record = triage_repo.set_labels(engine, "r1", ["alias_missing", "bm25_miss", "alias_missing"], user="bob")
    record = triage_repo.set_gold(engine, "r1", ["c2", {"chunk_id": "c7", "grade": 2}, "c2"], user="bob")
    record = triage_repo.add_note(engine, "r1", "别名 [bold]缺失[/]", user="carol")
    record = triage_repo.assign(engine, "r1", "dave", user="carol")
    assert record.revision == 6
    assert record.labels == ["alias_missing", "bm25_miss"] and record.primary_label == "alias_missing"
    assert record.gold_chunk_ids == ["c2", {"chunk_id": "c7", "grade": 2}]
    assert [(n.user, n.text) for n in record.notes] == [("carol", "别名 [bold]缺失[/]")]
    assert record.assignee == "dave" and record.updated_by == "carol"
    audit = triage_repo.audit_log(engine, "r1")
    assert [(a.action, a.user, a.revision) for a in audit] == [
        ("status", "alice", 2),
        ("labels", "bob", 3),
        ("gold", "bob", 4),
        ("note", "carol", 5),
        ("assign", "carol", 6),
    ]
    assert audit[0].change == {"before": "new", "after": "in_progress"}


def test_primary_label_can_be_chosen(engine: Engine) -> None:
    record = triage_repo.set_labels(engine, "r1", ["bm25_miss", "rerank_error"], primary="rerank_error")
    assert record.labels == ["rerank_error", "bm25_miss"] and record.primary_label == "rerank_error"
    assert triage_repo.set_labels(engine, "r1", []).primary_label is None


def test_stale_revision_is_a_conflict_and_writes_nothing(engine: Engine) -> None:
    triage_repo.set_status(engine, "r1", "in_progress", expected_revision=1, user="alice")
    with pytest.raises(ConflictError, match=r"changed by alice .*revision 2; you had revision 1"):
        triage_repo.set_labels(engine, "r1", ["bm25_miss"], expected_revision=1, user="bob")
    record = triage_repo.get_record(engine, "r1")
    assert record.labels == [] and record.revision == 2
    assert len(triage_repo.audit_log(engine, "r1")) == 1


def test_audit_row_and_change_roll_back_together(engine: Engine) -> None:
    with pytest.raises(InputError):
        triage_repo.set_status(engine, "r1", "closed")
    with pytest.raises(InputError):
        triage_repo.add_note(engine, "r1", "   ")
    assert triage_repo.get_record(engine, "r1").revision == 1
    with read_session(engine) as session:
        assert session.execute(select(func.count()).select_from(TriageAuditRow)).scalar_one() == 0


def test_an_unflagged_logged_request_can_be_opened_by_labelling_it(engine: Engine) -> None:
    ingest_lines(engine, [json.dumps({"request_id": "quiet", "raw_query": "q"})])
    assert triage_repo.find_record(engine, "quiet") is None
    record = triage_repo.set_labels(engine, "quiet", ["no_answer_in_kb"], user="erin")
    assert (record.reasons, record.revision, record.status) == (["manual"], 1, "new")
    with pytest.raises(NotFoundError, match="no logged request"):
        triage_repo.set_status(engine, "never-logged", "confirmed")
    with pytest.raises(NotFoundError):
        triage_repo.get_record(engine, "never-logged")


def test_list_records_filters(engine: Engine) -> None:
    triage_repo.set_labels(engine, "r2", ["dense_drift"])
    triage_repo.set_status(engine, "r2", "confirmed")
    assert [r.request_id for r in triage_repo.list_records(engine, status="confirmed")[1]] == ["r2"]
    assert triage_repo.list_records(engine, label="dense_drift")[0] == 1
    assert triage_repo.list_records(engine, label="dense")[0] == 0, "labels match whole, not by substring"
    assert triage_repo.list_records(engine, reason="bad_rating")[0] == 2


def test_resolve_user_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGTRIAGE_USER", "from-env")
    assert triage_repo.resolve_user("from-flag") == "from-flag"
    assert triage_repo.resolve_user(None) == "from-env"
    monkeypatch.delenv("RAGTRIAGE_USER")
    assert triage_repo.resolve_user(None)


# ---------------------------------------------------------------- known fault 21: JSON mutation tracking


def test_in_place_json_edits_persist_including_nested_ones(engine: Engine) -> None:
    triage_repo.add_note(engine, "r1", "first", user="a")
    with write_session(engine) as session:
        row = session.get(TriageRow, "r1")
        assert row is not None
        row.gold_chunk_ids.append("c9")
        row.gold_chunk_ids.append({"chunk_id": "c10", "grade": 1})
        row.labels.append("bm25_miss")
        row.notes[0]["text"] = "edited in place"
        row.notes[0].setdefault("tags", []).append("nested")
        row.reasons.extend(["manual"])
    with write_session(engine) as session:
        row = session.get(TriageRow, "r1")
        assert row is not None
        row.gold_chunk_ids[1]["grade"] = 3  # a dict inside the list, edited after a reload
    with read_session(engine) as session:
        row = session.get(TriageRow, "r1")
        assert row is not None
        assert row.gold_chunk_ids == ["c9", {"chunk_id": "c10", "grade": 3}]
        assert row.labels == ["bm25_miss"]
        assert row.notes[0]["text"] == "edited in place" and row.notes[0]["tags"] == ["nested"]
        assert row.reasons == ["bad_rating", "manual"]


# ---------------------------------------------------------------- known fault 22: two writers


def test_labelling_loop_and_ingest_write_one_sqlite_file_at_once(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    labeller_engine = make_engine(sqlite_url(db), busy_timeout_ms=30_000)
    ingest_engine = make_engine(sqlite_url(db), busy_timeout_ms=30_000)
    _flagged(labeller_engine, *(f"t{i}" for i in range(20)))
    errors: list[BaseException] = []
    done = threading.Event()
    rounds_during_ingest: list[int] = []

    def label_loop() -> None:
        try:
            rounds = 0
            while not done.is_set() or rounds < 40:
                rid = f"t{rounds % 20}"
                record = triage_repo.get_record(labeller_engine, rid)
                triage_repo.set_labels(
                    labeller_engine, rid, ["bm25_miss"], expected_revision=record.revision, user="u"
                )
                triage_repo.add_note(labeller_engine, rid, f"round {rounds}", user="u")
                rounds += 1
                if not done.is_set():
                    rounds_during_ingest.append(rounds)
        except BaseException as error:  # noqa: B036 (reported below)
            errors.append(error)

    labeller = threading.Thread(target=label_loop)
    labeller.start()
    try:
        lines = [
            json.dumps({"request_id": f"bulk{i}", "raw_query": "q" * 200, "citations": []})
            for i in range(6000)
        ]
        report = ingest_lines(ingest_engine, lines, batch_size=500)
    finally:
        done.set()
        labeller.join(timeout=120)
    assert not errors, f"labeller failed: {errors[0]!r}"
    assert rounds_during_ingest, "the labeller never wrote while the ingest ran; the test proves nothing"
    assert report.ingested == 6000 and report.flagged == 6000
    assert list_queue(labeller_engine, label="bm25_miss").total == 20
    assert sum(len(triage_repo.get_record(labeller_engine, f"t{i}").notes) for i in range(20)) >= 40


# ---------------------------------------------------------------- PostgreSQL (skips without a server)


@pytest.mark.postgres
def test_triage_changes_on_live_postgresql() -> None:
    engine = live_postgres_engine()
    rid = f"pg-triage-{os.urandom(4).hex()}"
    _flagged(engine, rid)
    record = triage_repo.set_labels(engine, rid, ["alias_missing"], expected_revision=1, user="pg")
    with pytest.raises(ConflictError):
        triage_repo.set_status(engine, rid, "confirmed", expected_revision=1)
    with write_session(engine) as session:
        row = session.get(TriageRow, rid)
        assert row is not None
        row.gold_chunk_ids.append({"chunk_id": "c1", "grade": 1})
    with write_session(engine) as session:
        row = session.get(TriageRow, rid)
        assert row is not None
        row.gold_chunk_ids[0]["grade"] = 2
    assert triage_repo.get_record(engine, rid).gold_chunk_ids == [{"chunk_id": "c1", "grade": 2}]
    assert record.revision == 2
    page = list_queue(engine, label="alias_missing", reason="bad_rating")
    assert rid in [item.request_id for item in page.items]


def test_copies_of_tracked_json_are_plain_and_detached(engine: Engine) -> None:
    import copy
    import pickle

    triage_repo.add_note(engine, "r1", "n", user="a")
    with read_session(engine) as session:
        row = session.get(TriageRow, "r1")
        assert row is not None
        for clone in (copy.deepcopy(row.notes), pickle.loads(pickle.dumps(row.notes))):
            assert clone == row.notes
            clone[0]["text"] = "changed only in the copy"
    assert triage_repo.get_record(engine, "r1").notes[0].text == "n"


def test_a_conflict_spells_out_their_change_as_text(engine: Engine) -> None:
    from ragtriage.triage.workflow import label_case

    triage_repo.set_labels(engine, "r1", ["alias_missing", "bm25_miss"], expected_revision=1, user="alice")
    with pytest.raises(ConflictError) as caught:
        label_case(engine, "r1", "rerank_error", allowed=["rerank_error"], expected_revision=1, user="bob")
    message = str(caught.value)
    assert message.endswith(
        "their change: labels → labels: alias_missing, bm25_miss; primary: alias_missing"
    ), message
    assert "['" not in message
