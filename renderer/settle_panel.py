"""The question a tool card asks when a call's outcome is unknown: did it run?

Maka stopped between the moment a call was dispatched and the moment its result was recorded, so
it cannot know whether the call took effect, and it never guesses. The person at the keyboard
often can check. This panel shows the command in full (they must know exactly what to check),
takes an optional note, and offers "It ran" / "It did not run". Not being sure is answered by
not choosing: nothing is recorded. The answer goes to the main process, which decides whether it
may be recorded and says so (``tool.settled``); the widget never records anything itself.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QDateTime, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.bridge_contract import MAX_NOTE_CHARS, AttestationChoice, SettleFolderNote
from renderer import theme

COMMAND_VIEW_LINES = 6
"""Height of the command view in lines; a longer command scrolls (it is never cut)."""


def _tr(text: str) -> str:
    return QCoreApplication.translate("SettlePanel", text)


def question_text() -> str:
    """The question for a call whose outcome is unknown."""
    return _tr(
        "Did it run? If you can check (the files, the database, the command's own log), "
        "tell Maka what happened. Your answer is recorded as your confirmation, and "
        "the model is told it when the session continues."
    )


def folder_note_text(note: SettleFolderNote) -> str:
    """What answering also does to the folder (docs/design/workspace.md section 3), said before
    the user answers: the folder as it is now becomes the new starting point."""
    if note.unreadable and note.not_its_workspace:
        # (readable: its marker is what is missing, or another workspace's)
        return _tr(
            "Your answer would not take the folder as the new starting point: it is not shown "
            "to be the session's (its workspace marker is missing, as after git clean -fdx, or "
            "names another workspace). Your answer is recorded all the same; if this is the "
            "session's folder, Session › Locate folder… with this same folder gives the marker "
            "back."
        )
    if note.unreadable:
        return _tr(
            "Your answer would also take the folder as it is now as the new starting point, "
            "but the folder cannot be read now: your answer is recorded all the same, and Safe "
            "resume asks about the files again."
        )
    lead = _tr("Your answer also takes the folder as it is now as the new starting point.")
    if not note.compared:
        return lead + " " + _tr("There is no snapshot to compare it with.")
    paths = list(note.changed_paths)
    if not paths:
        return lead + " " + _tr("No file changed since the last snapshot.")
    shown = ", ".join(paths)
    if note.more_changed:
        shown += " " + _tr("and {count} more").replace("{count}", str(note.more_changed))
    count = len(paths) + note.more_changed
    said = (
        _tr("1 file changed since the last snapshot: {paths}.")
        if count == 1
        else _tr("{count} files changed since the last snapshot: {paths}.").replace(
            "{count}", str(count)
        )
    )
    return lead + " " + said.replace("{paths}", shown)


def attested_time(attested_at: int) -> str:
    """When the user confirmed it, in the user's local time."""
    return QDateTime.fromMSecsSinceEpoch(attested_at).toString("yyyy-MM-dd HH:mm")


def confirmation_text(choice: AttestationChoice, attested_at: int | None, note: str | None) -> str:
    """What a settled card says: "Confirmed by you: it ran · 2026-12-01 16:20", then the note."""
    what = _tr("it ran") if choice is AttestationChoice.RAN else _tr("it did not run")
    text = _tr("Confirmed by you: {what}").replace("{what}", what)
    if attested_at is not None:
        text += f" · {attested_time(attested_at)}"
    text += "\n" + _tr(
        "No output of this call was recorded; the model gets your answer in its place."
    )
    if note:
        text += "\n" + _tr("Your note: {note}").replace("{note}", note)
    return text


class SettlePanel(QWidget):
    """Emits ``chosen(ran, note)``; ``set_waiting`` while the main process records it."""

    chosen = Signal(bool, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName(_tr("Did this call run?"))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.setSpacing(6)
        self.question_label = QLabel(question_text())
        self.question_label.setTextFormat(Qt.TextFormat.PlainText)
        self.question_label.setWordWrap(True)
        self.folder_label = QLabel()
        self.folder_label.setTextFormat(Qt.TextFormat.PlainText)
        self.folder_label.setWordWrap(True)
        self.folder_label.setVisible(False)
        self.command_view = QPlainTextEdit()
        self.command_view.setReadOnly(True)
        self.command_view.setFont(theme.monospace_font())
        self.command_view.setAccessibleName(_tr("The command, in full"))
        self.command_view.setTabChangesFocus(True)
        self.command_view.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.note_edit = QLineEdit()
        self.note_edit.setMaxLength(MAX_NOTE_CHARS)
        self.note_edit.setPlaceholderText(_tr("Optional note: what you checked"))
        self.note_edit.setAccessibleName(_tr("Note"))
        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        self.ran_button = QPushButton(_tr("It ran"))
        self.not_run_button = QPushButton(_tr("It did not run"))
        self.ran_button.clicked.connect(lambda: self._choose(True))
        self.not_run_button.clicked.connect(lambda: self._choose(False))
        self.hint_label = QLabel(_tr("Not sure? Choose nothing: nothing is recorded."))
        buttons.addWidget(self.ran_button)
        buttons.addWidget(self.not_run_button)
        buttons.addWidget(self.hint_label, 1)
        self.status_label = QLabel()
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        self.status_label.setWordWrap(True)
        self.status_label.setVisible(False)
        layout.addWidget(self.question_label)
        layout.addWidget(self.command_view)
        layout.addWidget(self.folder_label)
        layout.addWidget(self.note_edit)
        layout.addLayout(buttons)
        layout.addWidget(self.status_label)
        self.refresh_colours()

    def set_not_run_only(self, only: bool) -> None:
        """A file write recovery found not done: the one answer is confirming that finding."""
        self.ran_button.setVisible(not only)
        if only:
            self.question_label.setText(
                _tr(
                    "Recovery found this file as it was before the write: the write did not "
                    "happen. If that is right, confirm it: your answer is recorded beside what "
                    "recovery found, and the model is told the write did not happen when the "
                    "session continues."
                )
            )
            self.not_run_button.setText(_tr("Confirm: it did not run"))
        else:
            self.question_label.setText(question_text())
            self.not_run_button.setText(_tr("It did not run"))

    def set_folder_note(self, note: SettleFolderNote | None) -> None:
        self.folder_label.setText(folder_note_text(note) if note is not None else "")
        self.folder_label.setVisible(note is not None)

    def set_command(self, command: str) -> None:
        if self.command_view.toPlainText() != command:
            self.command_view.setPlainText(command)
        lines = min(max(command.count("\n") + 1, 1), COMMAND_VIEW_LINES)
        view = self.command_view
        frame = 2 * view.frameWidth() + 2 * int(view.document().documentMargin() + 0.5)
        view.setFixedHeight(lines * view.fontMetrics().lineSpacing() + frame + 2)

    def set_waiting(self, waiting: bool) -> None:
        self.ran_button.setEnabled(not waiting)
        self.not_run_button.setEnabled(not waiting)
        self.note_edit.setEnabled(not waiting)
        if waiting:
            self.show_status(_tr("Recording your answer…"))

    def show_status(self, text: str) -> None:
        self.status_label.setText(text)
        self.status_label.setVisible(bool(text))

    def refused(self, reason: str) -> None:
        self.set_waiting(False)
        self.show_status(_tr("Not recorded: {reason}").replace("{reason}", reason))

    def _choose(self, ran: bool) -> None:
        self.set_waiting(True)
        self.chosen.emit(ran, self.note_edit.text().strip())

    def refresh_colours(self) -> None:
        palette = self.palette()
        muted = theme.muted_text(palette)
        for label in (self.hint_label, self.status_label):
            label_palette = label.palette()
            label_palette.setColor(QPalette.ColorRole.WindowText, muted)
            label.setPalette(label_palette)
