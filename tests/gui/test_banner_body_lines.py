"""At the window's minimum size the banner's running text takes at most two lines; the rest is
one click away under More, so the transcript stays in view."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from app.bridge_contract import ResumeDiagnostic
from renderer.interrupted_banner import BODY_LINES, InterruptedBanner
from renderer.main_window import MainWindow
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

SESSION = bc.SessionSummary(
    session_id="s1",
    cwd="/w/one",
    title="One",
    last_run_status=bc.RunStatusValue.FAILED,
    interrupted=True,
)


def _window(qtbot: QtBot, *, enabled: bool) -> tuple[MainWindow, FakeBridge]:
    bridge = FakeBridge(safe_resume_enabled=enabled)
    window = MainWindow(bridge)
    qtbot.addWidget(window)
    window.resize(720, 480)
    window.show()
    bridge.sessions_listed.emit(bc.SessionsListedPush(sessions=(SESSION,)))
    QApplication.processEvents()
    return window, bridge


def _lines(banner: InterruptedBanner) -> int:
    label = banner.body_label
    return round(label.height() / label.fontMetrics().lineSpacing())


def test_a_long_body_shows_two_lines_and_more_at_the_minimum_size(qtbot: QtBot) -> None:
    window, _bridge = _window(qtbot, enabled=False)  # Safe resume off: a three-sentence body
    banner = window.banner
    qtbot.waitUntil(banner.isVisible)
    label = banner.body_label
    full = label.heightForWidth(label.width())
    assert full > BODY_LINES * label.fontMetrics().lineSpacing(), "the body needs more lines"
    qtbot.waitUntil(lambda: banner.body_cut)
    assert _lines(banner) <= BODY_LINES
    assert banner.body_more.isVisible() and banner.body_more.text() == "More"
    assert "Settings" in label.text(), "the whole sentence is kept for More"
    cut_height = banner.height()

    banner.body_more.click()
    QApplication.processEvents()
    assert not banner.body_cut and banner.body_more.text() == "Less"
    qtbot.waitUntil(lambda: label.height() >= full)
    assert banner.height() > cut_height

    banner.body_more.click()
    qtbot.waitUntil(lambda: _lines(banner) <= BODY_LINES)


def test_a_short_body_shows_whole_without_more(qtbot: QtBot) -> None:
    window, bridge = _window(qtbot, enabled=True)
    banner = window.banner
    window.resize(1400, 900)
    unknown = ResumeDiagnostic(code="pending_tool_result", tool_call_id="c1", tool_name="bash")
    bridge.push_parked("s1", ("dangling_tool_state",), (unknown,))
    QApplication.processEvents()
    label = banner.body_label
    assert label.heightForWidth(label.width()) <= BODY_LINES * label.fontMetrics().lineSpacing()
    assert not banner.body_more.isVisible() and not banner.body_cut
    qtbot.waitUntil(lambda: label.height() >= label.heightForWidth(label.width()))  # all shown


def test_the_changed_files_stay_whole_and_the_next_step_is_not_cut(qtbot: QtBot) -> None:
    """The list of changed files is no running text: the two lines count after it."""
    bridge = FakeBridge(safe_resume_enabled=True)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.resize(1100, 300)
    banner.show()
    banner.set_session("s1", interrupted=True, folder="/home/ann/proj")
    drift = ResumeDiagnostic(
        code="workspace_drift",
        message="3 files changed",
        changed_paths=tuple(
            bc.ChangedPath(path=name, change="modified") for name in ("a.txt", "b.txt", "c.txt")
        ),
    )
    bridge.push_parked(
        "s1", ("workspace_drift",), (drift,), workspace_options=("isolated_restore", "rebaseline")
    )
    QApplication.processEvents()
    label = banner.body_label
    assert "c.txt" in label.text() and "Choose how to continue below" in label.text()
    qtbot.waitUntil(lambda: label.height() >= label.heightForWidth(label.width()))
    assert not banner.body_cut and not banner.body_more.isVisible()
