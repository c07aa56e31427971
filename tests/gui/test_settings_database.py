"""Settings › Database (real widgets): SQLite by default, a PostgreSQL server with its password
masked, a malformed URL refused in the dialog with its code and nothing sent, the masked URL
saved again sent as "unchanged", the restart the change needs said, ``MAKA_DATABASE_URL``
winning (the page read-only, with a note) and the driver missing said with how to install it.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QDialogButtonBox, QRadioButton
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.settings_dialog import SettingsDialog
from tests.helpers.fake_bridge import FakeBridge

pytestmark = pytest.mark.gui

MASKED = "postgresql://maka:****@db.example.org:5432/maka"
DEFAULT = bc.SettingsCurrentPush(provider=bc.ProviderChoice.OFFLINE_DEMO, postgres_driver=True)
SERVER = DEFAULT.model_copy(
    update={"database": "postgresql", "database_url": MASKED, "database_in_use": MASKED}
)


def _dialog(qtbot: QtBot, current: bc.SettingsCurrentPush) -> tuple[SettingsDialog, FakeBridge]:
    bridge = FakeBridge()
    dialog = SettingsDialog(bridge, current)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.tabs.setCurrentWidget(dialog.database_page)
    return dialog, bridge


def _save(dialog: SettingsDialog) -> None:
    button = dialog.buttons.button(QDialogButtonBox.StandardButton.Save)
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)


def _click(radio: QRadioButton) -> None:
    """On the button's circle (a click far right of its words misses it, as for a person)."""
    QTest.mouseClick(radio, Qt.MouseButton.LeftButton, pos=QPoint(8, radio.height() // 2))


def _database_items(bridge: FakeBridge) -> list[object]:
    return [call[-1] for call in bridge.calls_to("update_settings")]


def test_this_computer_is_the_default_and_saving_sends_no_database_change(qtbot: QtBot) -> None:
    dialog, bridge = _dialog(qtbot, DEFAULT)
    assert dialog.sqlite_radio.isChecked() and not dialog.postgres_radio.isChecked()
    assert not dialog.server.isEnabled()
    assert "In use now: this computer's database" in dialog.restart_note.text()
    assert dialog.driver_note.isHidden() and dialog.database_environment_note.isHidden()
    _save(dialog)
    (call,) = bridge.calls_to("update_settings")
    assert not any(isinstance(item, tuple) and item[0] == "database" for item in call)
    assert not dialog.isVisible()


def test_choosing_a_server_sends_it_and_says_it_applies_at_the_next_start(qtbot: QtBot) -> None:
    dialog, bridge = _dialog(qtbot, DEFAULT)
    _click(dialog.postgres_radio)
    assert dialog.server.isEnabled()
    QTest.keyClicks(dialog.database_url_edit, "postgresql://maka:pw@127.0.0.1:5433/maka")
    assert "applies the next time you start Maka" in dialog.restart_note.text()
    assert "this computer's database" in dialog.restart_note.text()
    _save(dialog)
    assert _database_items(bridge) == [
        ("database", "postgresql", "postgresql://maka:pw@127.0.0.1:5433/maka")
    ]


@pytest.mark.parametrize(
    ("typed", "reason"),
    [
        ("mysql://maka@db/maka", "must start with postgresql:// or postgres://"),
        ("postgresql:///maka", "names no server (host)"),
        ("postgresql://maka@db:port/maka", "has a port that is not a number"),
        ("", "is empty"),
    ],
)
def test_a_malformed_url_is_shown_with_its_code_and_nothing_is_sent(
    qtbot: QtBot, typed: str, reason: str
) -> None:
    dialog, bridge = _dialog(qtbot, DEFAULT)
    dialog.tabs.setCurrentWidget(dialog.provider_page)
    dialog.postgres_radio.setChecked(True)
    dialog.database_url_edit.setText(typed)
    _save(dialog)
    assert bridge.calls_to("update_settings") == []
    assert dialog.isVisible(), "the dialog stays open"
    assert dialog.tabs.currentWidget() is dialog.database_page, "on the page with the problem"
    assert dialog.database_problem.isVisible()
    assert dialog.database_problem.text().startswith("[database_url_invalid] The URL ")
    assert reason in dialog.database_problem.text()
    assert "Nothing was saved" in dialog.database_problem.text()
    dialog.database_url_edit.setText("postgresql://maka@db/maka")
    assert not dialog.database_problem.isVisible(), "editing the URL clears the old problem"
    _save(dialog)
    assert _database_items(bridge) == [("database", "postgresql", "postgresql://maka@db/maka")]


def test_the_password_is_masked_and_the_masked_url_is_kept_as_is(qtbot: QtBot) -> None:
    dialog, bridge = _dialog(qtbot, SERVER)
    assert dialog.postgres_radio.isChecked()
    assert dialog.database_url_edit.text() == MASKED
    assert "In use now: " + MASKED in dialog.restart_note.text()
    _save(dialog)
    (call,) = bridge.calls_to("update_settings")
    assert not any(isinstance(item, tuple) and item[0] == "database" for item in call), (
        "an unchanged, masked URL is not sent: the stored password stays"
    )


def test_going_back_to_this_computer_sends_only_the_choice(qtbot: QtBot) -> None:
    dialog, bridge = _dialog(qtbot, SERVER)
    _click(dialog.sqlite_radio)
    assert not dialog.server.isEnabled()
    assert "Until then it keeps using " + MASKED in dialog.restart_note.text()
    _save(dialog)
    assert _database_items(bridge) == [("database", "sqlite", None)]


def test_the_environment_variable_wins_and_the_page_is_read_only(qtbot: QtBot) -> None:
    env = "postgresql://ci:****@127.0.0.1:5433/maka"
    dialog, bridge = _dialog(
        qtbot, SERVER.model_copy(update={"database_from_environment": env, "database_in_use": env})
    )
    note = dialog.database_environment_note
    assert note.isVisible()
    assert "MAKA_DATABASE_URL is set" in note.text() and env in note.text()
    assert dialog.database_url_edit.isReadOnly()
    assert not dialog.sqlite_radio.isEnabled() and not dialog.postgres_radio.isEnabled()
    _save(dialog)
    (call,) = bridge.calls_to("update_settings")
    assert not any(isinstance(item, tuple) and item[0] == "database" for item in call)


def test_without_the_driver_the_server_cannot_be_chosen_and_the_page_says_how_to_install(
    qtbot: QtBot,
) -> None:
    dialog, _bridge = _dialog(qtbot, DEFAULT.model_copy(update={"postgres_driver": False}))
    assert not dialog.postgres_radio.isEnabled()
    assert dialog.driver_note.isVisible()
    assert "pip install 'maka[postgres]'" in dialog.driver_note.text()


def test_a_saved_server_without_the_driver_is_refused_with_its_code(qtbot: QtBot) -> None:
    dialog, bridge = _dialog(qtbot, DEFAULT.model_copy(update={"postgres_driver": False}))
    dialog.postgres_radio.setChecked(True)
    dialog.database_url_edit.setText("postgresql://maka@db/maka")
    _save(dialog)
    assert bridge.calls_to("update_settings") == []
    assert dialog.database_problem.text().startswith("[postgres_driver_missing]")


def test_test_connection_asks_the_main_process_and_shows_what_it_found(qtbot: QtBot) -> None:
    dialog, bridge = _dialog(qtbot, SERVER)
    QTest.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("test_database") == [(None,)], "the stored URL, password and all"
    assert not dialog.test_button.isEnabled() and dialog.test_result.text() == "Connecting…"
    bridge.database_tested.emit(
        bc.DatabaseTestedPush(
            ok=True,
            database_url=MASKED,
            server_version="16.4",
            schema_version=2,
            program_schema_version=2,
        )
    )
    assert dialog.test_button.isEnabled()
    assert dialog.test_result.text() == (
        "Connected: PostgreSQL 16.4. The ledger there is ready (schema 2)."
    )
    dialog.database_url_edit.setText("postgresql://maka@127.0.0.1:1/maka")
    assert dialog.test_result.isHidden(), "an edited URL is not the one tested"
    QTest.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("test_database")[-1] == ("postgresql://maka@127.0.0.1:1/maka",)
    bridge.database_tested.emit(
        bc.DatabaseTestedPush(
            ok=False, code="store_io_failed", message="PostgreSQL: connection refused"
        )
    )
    assert dialog.test_result.text() == "[store_io_failed] PostgreSQL: connection refused"


def test_test_connection_checks_the_url_first_and_sends_nothing_for_a_bad_one(
    qtbot: QtBot,
) -> None:
    dialog, bridge = _dialog(qtbot, DEFAULT)
    _click(dialog.postgres_radio)
    dialog.database_url_edit.setText("http://db/maka")
    QTest.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    assert bridge.calls_to("test_database") == []
    assert dialog.test_result.text() == (
        "[database_url_invalid] The URL must start with postgresql:// or postgres://."
    )


def test_a_new_database_says_the_ledger_is_created_at_the_next_start(qtbot: QtBot) -> None:
    dialog, bridge = _dialog(qtbot, SERVER)
    dialog.test_connection()
    bridge.database_tested.emit(
        bc.DatabaseTestedPush(ok=True, server_version="15.8", schema_version=0)
    )
    assert "No Maka ledger there yet" in dialog.test_result.text()
