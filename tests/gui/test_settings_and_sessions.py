"""Settings dialog (provider choice, write-only key) and the session list model."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QDialogButtonBox
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.park_text import Severity
from renderer.session_list import SUMMARY_ROLE, SessionListModel, SessionListPanel, badge_for
from renderer.settings_dialog import SettingsDialog
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui


def _dialog(
    qtbot: QtBot, current: bc.SettingsCurrentPush | None
) -> tuple[SettingsDialog, FakeBridge]:
    bridge = FakeBridge()
    dialog = SettingsDialog(bridge, current)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.tabs.currentWidget() is dialog.provider_page, "it opens on the provider"
    return dialog, bridge


def _save(dialog: SettingsDialog) -> None:
    button = dialog.buttons.button(QDialogButtonBox.StandardButton.Save)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)


def test_offline_demo_is_the_default_and_hides_nothing_it_needs(qtbot: QtBot) -> None:
    dialog, bridge = _dialog(qtbot, None)
    assert dialog.offline_radio.isChecked()
    assert not dialog.endpoint.isEnabled()
    _save(dialog)
    assert bridge.calls_to("update_settings") == [
        (
            bc.ProviderChoice.OFFLINE_DEMO,
            "",
            "",
            None,
            bc.DEFAULT_MAX_STEPS,
            False,
            True,
            bc.ProviderTuning(),
        )
    ]


def test_openai_compatible_needs_url_and_model_and_key_is_write_only(qtbot: QtBot) -> None:
    current = bc.SettingsCurrentPush(
        provider=bc.ProviderChoice.OFFLINE_DEMO, openai_base_url="", api_key_set=True
    )
    dialog, bridge = _dialog(qtbot, current)
    assert dialog.key_edit.text() == "", "a stored key is never shown"
    assert "stored" in dialog.key_edit.placeholderText()
    dialog.openai_radio.setChecked(True)
    save = dialog.buttons.button(QDialogButtonBox.StandardButton.Save)
    assert dialog.endpoint.isEnabled() and not save.isEnabled()
    # Save is off, and the dialog says why: the grey "llama3.1" was only an example.
    missing = dialog.endpoint_missing
    assert missing.isVisible() and "a base URL and a model" in missing.text(), missing.text()
    dialog.base_url_edit.setText(" http://localhost:11434/v1 ")
    assert not save.isEnabled() and missing.text().startswith("Enter a model to save")
    dialog.model_edit.setText("llama3.1")
    assert save.isEnabled() and not missing.isVisible()
    _save(dialog)
    assert bridge.calls_to("update_settings") == [
        (
            bc.ProviderChoice.OPENAI_COMPATIBLE,
            "http://localhost:11434/v1",
            "llama3.1",
            None,
            bc.DEFAULT_MAX_STEPS,
            False,
            True,
            bc.ProviderTuning(),
        )
    ]


def test_step_limit_shows_the_stored_value_and_saves_the_new_one(qtbot: QtBot) -> None:
    current = bc.SettingsCurrentPush(provider=bc.ProviderChoice.OFFLINE_DEMO, max_steps=350)
    dialog, bridge = _dialog(qtbot, current)
    assert dialog.max_steps_spin.value() == 350
    assert dialog.max_steps_spin.minimum() == 1
    assert dialog.max_steps_spin.maximum() == bc.MAX_STEPS_LIMIT
    dialog.max_steps_spin.setValue(1200)
    _save(dialog)
    assert bridge.calls_to("update_settings")[0][4] == 1200


def test_new_key_or_forget_key(qtbot: QtBot) -> None:
    current = bc.SettingsCurrentPush(
        provider=bc.ProviderChoice.OPENAI_COMPATIBLE,
        openai_base_url="https://api.example.test/v1",
        openai_model="m",
        api_key_set=True,
    )
    dialog, bridge = _dialog(qtbot, current)
    dialog.key_edit.setText("sk-new")
    _save(dialog)
    dialog2, bridge2 = _dialog(qtbot, current)
    dialog2.forget_key.setChecked(True)
    _save(dialog2)
    assert bridge.calls_to("update_settings")[0][3] == "sk-new"
    assert bridge2.calls_to("update_settings")[0][3] == ""


def test_safe_resume_and_automatic_resume_are_checkboxes_saved_with_the_rest(
    qtbot: QtBot,
) -> None:
    current = bc.SettingsCurrentPush(
        provider=bc.ProviderChoice.OFFLINE_DEMO, safe_resume=False, auto_resume=True
    )
    dialog, bridge = _dialog(qtbot, current)
    dialog.tabs.setCurrentWidget(dialog.turns_page)
    assert not dialog.safe_resume_box.isChecked() and dialog.auto_resume_box.isChecked()
    assert dialog.safe_resume_box.isEnabled()
    assert not dialog.auto_resume_box.isEnabled(), "automatic resume needs Safe resume"
    assert not dialog.environment_note.isVisible()
    QTest.mouseClick(dialog.safe_resume_box, Qt.MouseButton.LeftButton)
    assert dialog.auto_resume_box.isEnabled()
    QTest.mouseClick(dialog.auto_resume_box, Qt.MouseButton.LeftButton)
    _save(dialog)
    assert bridge.calls_to("update_settings")[0][5:7] == (True, False)


def test_provider_waits_context_size_and_tool_choice_show_and_save(qtbot: QtBot) -> None:
    stored = bc.ProviderTuning(
        timeout_s=90, data_timeout_s=900, context_tokens=4096, tool_choice=True
    )
    current = bc.SettingsCurrentPush(
        provider=bc.ProviderChoice.OPENAI_COMPATIBLE,
        openai_base_url="http://127.0.0.1:8080/v1",
        openai_model="qwen",
        provider_tuning=stored,
    )
    dialog, bridge = _dialog(qtbot, current)
    assert dialog.timeout_spin.value() == 90 and dialog.data_timeout_spin.value() == 900
    assert dialog.context_spin.value() == 4096 and dialog.tool_choice_box.isChecked()
    QTest.mouseClick(dialog.tool_choice_box, Qt.MouseButton.LeftButton)
    dialog.context_spin.setValue(0)
    assert dialog.context_spin.text() == "Not set"
    _save(dialog)
    saved = bridge.calls_to("update_settings")[0][-1]
    assert saved == bc.ProviderTuning(timeout_s=90, data_timeout_s=900, tool_choice=False)


def test_a_data_wait_shorter_than_the_answer_wait_cannot_be_saved(qtbot: QtBot) -> None:
    current = bc.SettingsCurrentPush(
        provider=bc.ProviderChoice.OPENAI_COMPATIBLE,
        openai_base_url="http://127.0.0.1:8080/v1",
        openai_model="qwen",
    )
    dialog, _bridge = _dialog(qtbot, current)
    save = dialog.buttons.button(QDialogButtonBox.StandardButton.Save)
    assert save.isEnabled() and not dialog.wait_problem.isVisible()
    assert dialog.timeout_spin.text() == "Default (120 s)"
    dialog.data_timeout_spin.setValue(60)  # shorter than the default answer wait
    assert not save.isEnabled() and dialog.wait_problem.isVisible()
    dialog.timeout_spin.setValue(30)
    assert save.isEnabled() and not dialog.wait_problem.isVisible()


def test_the_environment_variable_wins_and_the_dialog_says_so(qtbot: QtBot) -> None:
    """The boxes show what the variable puts in force, the note names both switches, and a
    save never stores what the variable decided as the user's own choice."""
    current = bc.SettingsCurrentPush(
        provider=bc.ProviderChoice.OFFLINE_DEMO,
        safe_resume=True,
        auto_resume=True,
        resume_from_environment=True,
        safe_resume_enabled=True,
    )
    dialog, bridge = _dialog(qtbot, current)
    dialog.tabs.setCurrentWidget(dialog.turns_page)
    assert not dialog.safe_resume_box.isEnabled() and not dialog.auto_resume_box.isEnabled()
    assert dialog.safe_resume_box.isChecked() and dialog.auto_resume_box.isChecked()
    assert dialog.environment_note.isVisible()
    note = dialog.environment_note.text()
    assert "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME" in note
    assert "Safe resume and automatic resume are on" in note, note
    _save(dialog)
    saved = bridge.calls_to("update_settings")[0]
    assert isinstance(saved[5], bc.ProviderTuning), saved  # no Safe resume choice was sent
    off = bc.SettingsCurrentPush(
        provider=bc.ProviderChoice.OFFLINE_DEMO,
        resume_from_environment=True,
        safe_resume_enabled=False,
    )
    dialog, _bridge = _dialog(qtbot, off)
    assert "Safe resume is off" in dialog.environment_note.text()


def test_a_provider_chosen_in_the_environment_is_named_not_hidden(qtbot: QtBot) -> None:
    plain, _bridge = _dialog(qtbot, bc.SettingsCurrentPush(provider=bc.ProviderChoice.OFFLINE_DEMO))
    assert not plain.provider_environment_note.isVisible()
    current = bc.SettingsCurrentPush(
        provider=bc.ProviderChoice.OFFLINE_DEMO,
        provider_from_environment=("MAKA_PROVIDER", "MAKA_MODEL"),
    )
    dialog, _bridge = _dialog(qtbot, current)
    assert dialog.provider_environment_note.isVisible()
    note = dialog.provider_environment_note.text()
    assert note.startswith("MAKA_PROVIDER, MAKA_MODEL are set") and "win over" in note
    one, _bridge = _dialog(
        qtbot,
        bc.SettingsCurrentPush(
            provider=bc.ProviderChoice.OFFLINE_DEMO, provider_from_environment=("MAKA_PROVIDER",)
        ),
    )
    assert one.provider_environment_note.text().startswith("MAKA_PROVIDER is set")


def _summary(i: int, **extra: object) -> bc.SessionSummary:
    return bc.SessionSummary.model_validate(
        {"session_id": f"s{i}", "cwd": f"/p/{i}", "title": f"T{i}", **extra}
    )


def test_session_model_holds_ten_thousand_rows_and_updates_one(qtbot: QtBot) -> None:
    model = SessionListModel()
    model.set_sessions([_summary(i) for i in range(10_000)])
    assert model.rowCount() == 10_000
    index = model.index(1234)
    assert index.data() == "T1234"
    assert (
        index.data(Qt.ItemDataRole.ToolTipRole) == "T1234\n/p/1234"
    )  # the full title, then the folder
    changed: list[int] = []
    model.dataChanged.connect(lambda top, _bottom: changed.append(top.row()))
    model.upsert(_summary(1234, title="Renamed", interrupted=True))
    assert changed == [1234]
    assert model.index(1234).data() == "Renamed"
    model.upsert(_summary(99_999))
    assert model.rowCount() == 10_001 and model.index(0).data(SUMMARY_ROLE).session_id == "s99999"
    assert model.row_of("s1234") == 1235


def test_badges() -> None:
    assert badge_for(_summary(1)) is None
    assert badge_for(_summary(1, interrupted=True)) == ("Interrupted", Severity.WARN)
    assert badge_for(_summary(1, last_run_status="running")) == ("Running", Severity.INFO)
    assert badge_for(_summary(1, last_run_status="failed")) == ("Failed", Severity.ERROR)


def test_panel_selection_emits_the_session_id(qtbot: QtBot) -> None:
    panel = SessionListPanel()
    qtbot.addWidget(panel)
    panel.model.set_sessions([_summary(i) for i in range(3)])
    with qtbot.waitSignal(panel.session_selected) as blocker:
        panel.select("s2")
    assert blocker.args == ["s2"]
    with qtbot.waitSignal(panel.new_session_requested):
        QTest.mouseClick(panel.new_button, Qt.MouseButton.LeftButton)


def test_a_fresh_session_reads_new_session_not_its_folder_twice(qtbot: QtBot) -> None:
    from renderer.session_list import display_title

    fresh = bc.SessionSummary(session_id="s1", cwd="/w/ws1", title="ws1")
    assert display_title(fresh) == "New session"
    used = fresh.model_copy(update={"last_run_status": bc.RunStatusValue.COMPLETED})
    assert display_title(used) == "ws1", "a session that ran keeps its folder title"
    named = bc.SessionSummary(session_id="s2", cwd="/w/ws1", title="release notes")
    assert display_title(named) == "release notes"
    model = SessionListModel()
    model.set_sessions([fresh])
    assert model.index(0).data(Qt.ItemDataRole.DisplayRole) == "New session"
