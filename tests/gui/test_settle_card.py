"""The unknown-outcome card asks "Did it run?" (docs/design/recovery.md section 8): the command in
full, an optional note, "It ran" / "It did not run"; the answer goes to the main process as
``tools.settle``; a refusal is said on the card with its code; the settled card reads "Confirmed
by you: it ran" with the time and note; and the banner offers Safe resume again when the main
process says nothing else parks."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QDateTime, Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.interrupted_banner import BannerState
from renderer.main_window import MainWindow
from renderer.transcript_items import ToolCardWidget
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

COMMAND = "psql -c 'UPDATE accounts SET migrated = true' && echo done " + "x" * 400
SESSION = bc.SessionSummary(
    session_id="s1",
    cwd="/w/one",
    title="One",
    last_run_status=bc.RunStatusValue.FAILED,
    interrupted=True,
    failure_class="app_restarted",
)
UNKNOWN = bc.ToolCardItem(
    item_id="call-evt",
    tool_call_id="c1",
    tool_name="bash",
    args_summary=COMMAND[:300],
    args_full=COMMAND,
    status=bc.ToolCardStatus.INDETERMINATE,
    settleable=True,
)
AT = 1_764_606_000_000


def _window(qtbot: QtBot) -> tuple[MainWindow, FakeBridge, ToolCardWidget]:
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(1000, 800)
    with qtbot.waitExposed(window):
        window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(SESSION,)))
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(UNKNOWN,)))
    card = window.transcript.tool_card("c1")
    assert card is not None
    return window, bridge, card


def test_the_card_asks_with_the_command_in_full_and_sends_the_answer(qtbot: QtBot) -> None:
    _, bridge, card = _window(qtbot)
    panel = card.settle_panel
    assert panel is not None and panel.isVisibleTo(card)
    assert panel.command_view.toPlainText() == COMMAND  # not the 300-character summary
    assert not card.args_label.isVisibleTo(card)  # shown once, in full
    assert panel.ran_button.text() == "It ran" and panel.not_run_button.text() == "It did not run"
    QTest.keyClicks(panel.note_edit, "  the column is set on every row  ")
    QTest.mouseClick(panel.ran_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("settle_call") == [("s1", "c1", True, "the column is set on every row")]
    assert not panel.ran_button.isEnabled()  # waits for the main process's answer


def test_without_a_note_nothing_but_the_choice_is_sent(qtbot: QtBot) -> None:
    _, bridge, card = _window(qtbot)
    assert card.settle_panel is not None
    QTest.mouseClick(card.settle_panel.not_run_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("settle_call") == [("s1", "c1", False, None)]


def test_a_refusal_is_said_on_the_card_and_the_question_stays(qtbot: QtBot) -> None:
    _, bridge, card = _window(qtbot)
    panel = card.settle_panel
    assert panel is not None
    QTest.mouseClick(panel.ran_button, Qt.MouseButton.LeftButton)
    bridge.push_settled(
        "s1",
        "c1",
        recorded=False,
        code="background_operation_pending",
        message="a process of this call is still running (bash `make` (pid 4242)); stop it first",
    )
    assert panel.ran_button.isEnabled()
    text = panel.status_label.text()
    assert text.startswith("Not recorded:") and "[background_operation_pending]" in text
    assert "still running" in text and "pid 4242" in text
    bridge.push_settled("s1", "c1", recorded=False, code="operation_settled", message="toolop_x")
    assert panel.status_label.text() == (
        "Not recorded: This tool call is already settled. [operation_settled]"
    )


def test_the_settled_card_reads_confirmed_by_you_with_time_and_note(qtbot: QtBot) -> None:
    window, bridge, card = _window(qtbot)
    settled = UNKNOWN.model_copy(
        update={
            "status": bc.ToolCardStatus.COMPLETED_AFTER_RECOVERY,
            "settleable": False,
            "attestation": bc.AttestationChoice.RAN,
            "attested_at": AT,
            "attestation_note": "checked the table",
        }
    )
    bridge.transcript_item.emit(bc.TranscriptItemPush(session_id="s1", item=settled))
    window.transcript.flush()
    assert card.chip.text() == "Confirmed by you"
    when = QDateTime.fromMSecsSinceEpoch(AT).toString("yyyy-MM-dd HH:mm")
    explanation = card.explanation_label.text()
    assert explanation.startswith(f"Confirmed by you: it ran · {when}")
    assert "Your note: checked the table" in explanation
    # Right after the answer nothing has continued yet: the model has not been told anything.
    assert "was told" not in explanation
    assert "the model gets your answer in its place" in explanation
    assert card.settle_panel is not None and not card.settle_panel.isVisibleTo(card)
    not_run = settled.model_copy(
        update={"attestation": bc.AttestationChoice.NOT_RUN, "attestation_note": None}
    )
    bridge.transcript_item.emit(bc.TranscriptItemPush(session_id="s1", item=not_run))
    window.transcript.flush()
    assert card.explanation_label.text().startswith("Confirmed by you: it did not run")
    assert "Your note" not in card.explanation_label.text()


def test_a_call_that_may_not_be_settled_does_not_ask(qtbot: QtBot) -> None:
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(SESSION,)))
    live = UNKNOWN.model_copy(update={"settleable": False})
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(live,)))
    card = window.transcript.tool_card("c1")
    assert card is not None and card.settle_panel is None
    assert card.chip.text() == "Outcome unknown"


def test_the_banner_offers_safe_resume_again_once_nothing_else_parks(qtbot: QtBot) -> None:
    window, bridge, _card = _window(qtbot)
    bridge.push_parked("s1", ("dangling_tool_state",))
    assert window.banner.state is BannerState.PARKED
    bridge.push_settled("s1", "c1", recorded=True, resume_available=False)
    assert window.banner.state is BannerState.PARKED  # something else still parks
    bridge.push_settled("s1", "c1", recorded=True, resume_available=True)
    assert window.banner.state.value == BannerState.IDLE.value
    assert window.banner.action_button.text() == "Safe resume"
    assert window.banner.action_button.isEnabled()


def _pushed(window: MainWindow, bridge: FakeBridge, item: bc.ToolCardItem) -> ToolCardWidget:
    """The card of ``item`` in the session as the main process opens it."""
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(UNKNOWN, item)))
    card = window.transcript.tool_card(item.tool_call_id)
    assert card is not None
    return card


NOT_DONE = bc.ToolCardItem(
    item_id="write-evt",
    tool_call_id="c2",
    tool_name="write_file",
    args_summary="a.txt (4 bytes)",
    args_full="path: a.txt\ncontent: one",
    status=bc.ToolCardStatus.PARKED,
    park_reason="reconcile_matches_prior_state",
    settleable=True,
)
"""A file write recovery found not done: the user may confirm it did not run."""


def test_a_write_recovery_found_not_done_asks_only_to_confirm_it(qtbot: QtBot) -> None:
    window, bridge, _ = _window(qtbot)
    card = _pushed(window, bridge, NOT_DONE)
    panel = card.settle_panel
    assert panel is not None and panel.isVisibleTo(card)
    assert not panel.ran_button.isVisibleTo(card)
    assert panel.not_run_button.text() == "Confirm: it did not run"
    assert "Recovery found this file as it was before the write" in panel.question_label.text()
    QTest.mouseClick(panel.not_run_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("settle_call") == [("s1", "c2", False, None)]


def test_any_other_park_asks_nothing(qtbot: QtBot) -> None:
    window, bridge, _ = _window(qtbot)
    diverged = NOT_DONE.model_copy(update={"park_reason": "reconcile_diverged"})
    card = _pushed(window, bridge, diverged)
    assert card.settle_panel is None
    # It does not say that it waits for the user: no answer settles it.
    said = card.explanation_label.text()
    assert "waits for you" not in said, said
    assert "no answer can: Safe resume does not continue its run" in said, said
    assert "changed by someone else" in said, said


def test_a_write_recovery_found_not_done_says_it_waits_for_the_answer(qtbot: QtBot) -> None:
    window, bridge, _ = _window(qtbot)
    said = _pushed(window, bridge, NOT_DONE).explanation_label.text()
    assert said.startswith("Recovery could not settle this call on its own; it waits for you."), (
        said
    )
    assert "no answer can" not in said, said


WRITING = UNKNOWN.model_copy(
    update={
        "settle_folder": bc.SettleFolderNote(
            compared=True, changed_paths=["count.txt", "notes.txt"], more_changed=0
        )
    }
)


def _card_of(qtbot: QtBot, item: bc.ToolCardItem) -> ToolCardWidget:
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(1000, 800)
    with qtbot.waitExposed(window):
        window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(SESSION,)))
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(item,)))
    card = window.transcript.tool_card("c1")
    assert card is not None
    return card


def test_a_writing_call_says_before_the_answer_that_it_takes_the_folder_as_it_is(
    qtbot: QtBot,
) -> None:
    card = _card_of(qtbot, WRITING)
    panel = card.settle_panel
    assert panel is not None and panel.folder_label.isVisibleTo(card)
    assert panel.folder_label.text() == (
        "Your answer also takes the folder as it is now as the new starting point. "
        "2 files changed since the last snapshot: count.txt, notes.txt."
    )
    assert panel.ran_button.isEnabled()  # said before anything is recorded


@pytest.mark.parametrize(
    ("note", "said"),
    [
        (bc.SettleFolderNote(changed_paths=[]), "No file changed since the last snapshot."),
        (bc.SettleFolderNote(compared=False), "There is no snapshot to compare it with."),
        (
            bc.SettleFolderNote(changed_paths=["a.txt"], more_changed=3),
            "4 files changed since the last snapshot: a.txt and 3 more.",
        ),
        (bc.SettleFolderNote(unreadable=True), "your answer is recorded all the same"),
        # A readable folder whose marker git clean -fdx deleted: not "cannot be read now".
        (
            bc.SettleFolderNote(unreadable=True, not_its_workspace=True),
            "it is not shown to be the session's (its workspace marker is missing",
        ),
    ],
)
def test_the_folder_note_words(qtbot: QtBot, note: bc.SettleFolderNote, said: str) -> None:
    card = _card_of(qtbot, UNKNOWN.model_copy(update={"settle_folder": note}))
    assert card.settle_panel is not None
    assert said in card.settle_panel.folder_label.text()


def test_the_host_tells_a_folder_not_shown_to_be_the_sessions_from_one_it_cannot_read() -> None:
    from app.host.settle_folder import folder_note
    from renderer.settle_panel import folder_note_text
    from runtime.ledger.checkpoint_ports import SettleBaseline

    missing = folder_note(
        SettleBaseline(None, problem="workspace_identity_mismatch: ... (its marker is missing)")
    )
    assert missing.unreadable and missing.not_its_workspace
    unreadable = folder_note(SettleBaseline(None, problem="checkpoint_git_failed: git is gone"))
    assert unreadable.unreadable and not unreadable.not_its_workspace
    assert "cannot be read now" not in folder_note_text(missing)


def test_a_card_without_a_folder_note_says_nothing_of_the_folder(qtbot: QtBot) -> None:
    card = _card_of(qtbot, UNKNOWN)
    assert card.settle_panel is not None
    assert not card.settle_panel.folder_label.isVisibleTo(card)


def test_the_answer_carries_the_note_shown_and_a_changed_note_comes_back_with_the_refusal(
    qtbot: QtBot,
) -> None:
    """The folder changed after the card was shown (the user edited a file): the main process
    records nothing, re-sends the card with the note as it is now, then refuses; the card shows
    the new words with the refusal under them, and asks again."""
    bridge = FakeBridge()
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(1000, 800)
    with qtbot.waitExposed(window):
        window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(SESSION,)))
    shown = bc.SettleFolderNote(changed_paths=[])
    item = UNKNOWN.model_copy(update={"settle_folder": shown})
    bridge.session_opened.emit(bc.SessionOpenedPush(session_id="s1", items=(item,)))
    card = window.transcript.tool_card("c1")
    assert card is not None and card.settle_panel is not None
    panel = card.settle_panel
    assert panel.folder_label.text().endswith("No file changed since the last snapshot.")
    QTest.mouseClick(panel.ran_button, Qt.MouseButton.LeftButton)
    assert bridge.folders_shown == [shown]  # what the card said goes with the answer

    now = bc.SettleFolderNote(changed_paths=["main.py"])
    changed = item.model_copy(update={"settle_folder": now})
    bridge.transcript_item.emit(bc.TranscriptItemPush(session_id="s1", item=changed))
    bridge.push_settled(
        "s1",
        "c1",
        recorded=False,
        code="settle_folder_changed",
        message="It said no file changed since the last snapshot; now 1 file changed since "
        "the last snapshot: main.py.",
    )
    qtbot.wait(50)  # the transcript's next frame
    assert panel.folder_label.text().endswith("1 file changed since the last snapshot: main.py.")
    status = panel.status_label.text()
    assert status.startswith("Not recorded: The folder changed after this card was shown")
    assert "now 1 file changed since the last snapshot: main.py." in status
    assert status.endswith("[settle_folder_changed]")
    assert panel.ran_button.isEnabled()
