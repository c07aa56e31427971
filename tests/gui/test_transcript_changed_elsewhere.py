"""The open session changed in another process (a shared ledger): the window reads its
transcript again and shows what was added where the reader is, with the draft left alone."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.main_window import MainWindow
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

HELD = bc.SessionSummary(
    session_id="s1",
    cwd="/w/one",
    title="One",
    last_run_status=bc.RunStatusValue.COMPLETED,
    held_elsewhere="build-server, pid 4242",
)
MINE = bc.SessionSummary(
    session_id="s2", cwd="/w/two", title="Two", last_run_status=bc.RunStatusValue.COMPLETED
)
EARLIER = tuple(
    bc.AssistantMessageItem(item_id=f"a{n}", text=f"Message {n}\n" + "line\n" * 6)
    for n in range(40)
)
ASKED = bc.UserMessageItem(item_id="u-new", text="run sleep 40")
CARD = bc.ToolCardItem(
    item_id="t-new", tool_call_id="c1", tool_name="bash", status=bc.ToolCardStatus.RUNNING
)


def _window(qtbot: QtBot, *sessions: bc.SessionSummary) -> tuple[MainWindow, FakeBridge]:
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(1000, 700)
    window.show()
    qtbot.waitExposed(window)
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=sessions))
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=EARLIER))
    window.transcript.flush()
    qtbot.wait(50)  # laid out: the scroll bar has its range
    return window, bridge


def _answer(window: MainWindow, bridge: FakeBridge, *items: bc.TranscriptItem) -> None:
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=items))
    window.transcript.flush()


def test_a_turn_another_host_runs_is_added_where_the_reader_is(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot, HELD, MINE)
    bar = window.transcript.verticalScrollBar()
    assert bar.maximum() > 0
    bar.setValue(bar.maximum() // 3)  # reading an earlier message
    place = bar.value()
    window.composer.editor.setPlainText("half a thought")
    bridge.calls.clear()
    running = HELD.model_copy(
        update={"last_run_status": bc.RunStatusValue.RUNNING, "running_elsewhere": True}
    )
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=running))
    assert bridge.calls_to("open_session") == [("s1",)]  # only the id goes; the state comes
    _answer(window, bridge, *EARLIER, ASKED, CARD)
    assert window.transcript.item_ids()[-2:] == ["u-new", "t-new"]
    assert window.transcript.tool_card("c1") is not None
    qtbot.wait(50)
    assert bar.value() == place and not window.transcript.following
    assert window.composer.editor.toPlainText() == "half a thought"

    # The sweep tells of more (the same summary, the ledger moved): read again, card ends.
    bridge.calls.clear()
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=running))
    assert bridge.calls_to("open_session") == [("s1",)]
    done = CARD.model_copy(update={"status": bc.ToolCardStatus.SUCCEEDED})
    said = bc.AssistantMessageItem(item_id="a-end", text="Slept.")
    _answer(window, bridge, *EARLIER, ASKED, done, said)
    card = window.transcript.tool_card("c1")
    assert card is not None and card.item.status is bc.ToolCardStatus.SUCCEEDED
    assert window.transcript.item_ids()[-1] == "a-end"
    qtbot.wait(50)
    assert bar.value() == place

    # Its end: read once more; the reader at the bottom stays with the newest item.
    window.transcript.follow_newest()
    bridge.calls.clear()
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=HELD))
    assert bridge.calls_to("open_session") == [("s1",)]
    _answer(
        window, bridge, *EARLIER, ASKED, done, said, bc.AssistantMessageItem(item_id="z", text="Z")
    )
    qtbot.wait(50)
    assert window.transcript.following and bar.value() == bar.maximum()


def test_items_read_that_do_not_continue_those_shown_are_shown_at_the_same_place(
    qtbot: QtBot,
) -> None:
    window, bridge = _window(qtbot, HELD)
    bar = window.transcript.verticalScrollBar()
    bar.setValue(bar.maximum() // 2)
    place = bar.value()
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=HELD))
    note = bc.NoticeItem(item_id="n-between", text="A note between.", level=bc.NoticeLevel.INFO)
    _answer(window, bridge, *EARLIER[:5], note, *EARLIER[5:], ASKED)
    assert window.transcript.item_ids()[5] == "n-between"
    qtbot.wait(50)
    assert abs(bar.value() - place) <= 1 and not window.transcript.following


def test_a_session_of_this_hosts_is_not_read_again_on_its_updates(qtbot: QtBot) -> None:
    """Its turns stream here: a summary's update (a run started or ended) reads nothing."""
    _shown, bridge = _window(qtbot, MINE.model_copy(update={"session_id": "s1"}))
    bridge.calls.clear()
    running = MINE.model_copy(
        update={"session_id": "s1", "last_run_status": bc.RunStatusValue.RUNNING}
    )
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=running))
    assert bridge.calls_to("open_session") == []


def test_a_long_session_read_again_keeps_its_rows_when_its_oldest_items_are_left_out(
    qtbot: QtBot,
) -> None:
    """The answer holds the newest items only: the oldest ones, never on screen, go from the
    data; the rows shown stay (no rebuilding) and the reader's place with them."""
    many = tuple(bc.AssistantMessageItem(item_id=f"m{n}", text=f"Item {n}") for n in range(200))
    window, bridge = _window(qtbot, HELD)
    _answer(window, bridge, *many)
    qtbot.wait(50)
    transcript = window.transcript
    bar = transcript.verticalScrollBar()
    bar.setValue(bar.maximum() // 2)
    place = bar.value()
    row = transcript.item_widget("m120")
    bridge.session_updated.emit(bc.SessionUpdatedPush(session=HELD))
    bridge.session_opened.emit(
        bc.SessionOpenedPush(session_id="s1", items=(*many[10:], ASKED), omitted_earlier=10)
    )
    ids = transcript.item_ids()
    assert ids[0] == "m10" and ids[-1] == "u-new" and len(ids) == 191
    assert transcript.item_widget("m120") is row  # the same row, not built again
    qtbot.wait(50)
    assert bar.value() == place
