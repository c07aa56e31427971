"""Settings: which model provider answers turns (for an OpenAI-compatible server also how long
to wait, the model's context size and whether to send ``tool_choice``), how many model steps a
turn may take, and whether Safe resume (and automatic resume at start) is on. ``maka`` commands
read the same settings; docs/providers.md describes them.

Why the key field starts empty: the API key is write-only on the bridge. The dialog shows only
whether one is stored; leaving the field empty keeps it, "Forget stored key" clears it.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
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
    ProviderChoice,
    ProviderTuning,
    SettingsCurrentPush,
)
from renderer import theme
from renderer.bridge_port import BridgePort


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
        endpoint_box = QVBoxLayout()
        endpoint_box.setContentsMargins(0, 0, 0, 0)
        endpoint_box.addWidget(self.endpoint)
        notes = QVBoxLayout()
        notes.setContentsMargins(24, 0, 0, 0)
        notes.addWidget(self.wait_problem)
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
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        layout.addStretch(1)
        outer.addWidget(self.buttons)
        self.openai_radio.toggled.connect(self._update_enabled)
        self.key_edit.textChanged.connect(self._update_enabled)
        self.base_url_edit.textChanged.connect(self._update_enabled)
        self.model_edit.textChanged.connect(self._update_enabled)
        self.timeout_spin.valueChanged.connect(self._update_enabled)
        self.data_timeout_spin.valueChanged.connect(self._update_enabled)
        self.load(current)

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
                "from, so it decides (Safe resume is {state}); these boxes apply once it is "
                "not set."
            ).replace(
                "{state}",
                _tr("on") if current and current.safe_resume_enabled else _tr("off"),
            )
        )
        self.environment_note.setVisible(self._from_environment)
        self._update_enabled()

    def save(self) -> None:
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
            safe_resume=self.safe_resume_box.isChecked(),
            auto_resume=self.auto_resume_box.isChecked(),
            provider_tuning=self.tuning(),
        )
        self.accept()

    def _update_enabled(self) -> None:
        openai = self.openai_radio.isChecked()
        self.endpoint.setEnabled(openai)
        self.endpoint_note.setEnabled(openai)
        waits_agree = self.tuning() is not None
        self.wait_problem.setVisible(not waits_agree)
        ready = not openai or bool(
            self.base_url_edit.text().strip() and self.model_edit.text().strip() and waits_agree
        )
        save = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        save.setEnabled(ready)
        self.safe_resume_box.setEnabled(not self._from_environment)
        self.auto_resume_box.setEnabled(
            not self._from_environment and self.safe_resume_box.isChecked()
        )
