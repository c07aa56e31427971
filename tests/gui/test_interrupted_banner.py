"""The interrupted banner in every state, driven through a fake bridge (pytest-qt, offscreen)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QTime
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from app.bridge_contract import ChangedPath, ResumeDiagnostic
from app.park_guidance import (
    DAMAGED_RECORD_HEADLINE,
    DAMAGED_RECORD_NEXT_STEP,
    DAMAGED_RECORD_REASON,
    LEDGER_DAMAGED,
)
from renderer import theme
from renderer.interrupted_banner import BannerState, InterruptedBanner
from renderer.park_text import Severity, describe, next_step
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui


def _banner(qtbot: QtBot, *, enabled: bool = True) -> tuple[InterruptedBanner, FakeBridge]:
    bridge = FakeBridge(safe_resume_enabled=enabled)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session("s1", interrupted=True)
    return banner, bridge


def _state(banner: InterruptedBanner) -> BannerState:
    """Read through a function so mypy does not narrow the property between transitions."""
    return banner.state


def _click_resume(qtbot: QtBot, banner: InterruptedBanner) -> None:
    assert banner.action_button.isVisible() and banner.action_button.isEnabled()
    QTest.mouseClick(banner.action_button, Qt.MouseButton.LeftButton)


def test_hidden_unless_the_latest_run_was_interrupted(qtbot: QtBot) -> None:
    banner, _ = _banner(qtbot)
    banner.set_session("s1", interrupted=False)
    assert _state(banner) is BannerState.HIDDEN and not banner.isVisible()
    banner.set_session(None, interrupted=True)
    assert _state(banner) is BannerState.HIDDEN and not banner.isVisible()


def test_idle_explains_and_offers_safe_resume(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    assert _state(banner) is BannerState.IDLE
    assert banner.isVisible()
    assert "Maka stopped before" in banner.title_label.text()
    assert banner.action_button.text() == "Safe resume"
    assert not banner.busy_bar.isVisible()
    assert not banner.tools_row.isVisible()
    assert bridge.calls_to("resume_latest") == []


def test_idle_says_why_a_stopped_automatic_resume_waits_for_the_user(qtbot: QtBot) -> None:
    """Maka stopped during an automatic Safe resume: the crash-loop guard never takes it up by
    itself again, and the banner says so first (the window said nothing of it)."""
    banner, _ = _banner(qtbot)
    assert "not continued automatically" not in banner.body_label.text()
    banner.set_session("s1", interrupted=True, automatic=True)
    assert _state(banner) is BannerState.IDLE
    assert banner.title_label.text() == "Maka stopped during an automatic Safe resume."
    body = banner.body_label.text()
    assert body.startswith("It is not continued automatically again, so a crash cannot repeat")
    assert "Safe resume continues from the last step" in body, "the way on is still said"
    assert banner.action_button.text() == "Safe resume"
    banner.set_session("s2", interrupted=True)
    assert "automatic" not in banner.body_label.text(), "another session's banner"


def test_idle_to_resuming_to_started_closes(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    assert bridge.calls_to("resume_latest") == [("s1",)]
    assert _state(banner) is BannerState.RESUMING
    assert banner.isVisible()
    assert banner.busy_bar.isVisible()
    assert not banner.action_button.isEnabled()
    assert banner.request_resume() is False, "no second request while one is in flight"
    assert len(bridge.calls_to("resume_latest")) == 1
    bridge.push_started("s1")
    assert _state(banner) is BannerState.STARTED
    assert not banner.isVisible()
    # the main process then reports the session is no longer interrupted
    banner.set_session("s1", interrupted=False)
    assert _state(banner) is BannerState.HIDDEN


def test_started_banner_stays_closed_while_the_summary_still_says_interrupted(
    qtbot: QtBot,
) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    bridge.push_started("s1")
    banner.set_session("s1", interrupted=True)
    assert not banner.isVisible()
    banner.set_session("s1", interrupted=False)
    banner.set_session("s1", interrupted=True)  # interrupted again later: offer resume again
    assert _state(banner) is BannerState.IDLE and banner.isVisible()


@pytest.mark.parametrize(
    ("reasons", "severity"),
    [
        (("continuation_already_exists",), Severity.INFO),
        (("dangling_tool_state", "pending_permission"), Severity.WARN),
        (("workspace_identity_mismatch", "runtime_offset_mismatch"), Severity.ERROR),
    ],
)
def test_idle_to_resuming_to_parked_shows_every_reason(
    qtbot: QtBot, reasons: tuple[str, ...], severity: Severity
) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    bridge.push_parked("s1", reasons)
    assert _state(banner) is BannerState.PARKED
    assert banner.isVisible()
    shown = [label.text() for label in banner.reason_labels]
    assert len(shown) == len(reasons)
    for code, text in zip(reasons, shown, strict=True):
        assert describe(code).sentence in text
        assert code not in text, "codes belong in the details, sentences in the banner"
    assert banner.property("severity") == severity.value
    accent = banner.accent
    assert accent is not None and accent.name() == theme.accent(severity, banner.palette()).name()
    # Try again only when a listed reason is one the user can change (here: the marker).
    offered = "workspace_identity_mismatch" in reasons
    assert banner.action_button.isVisible() is offered
    if offered:
        assert banner.action_button.isEnabled() and banner.action_button.text() == "Try again"


def test_parked_details_list_codes_and_operations_and_copy_to_clipboard(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    diagnostics = (
        ResumeDiagnostic(
            code="pending_tool_result",
            message="call has a dispatch but no result",
            tool_call_id="call_7",
            tool_name="write_file",
        ),
        ResumeDiagnostic(code="workspace_location_changed"),
    )
    bridge.push_parked("s1", ("dangling_tool_state",), diagnostics)
    assert banner.tools_row.isVisible()
    assert not banner.details_panel.isVisible(), "details start collapsed"
    QTest.mouseClick(banner.details_toggle, Qt.MouseButton.LeftButton)
    assert banner.details_panel.isVisible()
    details = banner.details_label.text()
    assert "dangling_tool_state" in details
    assert "pending_tool_result · write_file (call_7)" in details
    assert "workspace_location_changed" in details
    QTest.mouseClick(banner.details_toggle, Qt.MouseButton.LeftButton)
    assert not banner.details_panel.isVisible()

    QGuiApplication.clipboard().clear()
    QTest.mouseClick(banner.copy_button, Qt.MouseButton.LeftButton)
    copied = QGuiApplication.clipboard().text()
    assert copied == banner.diagnostics_text()
    assert "session: s1" in copied and "result: parked" in copied
    assert "dangling_tool_state (warn)" in copied
    assert "pending_tool_result · write_file (call_7): call has a dispatch" in copied
    assert banner.copy_button.text() == "Copied"


def test_parked_on_an_unknown_tool_outcome_says_what_to_do_next(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    unknown = ResumeDiagnostic(code="pending_tool_result", tool_call_id="c1", tool_name="bash")
    bridge.push_parked("s1", ("dangling_tool_state",), (unknown,))
    body = banner.body_label.text()
    assert banner.body_label.isVisible()
    assert "Check the files" in body and "send a new message" in body
    assert "Try again" in body, "it says when Try again can give another answer"
    assert body == next_step(("dangling_tool_state",))
    assert banner.action_button.isVisible(), "confirming whether it ran can change the answer"
    layout = banner.reasons_box.parentWidget() or banner
    reason_y = banner.reason_labels[0].mapTo(layout, banner.reason_labels[0].rect().topLeft()).y()
    body_y = banner.body_label.mapTo(layout, banner.body_label.rect().topLeft()).y()
    assert reason_y < body_y, "the next step follows the reasons it is about"


def test_a_diagnostic_that_names_its_call_names_it_once(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    message = (
        "generation 1: tool call bash (demo_2ededbd31a540420) is indeterminate "
        "(dispatch_without_response)"
    )
    diagnostic = ResumeDiagnostic(
        code="pending_tool_result",
        message=message,
        tool_call_id="demo_2ededbd31a540420",
        tool_name="bash",
    )
    bridge.push_parked("s1", ("dangling_tool_state",), (diagnostic,))
    line = banner.details_label.text().splitlines()[-1]
    assert line == f"pending_tool_result: {message}"
    assert line.count("demo_2ededbd31a540420") == 1 and line.count("bash") == 1
    assert f"  pending_tool_result: {message}" in banner.diagnostics_text()


def test_a_history_replay_code_is_said_in_words(qtbot: QtBot) -> None:
    """The replay's message names only its code; the details say the code's sentence."""
    banner, bridge = _banner(qtbot)
    diagnostic = ResumeDiagnostic(
        code="unsupported_role", message="generation 1: provider replay: unsupported_role"
    )
    bridge.push_parked("s1", ("runtime_ledger_unreadable",), (diagnostic,))
    line = banner.details_label.text().splitlines()[-1]
    assert line == f"unsupported_role: {describe('unsupported_role').sentence}"
    assert "provider replay" not in banner.diagnostics_text()


def test_a_damaged_record_is_said_in_words_with_where_it_is(qtbot: QtBot) -> None:
    """The ledger check's code travels in the diagnostic's ``sub_code`` (never read out of the
    message); the details say its sentence, the code, and the event or the tool call."""
    banner, bridge = _banner(qtbot)
    damaged = describe("orphan_response").sentence + " " + LEDGER_DAMAGED
    bridge.push_parked(
        "s1",
        ("dangling_tool_state",),
        (
            ResumeDiagnostic(
                code="tool_recovery_corruption",
                message="generation 1: tool call c9 has corrupt ledger facts (orphan_response)",
                tool_call_id="c9",
                tool_name="read_file",
                sub_code="orphan_response",
            ),
            ResumeDiagnostic(
                code="tool_ledger_corruption",
                message="generation 1: ledger issue orphan_response",
                event_id="toolop_1_response",
                sub_code="orphan_response",
            ),
        ),
    )
    assert banner.details_label.text().splitlines()[-2:] == [
        f"tool_recovery_corruption [orphan_response] · read_file (c9): {damaged}",
        f"tool_ledger_corruption [orphan_response] · event toolop_1_response: {damaged}",
    ]
    assert "ledger issue" not in banner.diagnostics_text()
    assert "corrupt ledger facts" not in banner.diagnostics_text()


def test_a_damaged_record_is_the_banners_story_not_an_unknown_outcome(qtbot: QtBot) -> None:
    """With an unknown outcome beside the damage, the headline, the reason, the next step and
    the colour say the history is damaged and what helps (a new message; maka doctor; a
    backup), and no Try again is offered: saying whether a call ran cannot lift the damage."""
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    bridge.push_parked(
        "s1",
        ("dangling_tool_state",),
        (
            ResumeDiagnostic(code="pending_tool_result", message="no result", tool_call_id="c1"),
            ResumeDiagnostic(
                code="tool_ledger_corruption",
                message="generation 1: ledger issue orphan_response",
                event_id="toolop_1_response",
                sub_code="orphan_response",
            ),
        ),
    )
    assert banner.title_label.text() == DAMAGED_RECORD_HEADLINE
    assert [label.text() for label in banner.reason_labels] == [f"•  {DAMAGED_RECORD_REASON}"]
    body = banner.body_label.text()
    assert body == DAMAGED_RECORD_NEXT_STEP
    assert "new message" in body and "maka doctor" in body and "backup" in body
    assert "It ran / It did not run" not in body
    assert not banner.action_button.isVisible(), "checking again cannot lift the damage"
    assert banner.property("severity") == Severity.ERROR.value
    assert banner.details_label.text().splitlines()[0] == "dangling_tool_state  [error]"
    assert f"dangling_tool_state (error): {DAMAGED_RECORD_REASON}" in banner.diagnostics_text()

    # The same unknown outcome without the damage keeps its own words and Try again.
    bridge.push_parked(
        "s1",
        ("dangling_tool_state",),
        (ResumeDiagnostic(code="pending_tool_result", message="no result", tool_call_id="c1"),),
    )
    assert banner.title_label.text() != DAMAGED_RECORD_HEADLINE
    assert banner.reason_labels[0].text() == "•  " + describe("dangling_tool_state").sentence
    assert banner.property("severity") == Severity.WARN.value
    assert banner.action_button.isVisible()


def test_parked_then_try_again_resumes(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    bridge.push_parked("s1", ("background_operation_pending",))
    _click_resume(qtbot, banner)
    assert _state(banner) is BannerState.RESUMING
    assert banner.reason_labels == []
    assert bridge.calls_to("resume_latest") == [("s1",), ("s1",)]


def test_idle_to_resuming_to_failed_then_retry(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    bridge.push_failed("s1", "host_draining", "host is closing")
    assert _state(banner) is BannerState.FAILED
    assert banner.property("severity") == Severity.ERROR.value
    assert describe("host_draining").sentence in banner.body_label.text()
    assert "host_draining" in banner.body_label.text()
    assert banner.action_button.text() == "Retry"
    _click_resume(qtbot, banner)
    assert _state(banner) is BannerState.RESUMING
    assert len(bridge.calls_to("resume_latest")) == 2


def test_unknown_failure_code_shows_the_main_process_message(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    bridge.push_failed("s1", "brand_new_code", "the store is read-only")
    assert "the store is read-only" in banner.body_label.text()


def test_losing_the_connection_while_resuming_fails_with_retry(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    bridge.disconnect_now()
    assert _state(banner) is BannerState.FAILED
    assert "bridge_disconnected" in banner.body_label.text()


def test_flag_off_is_disabled_text_without_button(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot, enabled=False)
    assert _state(banner) is BannerState.DISABLED
    assert banner.isVisible()
    assert "turned off" in banner.body_label.text()
    # it points at the checkbox, not at an environment variable
    assert "Settings" in banner.body_label.text()
    assert "MAKA_" not in banner.body_label.text()
    assert not banner.action_button.isVisible()
    assert banner.request_resume() is False
    assert bridge.calls_to("resume_latest") == []
    bridge.set_safe_resume_enabled(True)
    assert _state(banner) is BannerState.IDLE and banner.action_button.isVisible()


def test_answers_for_another_session_do_not_leak_into_the_shown_one(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    banner.set_session("s2", interrupted=True)
    assert _state(banner) is BannerState.IDLE
    bridge.push_parked("s1", ("dangling_tool_state",))
    assert _state(banner) is BannerState.IDLE and banner.reason_labels == []
    banner.set_session("s1", interrupted=True)
    assert _state(banner) is BannerState.PARKED


def test_banner_colours_follow_a_dark_palette(qtbot: QtBot) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    bridge = FakeBridge()
    banner = InterruptedBanner(bridge, window)
    banner.set_session("s1", interrupted=True)
    bridge.push_parked("s1", ("runtime_ledger_empty",))
    light_fill = banner.fill.name()
    dark = QPalette()
    dark.setColor(QPalette.ColorRole.Window, QColor("#1e1e1e"))
    dark.setColor(QPalette.ColorRole.WindowText, QColor("#e6e6e6"))
    dark.setColor(QPalette.ColorRole.Base, QColor("#252525"))
    window.setPalette(dark)
    assert banner.fill.name() != light_fill
    accent = banner.accent
    assert accent is not None and accent.name() == theme.accent(Severity.ERROR, dark).name()
    assert banner.fill.lightness() < 100, "a dark palette keeps a dark banner"
    assert banner.fill.name() == theme.tinted_background(accent, dark).name()


def test_try_again_says_when_it_checked_and_what_still_holds(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    bridge.push_parked("s1", ("workspace_identity_mismatch",))
    assert "Checked again" not in banner.body_label.text(), "the first answer is no re-check"
    assert banner.action_button.text() == "Try again"
    _click_resume(qtbot, banner)
    assert len(bridge.calls_to("resume_latest")) == 2
    bridge.push_parked("s1", ("workspace_identity_mismatch",))
    now = QTime.currentTime().toString("HH:mm")
    body = banner.body_label.text()
    assert body.startswith(
        f"Checked again at {now}: still on hold because of the reason above. "
    ), body
    assert [label.property("code") for label in banner.reason_labels] == [
        "workspace_identity_mismatch"
    ]
    assert _state(banner) is BannerState.PARKED


def test_a_park_nobody_can_change_offers_no_try_again(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    bridge.push_parked("s1", ("runtime_lineage_cycle",))
    assert not banner.action_button.isVisible()
    assert banner.request_resume() is False, "Ctrl+R cannot ask for the same answer again"
    assert len(bridge.calls_to("resume_latest")) == 1
    assert "Copy diagnostics" in banner.body_label.text()
    bridge.push_parked("s1", ("dangling_tool_state",))  # an unsettled write: nothing to confirm
    assert not banner.action_button.isVisible()
    assert "Try again" not in banner.body_label.text()


def test_a_drift_names_the_changed_files_first_ten_and_how_many_more(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    changed = tuple(ChangedPath(path=f"src/file{n:02d}.py", change="modified") for n in range(12))
    drift = ResumeDiagnostic(
        code="workspace_drift",
        message="62 files changed since the snapshot taken at the stop",
        changed_paths=(ChangedPath(path="notes.md", change="added"), *changed),
        more_changed_paths=49,
    )
    bridge.push_parked("s1", ("workspace_drift",), (drift,))
    assert _state(banner) is BannerState.PARKED
    assert banner.title_label.text() == "Files changed since the run stopped."
    body = banner.body_label.text()
    assert "added: notes.md" in body and "changed: src/file08.py" in body
    assert "src/file09.py" not in body  # the first 10 only
    assert "and 52 more" in body  # 3 of the 50 sent, plus 49 the planner counted
    assert next_step(("workspace_drift",)) in body


def test_flag_off_by_the_environment_does_not_point_at_a_locked_checkbox(qtbot: QtBot) -> None:
    """When MAKA_RUNTIME_SAFE_BOUNDARY_RESUME decides, the settings checkbox is disabled: the
    banner's advice names what actually turns Safe resume on."""
    banner, bridge = _banner(qtbot, enabled=False)
    assert "Settings" in banner.body_label.text()
    bridge.settings_current.emit(
        bc.SettingsCurrentPush(
            provider="offline_demo", resume_from_environment=True, safe_resume_enabled=False
        )
    )
    text = banner.body_label.text()
    assert "turned off" in text
    assert "Settings" not in text
    assert "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME" in text
    bridge.settings_current.emit(bc.SettingsCurrentPush(provider="offline_demo"))
    assert "Settings" in banner.body_label.text()


def test_try_again_on_changed_files_says_when_it_checked(qtbot: QtBot) -> None:
    """Files still changed after Try again: the banner lists them as before and says that it
    checked again, so the click visibly did something."""
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    drift = ResumeDiagnostic(
        code="workspace_drift",
        message="1 file changed since the snapshot taken at the stop",
        changed_paths=(ChangedPath(path="notes.txt", change="modified"),),
    )
    options = ("isolated_restore", "rebaseline")
    bridge.push_parked("s1", ("workspace_drift",), (drift,), options)
    assert "Checked again" not in banner.body_label.text(), "the first answer is no re-check"
    assert banner.action_button.text() == "Try again"
    _click_resume(qtbot, banner)
    bridge.push_parked("s1", ("workspace_drift",), (drift,), options)
    now = QTime.currentTime().toString("HH:mm")
    body = banner.body_label.text()
    assert banner.title_label.text() == "Files changed since the run stopped."
    assert "changed: notes.txt" in body
    assert f"Checked again at {now}: still on hold because of the reason above." in body


def test_a_history_that_no_longer_fits_offers_a_new_message_not_try_again(qtbot: QtBot) -> None:
    banner, bridge = _banner(qtbot)
    _click_resume(qtbot, banner)
    overflow = ResumeDiagnostic(
        code="provider_history_too_long",
        message="the run stopped because the conversation did not fit the model's context "
        "window; resuming would send it again",
    )
    bridge.push_parked("s1", ("provider_history_too_long",), (overflow,))
    assert _state(banner) is BannerState.PARKED
    assert [label.property("code") for label in banner.reason_labels] == [
        "provider_history_too_long"
    ]
    assert "no longer fits the model's context window" in banner.reason_labels[0].text()
    body = banner.body_label.text()
    assert "Send a new, shorter message" in body and "Try again" not in body
    assert not banner.action_button.isVisible(), "checking again would send the same history"
