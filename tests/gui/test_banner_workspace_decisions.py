"""The banner's two ways forward after a workspace park (docs/design/workspace.md section 4): shown
only when the main process offers them, each with its consequence in one line, and each sends the
user's decision (never a plain resume)."""

from __future__ import annotations

from unittest import mock

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from app.bridge_contract import ChangedFilesShown, ChangedPath, ResumeDiagnostic
from renderer.interrupted_banner import BannerState, InterruptedBanner
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui
DRIFT = ResumeDiagnostic(
    code="workspace_drift",
    message="1 file changed",
    changed_paths=(ChangedPath(path="n.txt", change="modified"),),
)


def _opened(qtbot: QtBot) -> tuple[InterruptedBanner, FakeBridge]:
    """A banner on interrupted session ``s1`` in /home/ann/proj, Safe resume on."""
    bridge = FakeBridge(safe_resume_enabled=True)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session("s1", interrupted=True, folder="/home/ann/proj")
    return banner, bridge


def _parked(qtbot: QtBot, options: tuple[str, ...]) -> tuple[InterruptedBanner, FakeBridge]:
    banner, bridge = _opened(qtbot)
    bridge.push_parked("s1", ("workspace_drift",), (DRIFT,), workspace_options=options)
    return banner, bridge


def test_both_ways_forward_with_their_consequences(qtbot: QtBot) -> None:
    banner, bridge = _parked(qtbot, ("isolated_restore", "rebaseline"))
    assert banner.decisions_row.isVisible()
    assert banner.restore_button.text() == "Continue in a restored copy…"
    assert banner.rebaseline_button.text() == "Continue with my current files"
    assert banner.restore_note.text() == (
        "Your folder stays as it is; the session continues in a copy of it as it was at the stop."
    )
    assert "Choose how to continue below" in banner.body_label.text()
    QTest.mouseClick(banner.rebaseline_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("resume_latest") == [("s1", "rebaseline", None)]
    assert banner.state is BannerState.RESUMING
    assert not banner.decisions_row.isVisible()


def test_the_restore_button_confirms_then_asks_for_the_copy(qtbot: QtBot) -> None:
    banner, bridge = _parked(qtbot, ("isolated_restore", "rebaseline"))

    def cancel(box: QMessageBox) -> int:
        said = box.informativeText()
        assert "beside yours, proj-restored-1 (or the next free number)" in said
        assert "beside the repository instead (<repository>-…-proj-restored-1)" in said
        return 0

    with mock.patch.object(QMessageBox, "exec", cancel):
        banner.restore_button.click()
    assert bridge.calls_to("resume_latest") == []  # cancelled: nothing sent
    assert banner.state is BannerState.PARKED

    def make(box: QMessageBox) -> int:
        [made] = [b for b in box.buttons() if b.text() == "Make the copy"]
        made.click()
        return 0

    with mock.patch.object(QMessageBox, "exec", make):
        banner.restore_button.click()
    assert bridge.calls_to("resume_latest") == [("s1", "isolated_restore", None)]


def test_a_decision_not_offered_is_neither_shown_nor_sent(qtbot: QtBot) -> None:
    banner, bridge = _parked(qtbot, ("rebaseline",))  # the snapshot is gone: no copy possible
    assert banner.rebaseline_button.isVisible()
    assert not banner.restore_button.isVisible() and not banner.restore_note.isVisible()
    assert not banner.request_decision("isolated_restore", "/tmp/x")
    assert bridge.calls_to("resume_latest") == []

    plain, plain_bridge = _parked(qtbot, ())
    assert not plain.decisions_row.isVisible()
    assert not plain.request_decision("rebaseline")
    assert plain_bridge.calls_to("resume_latest") == []


def stale_park(qtbot: QtBot, folder: str, point: str) -> tuple[InterruptedBanner, FakeBridge]:
    """A banner parked on a stale snapshot of ``folder`` whose restored copy would hold
    ``point`` (the ``workspace_restore_point`` note), both choices offered."""
    bridge = FakeBridge(safe_resume_enabled=True)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session("s1", interrupted=True, folder=folder)
    note = ResumeDiagnostic(code="workspace_restore_point", message=point)
    stale = ResumeDiagnostic(code="workspace_checkpoint_stale", message="stale")
    bridge.push_parked(
        "s1",
        ("workspace_checkpoint_stale",),
        (stale, note),
        workspace_options=("isolated_restore", "rebaseline"),
    )
    return banner, bridge


def test_the_restore_offer_says_when_the_copy_is_not_the_folder_at_the_stop(
    qtbot: QtBot,
) -> None:
    banner, bridge = stale_park(
        qtbot,
        "/home/ann/proj",
        "a restored copy would hold the folder as it was before the bash call c1; "
        "what it changed is not in the copy",
    )
    assert banner.restore_note.text() == (
        "Your folder stays as it is; a restored copy would hold the folder as it was before "
        "the bash call c1; what it changed is not in the copy."
    )
    assert "as it was at the stop" not in banner.restore_button.toolTip()
    assert banner.body_label.text() == (
        "Choose how to continue below, or check your files and send a new message to carry on."
    )

    def cancel(box: QMessageBox) -> int:
        assert box.text() == "Continue in a restored copy of the folder?"
        assert box.informativeText().startswith(
            "A restored copy would hold the folder as it was before the bash call c1"
        )
        return 0

    with mock.patch.object(QMessageBox, "exec", cancel):
        banner.restore_button.click()
    assert bridge.calls_to("resume_latest") == []


def test_the_rebaseline_offer_says_when_no_snapshot_can_tell_which_files_changed(
    qtbot: QtBot,
) -> None:
    compared_text = (
        "The files stay as they are now; the model is told which changed and re-reads them."
    )
    banner, _ = _parked(qtbot, ("isolated_restore", "rebaseline"))
    assert banner.rebaseline_note.text() == compared_text

    bridge = FakeBridge(safe_resume_enabled=True)
    missing = InterruptedBanner(bridge)
    qtbot.addWidget(missing)
    missing.show()
    missing.set_session("s1", interrupted=True, folder="/home/ann/proj")
    gone = ResumeDiagnostic(code="workspace_checkpoint_missing", message="gone")
    uncompared = ResumeDiagnostic(code="workspace_rebaseline_uncompared", message="no snapshot")
    bridge.push_parked(
        "s1",
        ("workspace_checkpoint_missing",),
        (gone, uncompared),
        workspace_options=("rebaseline",),
    )
    assert missing.rebaseline_note.text() == (
        "The files stay as they are now; no snapshot is left to tell which changed, so the "
        "model is told they may have changed and re-reads them."
    )
    assert missing.rebaseline_button.toolTip() == missing.rebaseline_note.text()
    assert "which changed and re-reads" not in missing.rebaseline_note.text()


def test_the_rebaseline_offer_says_why_the_current_files_cannot_be_snapshotted(
    qtbot: QtBot,
) -> None:
    """A nested repository made while Maka was stopped: the snapshot at the stop is there (the
    restored copy is offered from it), but the current files cannot be snapshotted. The note
    said "no snapshot is left", beside a restore offered from that very snapshot, and never
    said that continuing goes on without snapshots."""
    bridge = FakeBridge(safe_resume_enabled=True)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session("s1", interrupted=True, folder="/home/ann/proj")
    drift = ResumeDiagnostic(code="workspace_drift", message="changed")
    uncompared = ResumeDiagnostic(code="workspace_rebaseline_uncompared", message="no listing")
    uncaptured = ResumeDiagnostic(
        code="workspace_rebaseline_uncaptured",
        message="the current files cannot be snapshotted (sub is a nested repository): "
        "continuing with them goes on without a snapshot until that is removed",
    )
    bridge.push_parked(
        "s1",
        ("workspace_drift",),
        (drift, uncompared, uncaptured),
        workspace_options=("isolated_restore", "rebaseline"),
    )
    note = banner.rebaseline_note.text()
    assert "no snapshot is left" not in note, note
    assert note.startswith("The files stay as they are now, but the current files cannot be "), note
    assert "(sub is a nested repository)" in note and "without a snapshot until" in note, note
    assert banner.rebaseline_button.toolTip() == note


def _restore_dialog_text(
    qtbot: QtBot, folder: str, note: ResumeDiagnostic
) -> tuple[str, FakeBridge]:
    """The restore confirmation's text (line breaks as spaces) for a drift park on ``folder``
    carrying ``note``, the dialog cancelled; and the bridge."""
    bridge = FakeBridge(safe_resume_enabled=True)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session("s1", interrupted=True, folder=folder)
    bridge.push_parked(
        "s1",
        ("workspace_drift",),
        (DRIFT, note),
        workspace_options=("isolated_restore", "rebaseline"),
    )
    shown: list[str] = []

    def cancel(box: QMessageBox) -> int:
        shown.append(box.informativeText().replace("\n", " "))
        return 0

    with mock.patch.object(QMessageBox, "exec", cancel):
        banner.restore_button.click()
    [text] = shown
    return text, bridge


def test_the_restore_dialog_does_not_name_a_copy_left_by_a_resume_that_did_not_start(
    qtbot: QtBot,
) -> None:
    left = ResumeDiagnostic(
        code="workspace_restore_abandoned",
        message="a restored copy at /home/ann/proj-restored-1 was made by a resume that did "
        "not start; it is left as it is and not used",
    )
    text, _bridge = _restore_dialog_text(qtbot, "/home/ann/proj", left)
    assert "proj-restored-1" not in text
    assert "the next free proj-restored-N (a copy left by a resume that did not start is not " in (
        text
    )


@pytest.mark.parametrize(
    ("folder", "place", "beside_repository"),
    [
        ("/home/ann/proj", "/home/ann/proj-restored-2", False),
        ("/home/ann/proj/", "/home/ann/proj-restored-1", False),
        ("/home/ann/mono/packages/web", "/home/ann/mono-packages-web-restored-1", True),
    ],
)
def test_the_restore_dialog_names_the_folder_the_main_process_would_make(
    qtbot: QtBot, folder: str, place: str, beside_repository: bool
) -> None:
    """The main process names the exact new folder (``workspace_restore_place``): the dialog
    says it, not a pattern, and says why it is beside the repository when it is."""
    named = ResumeDiagnostic(
        code="workspace_restore_place",
        message=f"a restored copy would be made in a new folder, {place}",
        path=place,
    )
    text, bridge = _restore_dialog_text(qtbot, folder, named)
    assert f"Maka makes the copy in a new folder, {place} (or the next free number" in text
    assert "<repository>" not in text and "-restored-N" not in text
    assert ("beside the Git repository your folder is in" in text) is beside_repository
    assert bridge.calls_to("resume_latest") == []


@pytest.mark.parametrize(
    ("clone", "says"),
    [
        (True, "The copy is a clone of your Git repository at your current commit, with the"),
        (False, None),
        (None, "If your folder is a Git repository, the copy is a clone of it at your current"),
    ],
)
def test_the_restore_dialog_says_whether_the_copy_is_a_clone(
    qtbot: QtBot, clone: bool | None, says: str | None
) -> None:
    """The main process says whether the copy would be a clone of the folder's Git repository
    (the note's ``clone``): the dialog says it plainly, says nothing about Git for a folder
    that is no repository, and keeps the conditional sentence for an older park."""
    place = "/home/ann/proj-restored-1"
    named = ResumeDiagnostic(code="workspace_restore_place", message="…", path=place, clone=clone)
    text, _bridge = _restore_dialog_text(qtbot, "/home/ann/proj", named)
    if says is None:
        assert "Git repository" not in text and "clone" not in text
    else:
        assert says in text


def test_choose_folder_sends_the_folder_the_user_picked(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch
) -> None:
    from PySide6.QtWidgets import QFileDialog

    banner, bridge = _parked(qtbot, ("isolated_restore", "rebaseline"))

    def choose(box: QMessageBox) -> int:
        [button] = [b for b in box.buttons() if b.text() == "Choose folder…"]
        button.click()
        return 0

    asked: list[str] = []

    def pick(parent: object, title: str, start: str) -> str:
        asked.append(start)
        return "/home/ann/empty"

    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(pick))
    with mock.patch.object(QMessageBox, "exec", choose):
        banner.restore_button.click()
    assert asked == ["/home/ann"]  # the dialog starts beside the session's folder
    assert bridge.calls_to("resume_latest") == [("s1", "isolated_restore", "/home/ann/empty")]


def test_the_restore_dialog_says_what_snapshots_leave_out(qtbot: QtBot) -> None:
    banner, _ = _parked(qtbot, ("isolated_restore", "rebaseline"))
    shown: list[str] = []

    def cancel(box: QMessageBox) -> int:
        shown.append(box.informativeText())
        return 0

    with mock.patch.object(QMessageBox, "exec", cancel):
        banner.restore_button.click()
    assert shown[0].endswith(
        "Paths Git ignores there (your .gitignore files, .git/info/exclude, your excludes file) "
        "unless it tracks "
        "them, and files over 50 MiB, are not in snapshots, so they are not in the copy."
    )
    assert (
        "If your folder is a Git repository, the copy is a clone of it at your current commit "
        "with the snapshot's files on top, so git status and git diff there show the same "
        "changes, none of them staged." in shown[0]
    )


UNKNOWN = ResumeDiagnostic(
    code="pending_tool_result",
    message="generation 1: tool call read_file (c1) is indeterminate (dispatch_without_response)",
    tool_call_id="c1",
    tool_name="read_file",
)


def test_changed_files_with_another_reason_are_listed_under_their_own_reason(
    qtbot: QtBot,
) -> None:
    """A call with an unknown outcome and changed files: both reasons at once, the files
    under the drift's reason (not presented as the whole story in the headline), the call's
    next step first, then that the files still need a decision; no decision offered yet."""
    bridge = FakeBridge(safe_resume_enabled=True)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session("s1", interrupted=True, folder="/home/ann/proj")
    bridge.push_parked("s1", ("dangling_tool_state", "workspace_drift"), (UNKNOWN, DRIFT))
    assert banner.state is BannerState.PARKED
    labels = {label.property("code"): label.text() for label in banner.reason_labels}
    assert list(labels) == ["dangling_tool_state", "workspace_drift"]
    assert labels["workspace_drift"].splitlines()[1].strip() == "changed: n.txt"
    assert "n.txt" not in labels["dangling_tool_state"]
    assert banner.title_label.text() == "Safe resume is on hold."
    body = banner.body_label.text()
    assert "n.txt" not in body  # said once, under its reason
    assert body == (
        "Check the files that tool call may have changed, then send a new message to carry on, "
        "or say on its card below whether it ran (It ran / It did not run): Safe resume then "
        "checks again by itself, as Try again does,"
        " and offers Safe resume if nothing else stands in the way. After that, the files in "
        "the folder still need your decision on how to continue with them."
    )
    assert not banner.decisions_row.isVisible()
    assert banner.action_button.text() == "Try again"

    # Once the call is settled, the announced park remains, with its two ways forward.
    bridge.push_parked(
        "s1", ("workspace_drift",), (DRIFT,), workspace_options=("isolated_restore", "rebaseline")
    )
    assert banner.title_label.text() == "Files changed since the run stopped."
    assert "changed: n.txt" in banner.body_label.text()
    assert banner.decisions_row.isVisible()


def test_an_answer_that_takes_the_folder_promises_no_decision_about_the_files(
    qtbot: QtBot,
) -> None:
    """A command killed mid-call in a run that takes snapshots: answering whether it ran also
    takes the folder as it is (the main process's ``workspace_settle_takes_folder`` note), so
    the banner says so instead of announcing a decision about the files that never comes."""
    command = ResumeDiagnostic(
        code="pending_tool_result",
        message="generation 1: tool call bash (c1) is indeterminate (dispatch_without_response)",
        tool_call_id="c1",
        tool_name="bash",
    )
    stale = ResumeDiagnostic(
        code="workspace_checkpoint_stale",
        message='the command "make" may have changed files after the last snapshot',
    )
    takes = ResumeDiagnostic(
        code="workspace_settle_takes_folder",
        message="answering whether the interrupted calls ran also takes the folder as it is now",
    )
    banner, bridge = _opened(qtbot)
    reasons = ("dangling_tool_state", "workspace_checkpoint_stale")
    bridge.push_parked("s1", reasons, (command, stale, takes))
    body = banner.body_label.text()
    assert "still need your decision" not in body
    assert body.endswith(
        "Safe resume then checks again by itself, as Try again does,"
        " and offers Safe resume if nothing else stands in the way. Your answer also takes the "
        "folder as it is now as the new starting point, so the files need no other decision."
    )
    assert not banner.decisions_row.isVisible()
    # Without the note (an older park, or a read-only call), the decision is still announced.
    bridge.push_parked("s1", reasons, (command, stale))
    assert banner.body_label.text().endswith(
        "After that, the files in the folder still need your decision on how to continue with them."
    )


def test_a_write_that_did_not_happen_beside_changed_files_names_the_cards_answer(
    qtbot: QtBot,
) -> None:
    """A write recovery found not done, and a file changed afterwards: the call's step names
    the card's one answer (Confirm: it did not run), which also takes the folder as it is, so
    Try again is offered and no decision about the files is announced."""
    parked = ResumeDiagnostic(
        code="tool_recovery_parked",
        message="tool call write_file (w1) is parked (reconcile_matches_prior_state)",
        tool_call_id="w1",
        tool_name="write_file",
        sub_code="reconcile_matches_prior_state",
    )
    found = ResumeDiagnostic(
        code="reconcile_matches_prior_state",
        message="recovery checked out.txt: it is as it was, the write did not happen",
        tool_call_id="w1",
        tool_name="write_file",
    )
    takes = ResumeDiagnostic(code="workspace_settle_takes_folder", message="answering ...")
    banner, bridge = _opened(qtbot)
    reasons = ("dangling_tool_state", "workspace_drift")
    bridge.push_parked("s1", reasons, (parked, DRIFT, found, takes))
    assert banner.body_label.text() == (
        "Check the file that write was to change, then send a new message to carry on, or "
        "confirm on its card below that the write did not happen (Confirm: it did not run): "
        "Safe resume then checks again by itself, as Try again does,"
        " and offers Safe resume if nothing else stands in the way. Your answer also takes "
        "the folder as it is now as the new starting point, so the files need no other "
        "decision."
    )
    assert banner.action_button.text() == "Try again"
    labels = {label.property("code"): label.text() for label in banner.reason_labels}
    assert labels["dangling_tool_state"] == (
        "•  Maka stopped before the file changed, so the file is as it was; the write is not "
        "redone on its own."
    )


def test_a_parked_write_and_a_stale_snapshot_point_to_a_new_message_only(qtbot: QtBot) -> None:
    """When nothing the user can do clears the other reason (a parked write is final), the
    banner does not promise a decision on the files later."""
    parked = ResumeDiagnostic(
        code="tool_recovery_parked",
        message="tool call bash (c1) is parked (reconcile_diverged)",
        tool_call_id="c1",
        tool_name="bash",
    )
    stale = ResumeDiagnostic(code="workspace_checkpoint_stale", message="a bash call may have…")
    bridge = FakeBridge(safe_resume_enabled=True)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session("s1", interrupted=True)
    bridge.push_parked("s1", ("dangling_tool_state", "workspace_checkpoint_stale"), (parked, stale))
    body = banner.body_label.text()
    assert "still need your decision" not in body
    assert (
        body
        == "Check the files that tool call may have changed, then send a new message to carry on."
    )


def test_a_stale_snapshot_lists_the_files_that_differ_from_it(qtbot: QtBot) -> None:
    """A stale snapshot's park names the files that differ from that snapshot under its reason,
    as a drift does; the headline never claims they changed after the stop."""
    stale = ResumeDiagnostic(
        code="workspace_checkpoint_stale",
        message='the command "make" may have changed files after the last snapshot; 2 files '
        "differ from that snapshot",
        changed_paths=(
            ChangedPath(path="build/out.o", change="added"),
            ChangedPath(path="src/a.c", change="modified"),
        ),
    )
    bridge = FakeBridge(safe_resume_enabled=True)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session("s1", interrupted=True, folder="/home/ann/proj")
    bridge.push_parked(
        "s1",
        ("workspace_checkpoint_stale",),
        (stale,),
        workspace_options=("isolated_restore", "rebaseline"),
    )
    labels = {label.property("code"): label.text() for label in banner.reason_labels}
    lines = [line.strip() for line in labels["workspace_checkpoint_stale"].splitlines()]
    assert lines == [
        "•  The snapshot of the folder is out of date.",
        "These differ from the last snapshot:",
        "added: build/out.o",
        "changed: src/a.c",
    ]
    # With the call it went stale after (its ``subject``), the reason names it.
    bridge.push_parked(
        "s1",
        ("workspace_checkpoint_stale",),
        (stale.model_copy(update={"subject": 'the command "make"'}),),
        workspace_options=("isolated_restore", "rebaseline"),
    )
    labels = {label.property("code"): label.text() for label in banner.reason_labels}
    lines = [line.strip() for line in labels["workspace_checkpoint_stale"].splitlines()]
    assert lines[:2] == [
        '•  The snapshot of the folder is out of date: the command "make" may have changed files '
        "after it.",
        "These differ from the last snapshot:",
    ]
    assert banner.title_label.text() != "Files changed since the run stopped."
    assert banner.decisions_row.isVisible()


def test_continue_with_my_current_files_carries_the_files_it_listed(qtbot: QtBot) -> None:
    """The main process compares them with the files changed now: a list that changed since is
    shown again (``workspace_drift_changed``) rather than taken on the user's behalf."""
    banner, bridge = _parked(qtbot, ("isolated_restore", "rebaseline"))
    QTest.mouseClick(banner.rebaseline_button, Qt.MouseButton.LeftButton)
    assert bridge.files_shown == [
        (ChangedFilesShown(code="workspace_drift", changed_paths=DRIFT.changed_paths),)
    ]


def test_in_a_short_window_the_ways_forward_leave_the_transcript_its_room(
    qtbot: QtBot,
) -> None:
    """At 760x540 the banner of a park on changed files, with the notes beside its two
    buttons, was taller than its room: it was cut off and drawn over the transcript, which
    kept a sliver. In a short window the notes stay in the buttons' tooltips."""
    from PySide6.QtWidgets import QApplication

    from app import bridge_contract as bc
    from renderer.main_window import MainWindow

    bridge = FakeBridge(safe_resume_enabled=True)
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(760, 540)
    with qtbot.waitExposed(window):
        window.show()
    summary = bc.SessionSummary(
        session_id="s1",
        cwd="/home/ann/proj",
        title="Drift",
        last_run_status=bc.RunStatusValue.FAILED,
        interrupted=True,
    )
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(summary,)))
    qtbot.waitUntil(lambda: window.session_id == "s1", timeout=3000)
    drift = ResumeDiagnostic(
        code="workspace_drift",
        message="2 files changed",
        changed_paths=(
            ChangedPath(path="notes.md", change="modified"),
            ChangedPath(path="untracked.txt", change="deleted"),
        ),
    )
    options = ("isolated_restore", "rebaseline")
    bridge.push_parked("s1", ("workspace_drift",), (drift,), workspace_options=options)
    banner = window.banner
    qtbot.waitUntil(banner.restore_button.isVisible, timeout=3000)
    for _ in range(3):
        QApplication.processEvents()
    assert not banner.restore_note.isVisible() and not banner.rebaseline_note.isVisible()
    assert "Your folder stays as it is" in banner.restore_button.toolTip()
    holder = banner.parentWidget()
    assert holder is not None
    below = window.transcript.mapTo(window, window.transcript.rect().topLeft()).y()
    bottom = holder.mapTo(window, holder.rect().bottomLeft()).y()
    assert bottom < below, (bottom, below)  # the banner ends above the transcript
    assert window.transcript.height() >= 60, window.transcript.height()
    # With room again, the notes come back beside the buttons.
    window.resize(1100, 820)
    qtbot.waitUntil(banner.restore_note.isVisible, timeout=3000)
