"""Settings: which model provider answers turns (for an OpenAI-compatible server also how long
to wait, the model's context size and whether to send ``tool_choice``), how many model steps a
turn may take, and whether Safe resume (and automatic resume at start) is on. ``maka`` commands
read the same settings; docs/providers.md describes them.

Why the key field starts empty: the API key is write-only on the bridge. The dialog shows only
whether one is stored; leaving the field empty keeps it, "Forget stored key" clears it.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.bridge_contract import (
    DEFAULT_MAX_STEPS,
    DEFAULT_OPENAI_DATA_TIMEOUT_S,
    DEFAULT_OPENAI_TIMEOUT_S,
    MAX_CONTEXT_TOKENS,
    MAX_STEPS_LIMIT,
    MAX_TIMEOUT_S,
    DatabaseChoice,
    DatabaseTestedPush,
    ProviderChoice,
    ProviderTuning,
    SettingsCurrentPush,
)
from app.code_text import describe
from renderer import theme
from renderer.bridge_port import BridgePort
from renderer.park_text import Severity
from runtime.ledger.database_url import DATABASE_URL_INVALID, database_url_problem


def _tr(text: str) -> str:
    return QCoreApplication.translate("SettingsDialog", text)


class SettingsDialog(QDialog):
    def __init__(
        self,
        bridge: BridgePort,
        current: SettingsCurrentPush | None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(_tr("Settings"))
        self._bridge = bridge
        self._from_environment = False
        # Two pages: the provider with its server's settings, and how turns run and recover.
        # One page would be taller than a laptop screen allows a dialog.
        outer = QVBoxLayout(self)
        outer.setContentsMargins(14, 14, 14, 12)
        self.tabs = QTabWidget()
        outer.addWidget(self.tabs)
        self.provider_page = QWidget()
        self.tabs.addTab(self.provider_page, _tr("Model provider"))
        layout = QVBoxLayout(self.provider_page)
        layout.setContentsMargins(12, 12, 12, 8)
        layout.setSpacing(10)
        font = self.font()
        font.setBold(True)
        self.offline_radio = QRadioButton(_tr("Offline demo"))
        offline_note = QLabel(
            _tr(
                "A built-in, rule-based helper that works without a network. It is not an AI "
                "model: it understands simple requests such as “write hello.txt saying hi”."
            )
        )
        offline_note.setWordWrap(True)
        offline_note.setContentsMargins(24, 0, 0, 6)
        self.openai_radio = QRadioButton(_tr("OpenAI-compatible endpoint"))
        group = QButtonGroup(self)
        group.addButton(self.offline_radio)
        group.addButton(self.openai_radio)
        layout.addWidget(self.offline_radio)
        layout.addWidget(offline_note)
        layout.addWidget(self.openai_radio)
        self.endpoint = QWidget()
        # The width is set on the content, not the dialog: a minimum set on the dialog would
        # stop its layout from enforcing the content's minimum height, and a screen too short
        # for the whole dialog would then squeeze the fields flat.
        self.endpoint.setMinimumWidth(476)
        form = QFormLayout(self.endpoint)
        form.setContentsMargins(24, 0, 0, 0)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        self.base_url_edit = QLineEdit()
        self.base_url_edit.setPlaceholderText("http://localhost:11434/v1")
        self.model_edit = QLineEdit()
        self.model_edit.setPlaceholderText("llama3.1")
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.forget_key = QCheckBox(_tr("Forget the stored key"))
        form.addRow(_tr("Base URL"), self.base_url_edit)
        form.addRow(_tr("Model"), self.model_edit)
        form.addRow(_tr("API key"), self.key_edit)
        form.addRow("", self.forget_key)
        digit = self.key_edit.fontMetrics().horizontalAdvance("0")
        self.timeout_spin = self._number(
            _tr("Default ({n} s)").replace("{n}", f"{DEFAULT_OPENAI_TIMEOUT_S:g}"),
            int(MAX_TIMEOUT_S),
            _tr(" s"),
            digit,
        )
        self.data_timeout_spin = self._number(
            _tr("Default ({n} s)").replace("{n}", f"{DEFAULT_OPENAI_DATA_TIMEOUT_S:g}"),
            int(MAX_TIMEOUT_S),
            _tr(" s"),
            digit,
        )
        self.context_spin = self._number(_tr("Not set"), MAX_CONTEXT_TOKENS, _tr(" tokens"), digit)
        self.tool_choice_box = QCheckBox(_tr("Send tool_choice “auto” with the tools"))
        form.addRow(_tr("Wait for an answer"), self.timeout_spin)
        form.addRow(_tr("Wait between data"), self.data_timeout_spin)
        form.addRow(_tr("Context size"), self.context_spin)
        form.addRow(_tr("Tool choice"), self.tool_choice_box)
        self.endpoint_note = QLabel(
            _tr(
                "Keep the default waits unless the server is slow to start answering. With a "
                "context size, a request counted above it is not sent. Turn tool choice off "
                "if the server answers with nothing or refuses requests.\nMore: "
                "docs/providers.md"
            )
        )
        self.endpoint_note.setWordWrap(True)
        self.wait_problem = QLabel(
            _tr("The wait between data must not be shorter than the wait for an answer.")
        )
        self.wait_problem.setWordWrap(True)
        self.wait_problem.setObjectName("WaitProblem")
        # Save is off until the endpoint names a server and a model: say which is missing (the
        # boxes' grey examples read as values already there).
        self.endpoint_missing = QLabel()
        self.endpoint_missing.setWordWrap(True)
        self.endpoint_missing.setObjectName("EndpointMissing")
        endpoint_box = QVBoxLayout()
        endpoint_box.setContentsMargins(0, 0, 0, 0)
        endpoint_box.addWidget(self.endpoint)
        notes = QVBoxLayout()
        notes.setContentsMargins(24, 0, 0, 0)
        notes.addWidget(self.wait_problem)
        notes.addWidget(self.endpoint_missing)
        notes.addWidget(self.endpoint_note)
        endpoint_box.addLayout(notes)
        layout.addLayout(endpoint_box)
        self.provider_environment_note = QLabel()
        self.provider_environment_note.setWordWrap(True)
        self.provider_environment_note.setObjectName("ProviderFromEnvironment")
        layout.addWidget(self.provider_environment_note)
        layout.addStretch(1)
        self.turns_page = QWidget()
        self.tabs.addTab(self.turns_page, _tr("Turns and recovery"))
        layout = QVBoxLayout(self.turns_page)
        layout.setContentsMargins(12, 12, 12, 8)
        layout.setSpacing(10)
        turns_heading = QLabel(_tr("Turns"))
        turns_heading.setFont(font)
        layout.addWidget(turns_heading)
        turns = QFormLayout()
        turns.setContentsMargins(0, 0, 0, 0)
        self.max_steps_spin = QSpinBox()
        self.max_steps_spin.setRange(1, MAX_STEPS_LIMIT)
        digit = self.max_steps_spin.fontMetrics().horizontalAdvance("0")
        self.max_steps_spin.setMaximumWidth(digit * 14)
        self.max_steps_spin.setAccessibleName(_tr("Step limit per turn"))
        turns.addRow(_tr("Step limit per turn"), self.max_steps_spin)
        layout.addLayout(turns)
        steps_note = QLabel(
            _tr(
                "A turn that reaches this many model steps stops and says so; send a message "
                "to let it continue."
            )
        )
        steps_note.setWordWrap(True)
        layout.addWidget(steps_note)
        resume_heading = QLabel(_tr("After a crash"))
        resume_heading.setFont(font)
        layout.addSpacing(6)
        layout.addWidget(resume_heading)
        self.safe_resume_box = QCheckBox(_tr("&Safe resume: offer to continue an interrupted turn"))
        self.auto_resume_box = QCheckBox(
            _tr("Resume interrupted sessions &automatically when Maka starts")
        )
        resume_note = QLabel(
            _tr(
                "Safe resume continues only from the last step known to be complete, as a new "
                "run, and only when the history, tools and folder are proven unchanged."
            )
        )
        resume_note.setWordWrap(True)
        self.environment_note = QLabel()
        self.environment_note.setWordWrap(True)
        self.environment_note.setObjectName("ResumeFromEnvironment")
        layout.addWidget(self.safe_resume_box)
        auto_row = QVBoxLayout()
        auto_row.setContentsMargins(24, 0, 0, 0)
        auto_row.addWidget(self.auto_resume_box)
        layout.addLayout(auto_row)
        layout.addWidget(resume_note)
        layout.addWidget(self.environment_note)
        layout.addStretch(1)
        self.safe_resume_box.toggled.connect(self._update_enabled)
        for note in (
            offline_note,
            self.endpoint_note,
            self.provider_environment_note,
            steps_note,
            resume_note,
            self.environment_note,
        ):
            palette = note.palette()
            palette.setColor(note.foregroundRole(), theme.muted_text(palette))
            note.setPalette(palette)
        self._build_database_page(font)
        for note in (self.database_note,):
            palette = note.palette()
            palette.setColor(note.foregroundRole(), theme.muted_text(palette))
            note.setPalette(palette)
        for label, severity in (
            (self.database_problem, Severity.ERROR),
            (self.driver_note, Severity.WARN),
            (self.database_environment_note, Severity.WARN),
        ):
            palette = label.palette()
            palette.setColor(label.foregroundRole(), theme.accent(severity, palette))
            label.setPalette(palette)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        outer.addWidget(self.buttons)
        self.openai_radio.toggled.connect(self._update_enabled)
        self.key_edit.textChanged.connect(self._update_enabled)
        self.base_url_edit.textChanged.connect(self._update_enabled)
        self.model_edit.textChanged.connect(self._update_enabled)
        self.timeout_spin.valueChanged.connect(self._update_enabled)
        self.data_timeout_spin.valueChanged.connect(self._update_enabled)
        self.load(current)

    def _build_database_page(self, font: QFont) -> None:
        """The third page: where the ledger is kept (applied at the next start)."""
        self.database_page = QWidget()
        self.tabs.addTab(self.database_page, _tr("Database"))
        layout = QVBoxLayout(self.database_page)
        layout.setContentsMargins(12, 12, 12, 8)
        layout.setSpacing(10)
        heading = QLabel(_tr("Where Maka keeps the history of your sessions"))
        heading.setFont(font)
        layout.addWidget(heading)
        self.database_environment_note = QLabel()
        self.database_environment_note.setWordWrap(True)
        self.database_environment_note.setObjectName("DatabaseFromEnvironment")
        layout.addWidget(self.database_environment_note)
        self.sqlite_radio = QRadioButton(_tr("This computer (SQLite in the data folder)"))
        self.postgres_radio = QRadioButton(_tr("PostgreSQL server"))
        group = QButtonGroup(self)
        group.addButton(self.sqlite_radio)
        group.addButton(self.postgres_radio)
        layout.addWidget(self.sqlite_radio)
        layout.addWidget(self.postgres_radio)
        self.server = QWidget()
        form = QFormLayout(self.server)
        form.setContentsMargins(24, 0, 0, 0)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        self.database_url_edit = QLineEdit()
        self.database_url_edit.setPlaceholderText("postgresql://user@host:5432/database")
        self.database_url_edit.setAccessibleName(_tr("PostgreSQL URL"))
        form.addRow(_tr("URL"), self.database_url_edit)
        self.test_button = QPushButton(_tr("Test connection"))
        self.test_button.setAutoDefault(False)
        self.test_result = QLabel()
        self.test_result.setWordWrap(True)
        self.test_result.setObjectName("DatabaseTestResult")
        self.test_result.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.test_result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        test_row = QHBoxLayout()
        test_row.setContentsMargins(0, 0, 0, 0)
        test_row.addWidget(self.test_button)
        test_row.addStretch(1)
        form.addRow("", test_row)
        layout.addWidget(self.server)
        self.database_problem = QLabel()
        self.database_problem.setWordWrap(True)
        self.database_problem.setObjectName("DatabaseProblem")
        self.database_problem.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.driver_note = QLabel(
            _tr(
                "The PostgreSQL driver is not installed, so a server cannot be chosen. Install "
                "it with: pip install 'maka[postgres]', then start Maka again."
            )
        )
        self.driver_note.setWordWrap(True)
        self.driver_note.setObjectName("PostgresDriverMissing")
        self.driver_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.database_note = QLabel(
            _tr(
                "A password in the URL is kept only in this data folder's settings file, "
                "readable by you alone, and is shown as ****. Leave it out to have it read from "
                "PGPASSWORD or your ~/.pgpass file. maka commands using this data folder use the "
                "same database.\nMore: docs/postgres.md"
            )
        )
        self.database_note.setWordWrap(True)
        notes = QVBoxLayout()
        notes.setContentsMargins(24, 0, 0, 0)
        notes.setSpacing(8)
        notes.addWidget(self.test_result)
        notes.addWidget(self.database_problem)
        notes.addWidget(self.driver_note)
        notes.addWidget(self.database_note)
        layout.addLayout(notes)
        self.restart_note = QLabel()
        self.restart_note.setWordWrap(True)
        self.restart_note.setObjectName("DatabaseRestart")
        layout.addSpacing(4)
        layout.addWidget(self.restart_note)
        layout.addStretch(1)
        self.postgres_radio.toggled.connect(self._database_edited)
        self.database_url_edit.textChanged.connect(self._database_edited)
        self.database_url_edit.textChanged.connect(self._forget_test)
        self.test_button.clicked.connect(self.test_connection)
        self._bridge.database_tested.connect(self._on_database_tested)
        self._testing = False

    def _number(self, unset: str, maximum: int, suffix: str, digit: int) -> QSpinBox:
        """A whole number where 0 means "not set" (the spin box shows ``unset`` there)."""
        spin = QSpinBox()
        spin.setRange(0, maximum)
        spin.setSpecialValueText(unset)
        spin.setSuffix(suffix)
        spin.setMinimumWidth(digit * 18)
        spin.setMaximumWidth(digit * 22)
        return spin

    def tuning(self) -> ProviderTuning | None:
        """The provider tuning the fields show, or None while they contradict each other."""
        timeout = self.timeout_spin.value()
        data = self.data_timeout_spin.value()
        context = self.context_spin.value()
        if data and data < (timeout or DEFAULT_OPENAI_TIMEOUT_S):
            return None
        return ProviderTuning(
            timeout_s=float(timeout) if timeout else None,
            data_timeout_s=float(data) if data else None,
            context_tokens=context or None,
            tool_choice=self.tool_choice_box.isChecked(),
        )

    def load(self, current: SettingsCurrentPush | None) -> None:
        provider = current.provider if current else ProviderChoice.OFFLINE_DEMO
        self.offline_radio.setChecked(provider is ProviderChoice.OFFLINE_DEMO)
        self.openai_radio.setChecked(provider is ProviderChoice.OPENAI_COMPATIBLE)
        self.base_url_edit.setText(current.openai_base_url if current else "")
        self.model_edit.setText(current.openai_model if current else "")
        key_set = bool(current and current.api_key_set)
        self.key_edit.setPlaceholderText(
            _tr("A key is stored; leave empty to keep it") if key_set else _tr("Optional")
        )
        self.forget_key.setVisible(key_set)
        names = current.provider_from_environment if current else ()
        if len(names) == 1:
            text = _tr(
                "{name} is set in the environment Maka was started from, so it wins over "
                "what is chosen here; these choices apply once it is not set."
            ).replace("{name}", names[0])
        else:
            text = _tr(
                "{names} are set in the environment Maka was started from, so they win over "
                "what is chosen here; these choices apply once they are not set."
            ).replace("{names}", ", ".join(names))
        self.provider_environment_note.setText(text)
        self.provider_environment_note.setVisible(bool(names))
        tuning = current.provider_tuning if current else ProviderTuning()
        self.timeout_spin.setValue(round(tuning.timeout_s or 0))
        self.data_timeout_spin.setValue(round(tuning.data_timeout_s or 0))
        self.context_spin.setValue(tuning.context_tokens or 0)
        self.tool_choice_box.setChecked(tuning.tool_choice)
        self.max_steps_spin.setValue(current.max_steps if current else DEFAULT_MAX_STEPS)
        self._from_environment = bool(current and current.resume_from_environment)
        self.safe_resume_box.setChecked(bool(current and current.safe_resume))
        self.auto_resume_box.setChecked(current.auto_resume if current else True)
        self.environment_note.setText(
            _tr(
                "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME is set in the environment Maka was started "
                "from, so it decides, and the boxes show what is in force: {state}. Your saved "
                "choices apply again once it is not set."
            ).replace(
                "{state}",
                _tr("Safe resume and automatic resume are on")
                if current and current.safe_resume_enabled
                else _tr("Safe resume is off"),
            )
        )
        self.environment_note.setVisible(self._from_environment)
        self._load_database(current)
        self._update_enabled()

    def _load_database(self, current: SettingsCurrentPush | None) -> None:
        self._database = current.database if current else "sqlite"
        self._database_url = current.database_url if current else ""
        self._database_in_use = current.database_in_use if current else ""
        self._database_env = current.database_from_environment if current else ""
        self._postgres_driver = bool(current and current.postgres_driver)
        self.sqlite_radio.setChecked(self._database == "sqlite")
        self.postgres_radio.setChecked(self._database == "postgresql")
        self.database_url_edit.setText(self._database_url)
        self.database_url_edit.setCursorPosition(0)  # a long URL shows its start: who and where
        self.database_problem.clear()
        self.database_problem.setVisible(False)
        self._show_test("", None)
        self.driver_note.setVisible(not self._postgres_driver)
        self.database_environment_note.setText(
            _tr(
                "MAKA_DATABASE_URL is set in the environment Maka was started from ({url}), so "
                "it decides which database is used; this setting applies once it is not set."
            ).replace("{url}", self._database_env)
        )
        self.database_environment_note.setVisible(bool(self._database_env))
        self._database_edited()

    def test_connection(self) -> None:
        """Ask the main process to try the server (on a worker thread there: the window stays
        responsive); the URL's shape is checked here first."""
        text = self.database_url_edit.text().strip()
        problem = database_url_problem(text)
        if problem is not None:
            self._show_test(
                f"[{DATABASE_URL_INVALID}] "
                + _tr("The URL {problem}.").replace("{problem}", problem),
                Severity.ERROR,
            )
            return
        self._testing = True
        self.test_button.setEnabled(False)
        self._show_test(_tr("Connecting…"), None)
        self._bridge.test_database(None if text == self._database_url else text)

    def _on_database_tested(self, message: DatabaseTestedPush) -> None:
        if not self._testing:
            return
        self._testing = False
        self.test_button.setEnabled(self.server.isEnabled())
        if not message.ok:
            self._show_test(
                f"[{message.code}] {message.message or describe(message.code or '').sentence}",
                Severity.ERROR,
            )
        elif not message.schema_version:
            self._show_test(
                _tr(
                    "Connected: PostgreSQL {version}. No Maka ledger there yet: Maka creates it "
                    "when it starts with this setting."
                ).replace("{version}", message.server_version),
                Severity.INFO,
            )
        else:
            upgrade = message.schema_version < message.program_schema_version
            self._show_test(
                (
                    _tr(
                        "Connected: PostgreSQL {version}. The ledger there has schema {schema}; "
                        "Maka upgrades it to {program} when it starts with this setting."
                    )
                    if upgrade
                    else _tr(
                        "Connected: PostgreSQL {version}. The ledger there is ready (schema "
                        "{schema})."
                    )
                )
                .replace("{version}", message.server_version)
                .replace("{schema}", str(message.schema_version))
                .replace("{program}", str(message.program_schema_version)),
                Severity.INFO,
            )

    def _show_test(self, text: str, severity: Severity | None) -> None:
        palette = self.test_result.palette()
        color = (
            theme.muted_text(palette)
            if severity is None
            else theme.success(palette)
            if severity is Severity.INFO
            else theme.accent(severity, palette)
        )
        palette.setColor(self.test_result.foregroundRole(), color)
        self.test_result.setPalette(palette)
        self.test_result.setText(text)
        self.test_result.setVisible(bool(text))

    def _forget_test(self) -> None:
        """An edited URL is not the one tested: its result no longer applies."""
        self._testing = False
        self.test_button.setEnabled(True)
        self._show_test("", None)

    def chosen_database(self) -> DatabaseChoice:
        return "postgresql" if self.postgres_radio.isChecked() else "sqlite"

    def _database_edited(self) -> None:
        """Enable the URL with the server choice and say when the choice takes effect."""
        overridden = bool(self._database_env)
        postgres = self.postgres_radio.isChecked()
        self.sqlite_radio.setEnabled(not overridden)
        self.postgres_radio.setEnabled(not overridden and (self._postgres_driver or postgres))
        self.server.setEnabled(postgres and not overridden)
        if not self.server.isEnabled():
            self._testing = False
            self._show_test("", None)
        self.database_url_edit.setReadOnly(overridden)
        self.database_problem.setVisible(False)
        in_use = self._database_in_use or _tr("this computer's database")
        if overridden:
            text = ""
        elif self._database_changed() or self._database_url_changed():
            text = _tr(
                "Maka opens its database once, when it starts: this change applies the next "
                "time you start Maka. Until then it keeps using {in_use}."
            ).replace("{in_use}", in_use)
        else:
            text = _tr(
                "In use now: {in_use}. Maka opens its database once, when it starts, so a "
                "change here applies after a restart."
            ).replace("{in_use}", in_use)
        self.restart_note.setText(text)
        self.restart_note.setVisible(bool(text))

    def _database_changed(self) -> bool:
        return self.chosen_database() != self._database

    def _database_url_changed(self) -> bool:
        return self.database_url_edit.text().strip() != self._database_url

    def database_problem_text(self) -> str | None:
        """Why the Database page cannot be saved (with its code), or None."""
        if self._database_env or self.chosen_database() != "postgresql":
            return None
        if not (self._database_changed() or self._database_url_changed()):
            return None
        if not self._postgres_driver:
            return _tr("[postgres_driver_missing] The PostgreSQL driver is not installed.")
        problem = database_url_problem(self.database_url_edit.text())
        if problem is None:
            return None
        return f"[{DATABASE_URL_INVALID}] " + _tr(
            "The URL {problem}; for example postgresql://maka@db.example.org:5432/maka. "
            "Nothing was saved."
        ).replace("{problem}", _tr(problem))

    def save(self) -> None:
        problem = self.database_problem_text()
        if problem is not None:
            # Nothing is sent: the dialog stays open on the Database page with the reason.
            self.tabs.setCurrentWidget(self.database_page)
            self.database_problem.setText(problem)
            self.database_problem.setVisible(True)
            self.database_url_edit.setFocus()
            return
        database: DatabaseChoice | None = None
        database_url: str | None = None
        if not self._database_env:
            if self._database_changed():
                database = self.chosen_database()
            if self._database_url_changed():
                database_url = self.database_url_edit.text().strip()
        provider = (
            ProviderChoice.OPENAI_COMPATIBLE
            if self.openai_radio.isChecked()
            else ProviderChoice.OFFLINE_DEMO
        )
        key: str | None = self.key_edit.text() or None
        if self.forget_key.isChecked() and key is None:
            key = ""
        self._bridge.update_settings(
            provider,
            self.base_url_edit.text().strip(),
            self.model_edit.text().strip(),
            key,
            self.max_steps_spin.value(),
            # What the environment decides is shown, never saved as the user's own choice.
            safe_resume=None if self._from_environment else self.safe_resume_box.isChecked(),
            auto_resume=None if self._from_environment else self.auto_resume_box.isChecked(),
            provider_tuning=self.tuning(),
            database=database,
            database_url=database_url,
        )
        self.accept()

    def _update_enabled(self) -> None:
        openai = self.openai_radio.isChecked()
        self.endpoint.setEnabled(openai)
        self.endpoint_note.setEnabled(openai)
        waits_agree = self.tuning() is not None
        self.wait_problem.setVisible(not waits_agree)
        missing = [
            name
            for name, box in (
                (_tr("a base URL"), self.base_url_edit),
                (_tr("a model"), self.model_edit),
            )
            if not box.text().strip()
        ]
        self.endpoint_missing.setText(
            _tr("Enter {what} to save: the grey text in a box is only an example.").replace(
                "{what}", _tr(" and ").join(missing)
            )
        )
        self.endpoint_missing.setVisible(openai and bool(missing))
        ready = not openai or (not missing and waits_agree)
        save = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        save.setEnabled(ready)
        self.safe_resume_box.setEnabled(not self._from_environment)
        self.auto_resume_box.setEnabled(
            not self._from_environment and self.safe_resume_box.isChecked()
        )
