"""Case screen: the add-alias key on a case whose diagnosis proposes an alias, and cancelling a replay."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from textual.message import Message

from ragtriage.pipeline.types import Trace
from ragtriage.store.triage_repo import set_gold
from ragtriage.triage.context import read_alias_file
from ragtriage.tui.app import TriageApp
from ragtriage.tui.messages import ReplayCancelled, ReplayFinished
from ragtriage.tui.screens.case_screen import CaseScreen
from ragtriage.tui.screens.confirm_modal import ConfirmModal
from ragtriage.workspace import Workspace
from tests.tui.conftest import SIZE

#: Fixture query q101 (alias_missing): users say 补休, the KB (and the alias file) only says 调休.
ALIAS_QID = "q101"
ALIAS_REQUEST = "fx-alias-q101"
TERM, SYNONYM = "补休", "调休"


async def _settle(app: TriageApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await app.workers.wait_for_complete()
    await pilot.pause()


async def _wait_until(pilot, condition: Callable[[], bool], timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    """Pause the pilot until `condition()` holds (thread workers post their messages late)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await pilot.pause(0.01)


async def _open(app: TriageApp, pilot, request_id: str) -> CaseScreen:  # type: ignore[no-untyped-def]
    await _settle(app, pilot)
    app.screen.open_case(request_id)  # type: ignore[attr-defined]
    await _settle(app, pilot)
    # The case loads in a thread worker whose message can arrive after the settle on a busy machine.
    await _wait_until(pilot, lambda: isinstance(app.screen, CaseScreen) and app.screen.case is not None, 30)
    screen = app.screen
    assert isinstance(screen, CaseScreen)
    assert screen.case is not None and screen.case.request_id == request_id
    return screen


def _notes(app: TriageApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


def _alias_file(workspace: Workspace) -> dict[str, list[str]]:
    """The alias file the workspace's pipeline reads (as `ragtriage aliases add` resolves it)."""
    path = workspace.resolve_path(workspace.settings.rewrite.alias_file)
    assert path is not None and path.exists()
    return read_alias_file(path)


@pytest.fixture
def alias_case(workspace: Workspace) -> str:
    """A flagged request whose query says 补休 where the KB says 调休, logged as the pipeline serves it
    today (the gold misses the final context, so the user rated it down), with its gold set."""
    from ragtriage.logs.ingest import ingest_lines
    from ragtriage.logs.queue import list_queue
    from ragtriage_demo.demo import TRAFFIC_START, fixture_answer_keys, traffic_line

    key = next(k for k in fixture_answer_keys(workspace) if k.qid == ALIAS_QID)
    assert key.gold and TERM in key.query
    trace = workspace.pipeline.run(key.query)
    assert not any(g in trace.final for g in key.gold), "the fixture alias gap no longer loses the gold"
    line = traffic_line(ALIAS_REQUEST, TRAFFIC_START + timedelta(hours=2), trace, key.gold)
    ingest_lines(workspace.engine, [line], source="tui-alias-test", flagging=workspace.settings.logs.flagging)
    set_gold(workspace.engine, ALIAS_REQUEST, key.gold, user="tui-test")
    assert ALIAS_REQUEST in [item.request_id for item in list_queue(workspace.engine, limit=100).items]
    assert TERM not in _alias_file(workspace)
    return ALIAS_REQUEST


async def test_a_adds_the_proposed_alias_and_replays_with_it(workspace: Workspace, alias_case: str) -> None:
    seen: list[Message] = []
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        screen = await _open(app, pilot, alias_case)
        # Before any replay the case has no diagnosis: the key explains itself and writes nothing.
        await pilot.press("a")
        await _settle(app, pilot)
        assert any("no alias proposal" in text for text in _notes(app))
        assert TERM not in _alias_file(workspace)

        await pilot.press("r")
        await _settle(app, pilot)
        diagnosis = screen.case.diagnosis  # type: ignore[union-attr]
        assert diagnosis is not None and diagnosis.suggestion.label == "alias_missing"
        assert [(p.term, p.synonym) for p in diagnosis.suggestion.alias_pairs][:1] == [(TERM, SYNONYM)]
        assert TERM not in (screen.case.replayed.rewrite.aliases or {})  # type: ignore[union-attr]

        await pilot.press("a")
        await _settle(app, pilot)
        # A confirmation names the alias and the file; nothing is written before enter.
        assert isinstance(app.screen, ConfirmModal)
        assert f"{TERM} = {SYNONYM}" in app.screen.question
        assert TERM not in _alias_file(workspace)
        await pilot.press("enter")
        await _settle(app, pilot)
        await _wait_until(pilot, lambda: sum(isinstance(m, ReplayFinished) for m in seen) == 2)
        await _settle(app, pilot)

        # Written to the file the workspace's pipeline reads, keeping the existing 调休 group.
        aliases = _alias_file(workspace)
        assert aliases[TERM] == [SYNONYM]
        assert aliases[SYNONYM] == ["倒休"]
        assert any(f"alias {TERM}: added {SYNONYM}; replaying" in text for text in _notes(app))
        # The automatic replay used the new alias (the long-lived pipeline re-read the file).
        assert isinstance(app.screen, CaseScreen)
        replayed = screen.case.replayed  # type: ignore[union-attr]
        assert replayed is not None and screen.source == "replayed"
        assert SYNONYM in replayed.rewrite.aliases.get(TERM, [])


async def test_escape_in_the_alias_confirmation_adds_nothing(workspace: Workspace, alias_case: str) -> None:
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(app, pilot, alias_case)
        await pilot.press("r")
        await _settle(app, pilot)
        assert screen.case.diagnosis.suggestion.alias_pairs  # type: ignore[union-attr]
        before = _alias_file(workspace)
        await pilot.press("a")
        await _settle(app, pilot)
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("escape")
        await _settle(app, pilot)
        assert app.screen is screen
        assert _alias_file(workspace) == before
        assert any(f"alias {TERM} = {SYNONYM} not added" in text for text in _notes(app))


async def test_escape_cancels_a_running_replay_and_the_screen_stays_usable(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = workspace.pipeline
    real_run = pipeline.run
    started = threading.Event()
    held = {"first": True}

    def slow_first_run(query: str, **kwargs: object) -> Trace:
        """Timing only: the first replay waits (at most 10 s) until it is cancelled, then runs for real."""
        should_stop = kwargs.get("should_stop")
        if held.pop("first", False):
            started.set()
            deadline = time.monotonic() + 10
            while callable(should_stop) and not should_stop() and time.monotonic() < deadline:
                time.sleep(0.005)
        return real_run(query, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "run", slow_first_run)
    seen: list[Message] = []
    app = TriageApp(workspace, warm_up=False)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        screen = await _open(app, pilot, "fx-q006")
        await pilot.press("r")
        await _wait_until(pilot, started.is_set)
        assert screen.has_class("-replaying") and screen.progress.display
        await pilot.press("escape")
        await _wait_until(pilot, lambda: any(isinstance(m, ReplayCancelled) for m in seen))
        await _settle(app, pilot)

        assert app.screen is screen, "escape during a replay left the case screen"
        assert [m.request_id for m in seen if isinstance(m, ReplayCancelled)] == ["fx-q006"]
        assert not any(isinstance(m, ReplayFinished) for m in seen)
        await _wait_until(pilot, lambda: "replay cancelled" in _notes(app), 30)
        assert screen.replay_worker is None
        assert not screen.has_class("-replaying") and not screen.progress.display
        assert screen.source == "logged" and screen.case.replayed is None  # type: ignore[union-attr]

        # Still usable: a second replay runs to the end, then escape goes back to the queue.
        await pilot.press("r")
        await _settle(app, pilot)
        await _wait_until(pilot, lambda: any(isinstance(m, ReplayFinished) for m in seen))
        await _settle(app, pilot)
        assert screen.source == "replayed" and screen.case.replayed is not None  # type: ignore[union-attr]
        assert not screen.has_class("-replaying")
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CaseScreen)
