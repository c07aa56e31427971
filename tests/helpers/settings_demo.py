"""The Settings dialog, for people to look at: an OpenAI-compatible endpoint with its waits,
context size and tool choice (and the two waits disagreeing), provider variables set in the
environment, the page of turns and recovery (with the Safe resume variable set), and the
Database page (``settings-database*.png``: the default, a PostgreSQL server with its password
masked and Test connection's answer (and a failure), a URL refused before saving,
``MAKA_DATABASE_URL`` winning, the driver not installed).

    xvfb-run -a -s "-screen 0 1400x900x24" .venv/bin/python -m tests.helpers.settings_demo \
        docs/screenshots [database]

With ``database`` only the Database page's pictures are taken.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication

from app import bridge_contract as bc
from renderer.settings_dialog import SettingsDialog
from tests.helpers.fake_bridge import FakeBridge


def _grab(dialog: SettingsDialog, path: Path) -> None:
    dialog.show()
    for _ in range(20):
        QApplication.processEvents()
    dialog.grab().save(str(path))


def database_scenes(out: Path) -> None:
    """The Database page: what a user sees for each state of the setting."""
    default = bc.SettingsCurrentPush(provider=bc.ProviderChoice.OFFLINE_DEMO, postgres_driver=True)
    dialog = SettingsDialog(FakeBridge(), default)
    dialog.tabs.setCurrentWidget(dialog.database_page)
    _grab(dialog, out / "settings-database.png")
    dialog.close()
    server = default.model_copy(
        update={
            "database": "postgresql",
            "database_url": "postgresql://maka:****@db.example.org:5432/maka",
            "database_in_use": "postgresql://maka:****@db.example.org:5432/maka",
        }
    )
    bridge = FakeBridge()
    dialog = SettingsDialog(bridge, server)
    dialog.tabs.setCurrentWidget(dialog.database_page)
    dialog.test_connection()
    bridge.database_tested.emit(
        bc.DatabaseTestedPush(
            ok=True,
            database_url=server.database_url,
            server_version="16.4",
            schema_version=2,
            program_schema_version=2,
        )
    )
    _grab(dialog, out / "settings-database-postgresql.png")
    dialog.close()
    bridge = FakeBridge()
    dialog = SettingsDialog(bridge, server)
    dialog.tabs.setCurrentWidget(dialog.database_page)
    dialog.test_connection()
    bridge.database_tested.emit(
        bc.DatabaseTestedPush(
            ok=False,
            code="store_io_failed",
            message='PostgreSQL: connection failed: connection to server at "db.example.org" '
            "(192.0.2.10), port 5432 failed: Connection refused",
        )
    )
    _grab(dialog, out / "settings-database-test-failed.png")
    dialog.close()
    dialog = SettingsDialog(FakeBridge(), default)
    dialog.tabs.setCurrentWidget(dialog.database_page)
    dialog.postgres_radio.setChecked(True)
    dialog.database_url_edit.setText("mysql://maka@db.example.org/maka")
    dialog.save()
    _grab(dialog, out / "settings-database-invalid.png")
    dialog.close()
    overridden = default.model_copy(
        update={"database_from_environment": "postgresql://ci:****@127.0.0.1:5433/maka"}
    )
    dialog = SettingsDialog(FakeBridge(), overridden)
    dialog.tabs.setCurrentWidget(dialog.database_page)
    _grab(dialog, out / "settings-database-from-environment.png")
    dialog.close()
    dialog = SettingsDialog(FakeBridge(), default.model_copy(update={"postgres_driver": False}))
    dialog.tabs.setCurrentWidget(dialog.database_page)
    _grab(dialog, out / "settings-database-no-driver.png")
    dialog.close()


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "docs/screenshots")
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication([])
    if argv[1:] == ["database"]:
        database_scenes(out)
        return 0
    current = bc.SettingsCurrentPush(
        provider=bc.ProviderChoice.OPENAI_COMPATIBLE,
        openai_base_url="http://127.0.0.1:8080/v1",
        openai_model="qwen2.5-coder-7b-instruct",
        provider_tuning=bc.ProviderTuning(context_tokens=8192, tool_choice=False),
    )
    dialog = SettingsDialog(FakeBridge(), current)
    _grab(dialog, out / "settings-provider-tuning.png")
    dialog.data_timeout_spin.setValue(60)
    _grab(dialog, out / "settings-provider-waits-disagree.png")
    dialog.close()
    from_environment = current.model_copy(
        update={"provider_from_environment": ("MAKA_PROVIDER", "MAKA_OPENAI_TOOL_CHOICE")}
    )
    dialog = SettingsDialog(FakeBridge(), from_environment)
    _grab(dialog, out / "settings-provider-from-environment.png")
    dialog.close()
    turns = bc.SettingsCurrentPush(
        provider=bc.ProviderChoice.OFFLINE_DEMO, max_steps=350, safe_resume=True
    )
    dialog = SettingsDialog(FakeBridge(), turns)
    dialog.tabs.setCurrentWidget(dialog.turns_page)
    _grab(dialog, out / "settings-step-limit.png")
    dialog.close()
    resume_env = turns.model_copy(
        update={"resume_from_environment": True, "safe_resume_enabled": True}
    )
    dialog = SettingsDialog(FakeBridge(), resume_env)
    dialog.tabs.setCurrentWidget(dialog.turns_page)
    _grab(dialog, out / "settings-resume-from-environment.png")
    dialog.close()
    database_scenes(out)
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
