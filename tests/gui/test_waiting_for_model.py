"""While a turn runs and the model has not answered (a local model can think for a minute
before its first word), the window says it waits for the model and for how long; it said
nothing, beside a Stop button, so a slow server read as a stuck turn. Nothing is said while a
call runs, a question waits, or the turn is another process's."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.main_window import MainWindow, waited_words
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    ticking = _Clock()
    monkeypatch.setattr("renderer.main_window.time.monotonic", ticking)
    return ticking


def _running_window(qtbot: QtBot) -> tuple[MainWindow, FakeBridge]:
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.show()
    summary = bc.SessionSummary(
        session_id="s1", cwd="/w/one", title="One", last_run_status=bc.RunStatusValue.COMPLETED
    )
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(summary,)))
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=()))
    bridge.run_status.emit(
        bc.RunStatusPush(session_id="s1", run_id="r", status=bc.RunStatusValue.RUNNING)
    )
    return window, bridge


def _item(bridge: FakeBridge, item: bc.TranscriptItem) -> None:
    bridge.transcript_item.emit(bc.TranscriptItemPush(session_id="s1", item=item))


def _said(window: MainWindow) -> str | None:
    window._show_waiting()  # (what the one-second tick does)
    label = window.composer.waiting_label
    return label.text() if label.isVisibleTo(window) else None


def test_a_sent_message_waiting_for_the_model_is_said_with_how_long(
    qtbot: QtBot, clock: _Clock
) -> None:
    window, bridge = _running_window(qtbot)
    _item(bridge, bc.UserMessageItem(item_id="u", run_id="r", text="hello"))
    clock.now += 1
    assert _said(window) is None  # (a moment's quiet is not worth a line)
    clock.now += 11
    assert _said(window) == "Waiting for the model to answer… 12 s"
    clock.now += 130
    assert _said(window) == "Waiting for the model to answer… 2 min 22 s"
    _item(bridge, bc.AssistantMessageItem(item_id="a", run_id="r", text="Hel"))
    assert _said(window) is None  # words came: nothing to say
    clock.now += 6
    assert _said(window) == "The model has sent nothing more for 6 s…"
    bridge.run_status.emit(
        bc.RunStatusPush(session_id="s1", run_id="r", status=bc.RunStatusValue.COMPLETED)
    )
    assert _said(window) is None


def test_nothing_is_said_while_a_call_runs_or_waits_for_permission(
    qtbot: QtBot, clock: _Clock
) -> None:
    window, bridge = _running_window(qtbot)
    card = bc.ToolCardItem(
        item_id="t",
        run_id="r",
        tool_call_id="c1",
        tool_name="bash",
        args_summary="sleep 60",
        status=bc.ToolCardStatus.RUNNING,
    )
    _item(bridge, card)
    clock.now += 30
    assert _said(window) is None  # the command runs, not the model
    _item(bridge, card.model_copy(update={"status": bc.ToolCardStatus.SUCCEEDED}))
    clock.now += 3
    assert _said(window) == "Waiting for the model to answer… 3 s"  # its result went back
    _item(bridge, bc.NoticeItem(item_id="n", run_id="r", text="a note beside the turn"))
    assert _said(window) is None  # (it was just heard from)
    clock.now += 4
    assert _said(window) == "Waiting for the model to answer… 4 s"


def test_a_session_opened_later_counts_from_its_last_step(qtbot: QtBot, clock: _Clock) -> None:
    window, bridge = _running_window(qtbot)
    _item(bridge, bc.UserMessageItem(item_id="u", run_id="r", text="hello"))
    other = bc.SessionSummary(
        session_id="s2", cwd="/w/two", title="Two", last_run_status=bc.RunStatusValue.COMPLETED
    )
    first = bc.SessionSummary(
        session_id="s1", cwd="/w/one", title="One", last_run_status=bc.RunStatusValue.RUNNING
    )
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(first, other)))
    window.sessions.select("s2")
    clock.now += 20
    assert _said(window) is None  # s2 runs nothing
    window.sessions.select("s1")
    bridge.session_opened.emit(
        bc.SessionOpenedPush(
            session_id="s1", items=(bc.UserMessageItem(item_id="u", run_id="r", text="hello"),)
        )
    )
    assert _said(window) == "Waiting for the model to answer… 20 s"


def test_waited_words() -> None:
    assert waited_words(0.4) == "0 s"
    assert waited_words(119.9) == "119 s"
    assert waited_words(125) == "2 min 5 s"
