"""A window whose main process is gone tells the truth (docs/design/desktop.md "Around a crash"): it
says Maka stopped unexpectedly, marks running calls as interrupted, disables what needs the main
process, offers Restart Maka and never claims a running turn when closed; a window replaced by
a newer start says so and closes itself."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer import main_window as main_window_module
from renderer.bridge_port import ConnectionState
from renderer.main_window import MainWindow
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

SESSION = bc.SessionSummary(
    session_id="s1", cwd="/w/one", title="One", last_run_status=bc.RunStatusValue.RUNNING
)
RUNNING_CARD = bc.ToolCardItem(
    item_id="card-1",
    tool_call_id="c1",
    tool_name="bash",
    args_summary="sleep 30; echo done >> late.txt",
    status=bc.ToolCardStatus.RUNNING,
)


def _running_window(
    qtbot: QtBot, restart: tuple[str, ...] = (), *, confirm: bool = False
) -> tuple[MainWindow, FakeBridge]:
    bridge = FakeBridge()
    window = MainWindow(bridge, confirm_quit=confirm, restart_argv=restart)
    qtbot.addWidget(window)
    window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(SESSION,)))
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(RUNNING_CARD,)))
    bridge.run_status.emit(
        bc.RunStatusPush(session_id="s1", run_id="r1", status=bc.RunStatusValue.RUNNING)
    )
    bridge.permission_requested.emit(
        bc.PermissionRequestedPush(
            session_id="s1", request_id="q1", tool_name="bash", summary="run: rm -rf build"
        )
    )
    window.transcript.flush()
    assert window.composer.stop_button.isVisible()
    assert window.permission.isVisible()
    return window, bridge


def test_a_lost_main_process_is_said_and_nothing_claims_to_run(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    window, bridge = _running_window(qtbot, restart=(sys.executable, "-c", "pass"), confirm=True)
    asked: list[int] = []

    def quit_question(running: list[str]) -> bool:
        asked.append(len(running))
        return True

    monkeypatch.setattr(window, "_quit_confirmed", quit_question)
    assert not window.host_lost.isVisible()
    bridge._set_connection_state(ConnectionState.HOST_LOST)
    assert window.host_lost.isVisible()
    assert window.host_lost.title_label.text() == "Maka stopped unexpectedly."
    assert window.host_lost.restart_button.isVisible()
    assert window.host_lost.restart_button.isEnabled()
    assert window.connection_status.text == "Maka stopped unexpectedly"
    # running items read as interrupted; nothing that needs the main process can be used
    card = window.transcript.tool_card("c1")
    assert card is not None and "Interrupted" in card.chip.text()
    # The window cannot know whether the call's result was recorded a moment before: it says
    # so, and where the record is read (it claimed the call "may have run in part").
    said = card.explanation_label.text()
    assert "before this window heard how this call ended: it may have finished" in said, said
    assert "The next start of Maka reads what was recorded" in said, said
    assert not window.composer.editor.isEnabled()
    assert not window.composer.stop_button.isVisible()
    assert not window.permission.isVisible()
    assert not window.cancel_action.isEnabled()
    assert not window.banner.action_button.isEnabled()
    model = window.sessions.model
    row = model.row_of("s1")
    assert row is not None
    assert model.index(row).data(Qt.ItemDataRole.AccessibleTextRole) == "One, Interrupted"
    # closing asks nothing: no turn is claimed to be running
    window.close()
    assert not window.isVisible()
    assert asked == []


def test_a_call_only_waiting_for_permission_reads_not_run_in_a_lost_window(
    qtbot: QtBot,
) -> None:
    """It never started: "Interrupted … it may have run in part" would be untrue (and the next
    start calls it "Not run")."""
    window, bridge = _running_window(qtbot)
    waiting = RUNNING_CARD.model_copy(
        update={"item_id": "card-2", "tool_call_id": "c2", "park_reason": "awaiting_permission"}
    )
    bridge.transcript_item.emit(bc.TranscriptItemPush(session_id="s1", item=waiting))
    window.transcript.flush()
    card = window.transcript.tool_card("c2")
    assert card is not None and card.chip.text() == "Waiting for permission"
    bridge._set_connection_state(ConnectionState.HOST_LOST)
    card = window.transcript.tool_card("c2")
    assert card is not None and card.chip.text() == "Not run"
    assert "may have run" not in card.explanation_label.text()
    running = window.transcript.tool_card("c1")
    assert running is not None and "Interrupted" in running.chip.text()


def test_restart_maka_starts_the_program_again(qtbot: QtBot, tmp_path: object) -> None:
    from pathlib import Path

    marker = Path(str(tmp_path)) / "started"
    window, bridge = _running_window(
        qtbot, restart=(sys.executable, "-c", f"open({str(marker)!r}, 'w').write('yes')")
    )
    bridge._set_connection_state(ConnectionState.HOST_LOST)
    with qtbot.waitSignal(window.host_lost.restarted, timeout=5000):
        window.host_lost.restart_button.click()
    assert not window.host_lost.restart_button.isEnabled()
    assert "Starting Maka again" in window.host_lost.body_label.text()
    qtbot.waitUntil(marker.exists, timeout=10_000)


def test_a_restart_that_ends_without_taking_over_can_be_tried_again(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start made from the panel was refused (another process owned the data folder)
    and ended, and this window still stood: it said "Starting Maka again… this window closes
    when it is up" for good, its button greyed out."""
    import subprocess

    from renderer import host_lost_panel

    monkeypatch.setattr(host_lost_panel, "STARTED_CHECK_MS", 50)
    window, bridge = _running_window(qtbot, restart=(sys.executable, "-c", "pass"))
    bridge._set_connection_state(ConnectionState.HOST_LOST)
    window.host_lost.restart_button.click()
    assert not window.host_lost.restart_button.isEnabled()
    qtbot.waitUntil(window.host_lost.restart_button.isEnabled, timeout=10_000)
    assert window.host_lost.title_label.text() == "Maka stopped unexpectedly."
    assert "ended without taking over" in window.host_lost.body_label.text()
    assert window.isVisible()

    # One that keeps running (the new start, up) is not said to have ended.
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    window.host_lost._restart_argv = tuple(sleeper)
    window.host_lost.restart_button.click()
    pid = window.host_lost._started_pid
    try:
        qtbot.wait(600)
        assert not window.host_lost.restart_button.isEnabled()
        assert "Starting Maka again" in window.host_lost.body_label.text()
    finally:
        subprocess.run(["kill", "-9", str(pid)], check=False)


def test_a_window_refused_by_a_host_without_a_window_offers_a_new_one(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``maka host`` started in a terminal after a crash refused the old window, which said
    "use the new window" and closed: there was no new window."""
    from renderer import host_lost_panel

    monkeypatch.setattr(main_window_module, "SUPERSEDED_CLOSE_MS", 200)
    monkeypatch.setattr(host_lost_panel, "STARTED_CHECK_MS", 50)
    window, bridge = _running_window(qtbot, restart=(sys.executable, "-c", "pass"))
    bridge._set_connection_state(ConnectionState.HOST_LOST)
    bridge._rejected_by_windowless = True
    bridge._set_connection_state(ConnectionState.REJECTED)
    panel = window.host_lost
    assert panel.title_label.text() == "Maka was started again, without a window (maka host)."
    assert "use the new window" not in panel.body_label.text()
    assert panel.restart_button.isVisible() and panel.restart_button.isEnabled()
    assert panel.restart_button.text() == "Open a new window"
    qtbot.wait(500)
    assert window.isVisible(), "it stays until a new window is opened"
    panel.restart_button.click()
    assert "Opening a new window" in panel.body_label.text()
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=10_000)


def test_a_new_window_that_never_ends_its_start_still_closes_the_old_one(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``maka host`` that refused the window stopped before Open a new window was pressed:
    the start it made became the desktop itself, which never ends, and the old window stayed,
    "Opening a new window… this one closes then", its button greyed, for good. It closes a few
    seconds after the start all the same; a panel back to "stopped" says Restart Maka again."""
    import subprocess

    from renderer import host_lost_panel

    monkeypatch.setattr(main_window_module, "SUPERSEDED_CLOSE_MS", 200)
    monkeypatch.setattr(host_lost_panel, "OPENED_CLOSE_MS", 300)
    sleeper = (sys.executable, "-c", "import time; time.sleep(30)")
    window, bridge = _running_window(qtbot, restart=sleeper)
    bridge._set_connection_state(ConnectionState.HOST_LOST)
    bridge._rejected_by_windowless = True
    bridge._set_connection_state(ConnectionState.REJECTED)
    panel = window.host_lost
    panel.restart_button.click()
    try:
        qtbot.waitUntil(lambda: not window.isVisible(), timeout=10_000)
    finally:
        subprocess.run(["kill", "-9", str(panel._started_pid)], check=False)
    panel.show_lost()
    assert panel.restart_button.text() == "Restart Maka"


def test_without_a_restart_command_the_button_says_where_to_start(qtbot: QtBot) -> None:
    window, bridge = _running_window(qtbot)
    bridge._set_connection_state(ConnectionState.HOST_LOST)
    assert not window.host_lost.restart_button.isEnabled()
    assert "applications menu" in window.host_lost.restart_button.toolTip()


def test_a_window_replaced_by_a_newer_start_says_so_and_closes(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(main_window_module, "SUPERSEDED_CLOSE_MS", 200)
    window, bridge = _running_window(qtbot)
    bridge._set_connection_state(ConnectionState.HOST_LOST)
    bridge._set_connection_state(ConnectionState.REJECTED)  # the new start refused our token
    assert window.host_lost.title_label.text() == "Maka was started again."
    assert not window.host_lost.restart_button.isVisible()
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5000)


def test_a_mere_disconnect_is_not_a_lost_main_process(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    window, bridge = _running_window(qtbot, confirm=True)
    asked: list[int] = []

    def quit_question(running: list[str]) -> bool:
        asked.append(len(running))
        return True

    monkeypatch.setattr(window, "_quit_confirmed", quit_question)
    bridge.disconnect_now()
    assert not window.host_lost.isVisible()
    assert "reconnecting" in window.connection_status.text
    window.close()
    assert asked == [1], "while the main process may still run its turn, quitting asks"


def test_a_command_the_main_process_says_was_stopped_with_maka_reads_so(qtbot: QtBot) -> None:
    """A card the main process sends after a restart (``host_stopped``: the command was stopped
    when Maka stopped) says it may have run in part; only the window that lost its main process
    says it does not know how the call ended."""
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(SESSION,)))
    stopped = RUNNING_CARD.model_copy(
        update={"status": bc.ToolCardStatus.INDETERMINATE, "park_reason": "host_stopped"}
    )
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(stopped,)))
    card = window.transcript.tool_card(stopped.tool_call_id)
    assert card is not None
    said = card.explanation_label.text()
    assert said.startswith("Maka stopped while this call was running; it may have run in part")
    assert "this window" not in said, said
