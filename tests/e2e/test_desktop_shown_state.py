"""The user decides on what the window says, so it must be current when they decide (the real
main process, the real window or banner over the real socket, a real ``maka run`` killed).

- A card asking "Did it run?" says what answering does to the folder. When the folder changed
  after the card was shown, "It ran" records nothing: the card comes back with the note as it is
  now and says why nothing was recorded (``settle_folder_changed``); the next answer is recorded.
- Try again (the park checked again) and Locate folder… send the card again with its note as
  it is now, before the user answers.
- "Continue with my current files" on a list of changed files that changed since it was shown
  continues nothing: the banner shows the new list (``workspace_drift_changed``) and asks again.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from renderer.interrupted_banner import BannerState
from renderer.main_window import MainWindow
from renderer.transcript_items import ToolCardWidget
from tests.helpers.crashed_session import WAIT_MS, crashed_run, drifted_banner, main_started
from tests.helpers.desktop_window import connected_window
from tests.helpers.maka_process import MainProcess
from tests.helpers.maka_run import committed_runs

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]


def _answered(data: Path) -> bool:
    """Whether an answer about a call was recorded (its attestation)."""
    return any(
        "attestedAt" in str((event.get("actions") or {}).get("toolRecovery", ""))
        for _header, events in committed_runs(data)
        for event in events
    )


def _baselines(data: Path) -> list[dict[str, Any]]:
    return [
        dict(event["actions"]["workspaceBaseline"])
        for _header, events in committed_runs(data)
        for event in events
        if "workspaceBaseline" in (event.get("actions") or {})
    ]


def _card_asking(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess], *, move_to: Path | None = None
) -> tuple[Path, Path, str, MainWindow, ToolCardWidget]:
    """A ``maka run`` in a folder with snapshots killed inside its ``bash`` call (P4: it ran, its
    outcome was never recorded), then the real main process (Safe resume on) and a real window
    on the session, whose card asks "Did it run?" with its note on the folder. ``move_to``: the
    folder is moved there before the main process starts."""
    crashed = crashed_run(tmp_path, "P4", files={"main.py": "print('hello')\n"})
    session_id = crashed.session_id
    if move_to is not None:
        crashed.work.rename(move_to)
    main = main_started(crashed, qtbot, processes)
    window, _bridge = connected_window(qtbot, main, WAIT_MS)
    qtbot.waitUntil(lambda: window.session_id == session_id, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: _panel_of(window) is not None, timeout=WAIT_MS)
    card = window.transcript.tool_card("c1")
    assert card is not None
    return crashed.data, move_to or crashed.work, session_id, window, card


def _panel_of(window: MainWindow) -> object:
    card = window.transcript.tool_card("c1")
    return card.settle_panel if card is not None else None


def _status(window: MainWindow) -> str:
    """What the card says under its buttons ("" once it no longer asks)."""
    card = window.transcript.tool_card("c1")
    panel = card.settle_panel if card is not None else None
    return panel.status_label.text() if panel is not None and panel.isVisible() else ""


def _note(window: MainWindow) -> str:
    card = window.transcript.tool_card("c1")
    assert card is not None and card.settle_panel is not None
    return card.settle_panel.folder_label.text()


def test_an_answer_on_a_folder_note_that_no_longer_holds_is_not_recorded(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, work, _, window, card = _card_asking(tmp_path, qtbot, processes)
    assert card.settle_panel is not None
    assert _note(window).endswith("1 file changed since the last snapshot: n.txt.")

    with (work / "main.py").open("a") as edited:
        edited.write("x\n")  # the user edits a file after the card was shown
    panel = card.settle_panel
    panel.ran_button.click()
    qtbot.waitUntil(lambda: "[settle_folder_changed]" in _status(window), timeout=WAIT_MS)
    qtbot.wait(100)  # the window's next frames: the refusal stays under the new words
    status = _status(window)
    assert status.startswith("Not recorded: The folder changed after this card was shown")
    assert "It said 1 file changed since the last snapshot: n.txt; now 2 files" in status
    # The card says what the answer does now, and asks again.
    assert _note(window).endswith("2 files changed since the last snapshot: main.py, n.txt.")
    assert panel.ran_button.isEnabled() and panel.isVisible()
    assert not _answered(data) and _baselines(data) == []
    # The banner above it lists the files as they differ now too, not the old list.
    qtbot.waitUntil(
        lambda: "main.py" in " ".join(label.text() for label in window.banner.reason_labels),
        timeout=WAIT_MS,
    )

    panel.ran_button.click()  # on what the card says now: recorded
    qtbot.waitUntil(lambda: _answered(data), timeout=WAIT_MS)
    [baseline] = _baselines(data)
    assert sorted(p["path"] for p in baseline["changedPaths"]) == ["main.py", "n.txt"]
    window.close()


def test_try_again_sends_the_card_again_with_the_folder_as_it_is_now(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, work, _, window, _card = _card_asking(tmp_path, qtbot, processes)
    assert _note(window).endswith("1 file changed since the last snapshot: n.txt.")
    (work / "main.py").unlink()
    assert window.banner.request_resume()  # Try again: the park is checked again
    qtbot.waitUntil(lambda: "main.py" in _note(window), timeout=WAIT_MS)
    assert _note(window).endswith("2 files changed since the last snapshot: main.py, n.txt.")
    assert window.banner.state is BannerState.PARKED
    assert not _answered(data)
    window.close()


def test_a_located_folder_sends_the_card_again_with_the_folder_readable(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    moved = tmp_path / "moved"
    data, _, session_id, window, _card = _card_asking(tmp_path, qtbot, processes, move_to=moved)
    assert "the folder cannot be read now" in _note(window)
    assert window.banner.folder_missing
    assert window._bridge.relocate_session(session_id, str(moved))  # Locate folder…
    qtbot.waitUntil(lambda: "cannot be read" not in _note(window), timeout=WAIT_MS)
    assert _note(window).endswith("1 file changed since the last snapshot: n.txt.")
    assert not _answered(data)
    window.close()


def test_continue_with_my_current_files_on_a_list_that_changed_shows_the_new_list(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> None:
    data, work, _, bridge, banner = drifted_banner(tmp_path, qtbot, processes)
    assert "changed: n.txt" in banner.body_label.text()
    assert "late.txt" not in banner.body_label.text()
    (work / "late.txt").write_text("made after the list was shown\n")

    banner.rebaseline_button.click()
    qtbot.waitUntil(
        lambda: (
            banner.state is BannerState.PARKED
            and "workspace_drift_changed"
            in [label.property("code") for label in banner.reason_labels]
        ),
        timeout=WAIT_MS,
    )
    assert [label.property("code") for label in banner.reason_labels] == [
        "workspace_drift_changed",
        "workspace_drift",
    ]
    body = banner.body_label.text()
    assert "added: late.txt" in body and "changed: n.txt" in body
    assert banner.rebaseline_button.isVisible()
    assert len(committed_runs(data)) == 1  # nothing continued, nothing captured

    banner.rebaseline_button.click()  # on the list shown now: it continues
    qtbot.waitUntil(lambda: len(committed_runs(data)) == 2, timeout=WAIT_MS)
    start = committed_runs(data)[1][1][0]
    changed = start["actions"]["workspaceBaseline"]["changedPaths"]
    assert sorted(entry["path"] for entry in changed) == ["late.txt", "n.txt"]
    bridge.stop()
    banner.close()
