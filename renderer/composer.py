"""The composer: a multi-line editor, Send (Ctrl+Enter) and Stop.

Why Ctrl+Enter: Enter alone inserts a newline, so multi-line requests are easy to write and a
stray Enter never sends half a message.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QKeySequence, QPalette, QShortcut
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.bridge_contract import MAX_TEXT_CHARS
from renderer import theme
from renderer.park_text import Severity


def _tr(text: str) -> str:
    return QCoreApplication.translate("Composer", text)


def _hidden_note(outer: QVBoxLayout, name: str, text: str = "") -> QLabel:
    """A line of plain text above the editor, hidden until there is something to say."""
    label = QLabel(text)
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setVisible(False)
    outer.addWidget(label)
    return label


EDITOR_LINES = 4
"""Lines of the message editor (two in a short window while the Timeline is open)."""


class Composer(QWidget):
    send_requested = Signal(str)
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(20, 8, 20, 14)
        outer.setSpacing(4)
        # Why a refused message came back (the main process did not take it): beside the text
        # it refers to, not in the status bar where it vanishes.
        self.note_label = _hidden_note(outer, "ComposerNote")
        # Why Send is off for a message over the limit: the limit and the count, while typing.
        self.limit_label = _hidden_note(outer, "ComposerLimit")
        # A turn another process runs (a shared ledger): why Stop and Send do nothing here.
        self.elsewhere_label = _hidden_note(
            outer,
            "ComposerNote",
            _tr(
                "Another Maka process is running this turn (a terminal, or another computer on "
                "the shared database): stop it there. If that process has stopped, Maka takes "
                "the session over here once its lease runs out, and shows what became of the "
                "turn."
            ),
        )
        # A session another process holds (a shared ledger): why Send does nothing here.
        self.held_label = _hidden_note(outer, "ComposerNote")
        # A running turn waiting on the model server (a slow local model can take a minute
        # before its first word): said, with how long, so a quiet window is not read as stuck.
        self.waiting_label = _hidden_note(outer, "ComposerWaiting")
        layout = QHBoxLayout()
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(10)
        outer.addLayout(layout)
        self.editor = QPlainTextEdit()
        self.editor.setAccessibleName(_tr("Message"))
        self.editor.setPlaceholderText(_tr("Message Maka…   (Ctrl+Enter to send)"))
        self.editor.setTabChangesFocus(True)
        self.set_editor_lines(EDITOR_LINES)
        buttons = QVBoxLayout()
        buttons.setSpacing(6)
        self.send_button = QPushButton(_tr("Send"))
        self.send_button.setToolTip(_tr("Send (Ctrl+Enter)"))
        self.send_button.setDefault(False)
        self.send_button.clicked.connect(self.submit)
        self.stop_button = QPushButton(_tr("Stop"))
        self.stop_button.setToolTip(_tr("Stop the running turn (Esc)"))
        self.stop_button.clicked.connect(self.cancel_requested)
        self.stop_button.setVisible(False)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        layout.addWidget(self.editor, 1)
        layout.addLayout(buttons)
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            shortcut = QShortcut(QKeySequence(keys), self.editor)
            shortcut.setContext(Qt.ShortcutContext.WidgetShortcut)
            shortcut.activated.connect(self.submit)
        self.editor.textChanged.connect(self._update_enabled)
        self._running = False
        self._available = True
        self._held_by: str | None = None
        self._update_enabled()

    def set_editor_lines(self, lines: int) -> None:
        """The editor's height in lines (fewer in a short window beside the Timeline)."""
        line = self.editor.fontMetrics().lineSpacing()
        frame = self.editor.frameWidth() * 2 + int(self.editor.document().documentMargin() * 2)
        height = line * lines + frame + 4
        if self.editor.height() != height or self.editor.minimumHeight() != height:
            self.editor.setFixedHeight(height)
        layout = self.layout()
        if layout is not None:  # (a short window: less space around it too)
            layout.setContentsMargins(
                20, 8 if lines >= EDITOR_LINES else 4, 20, 14 if lines >= EDITOR_LINES else 8
            )

    def set_running(self, running: bool, *, elsewhere: bool = False) -> None:
        """While a turn runs, Stop replaces nothing but appears beside Send, which waits.
        ``elsewhere``: another process runs it; Stop is shown greyed out, and a note says why
        and where it can be stopped."""
        self._running = running
        self.stop_button.setVisible(running)
        self.stop_button.setEnabled(not elsewhere)
        self.stop_button.setToolTip(
            _tr("Another Maka process runs this turn: stop it there")
            if elsewhere
            else _tr("Stop the running turn (Esc)")
        )
        self.elsewhere_label.setVisible(running and elsewhere)
        self.held_label.setVisible(self._held_by is not None and not running)
        self._update_enabled()

    def set_waiting(self, text: str | None) -> None:
        """What the running turn waits for (``None``: nothing to say)."""
        if text is None:
            self.waiting_label.setVisible(False)
            return
        if self.waiting_label.text() != text:
            self.waiting_label.setText(text)
        if not self.waiting_label.isVisible():
            # muted as the folder's path is (a note, not a warning), read from the palette
            # of the moment (a light or dark theme)
            palette = self.waiting_label.palette()
            palette.setColor(self.waiting_label.foregroundRole(), theme.muted_text(self.palette()))
            self.waiting_label.setPalette(palette)
        self.waiting_label.setVisible(True)

    def set_held_elsewhere(self, holder: str | None) -> None:
        """``holder``: another Maka process holds the open session (a shared ledger), named as
        ``machine, pid N``; Send waits, and a note says where to carry on. None: nobody else."""
        self._held_by = holder
        if holder is not None:
            self.held_label.setText(
                _tr(
                    "Another Maka process ({holder}) holds this session: carry on there, or "
                    "here once that process has stopped and its lease has run out."
                ).replace("{holder}", holder)
            )
        self.held_label.setVisible(holder is not None and not self._running)
        self._update_enabled()

    def set_starts_session(self, starts: bool) -> None:
        """With no session open, a message starts one: the placeholder says so."""
        text = (
            _tr("Type a message to start a new session   (Ctrl+Enter to send)")
            if starts
            else _tr("Message Maka…   (Ctrl+Enter to send)")
        )
        if self.editor.placeholderText() != text:
            self.editor.setPlaceholderText(text)
            self.editor.viewport().update()  # an empty editor shows it: drawn again now

    def set_available(self, available: bool) -> None:
        """False without a session or a connection: nothing could be sent."""
        self._available = available
        self.editor.setEnabled(available)
        self._update_enabled()

    def submit(self) -> None:
        text = self.editor.toPlainText().strip()
        if not self.send_button.isEnabled() or not text:
            return
        self.clear_note()
        if self.send_button.hasFocus():
            # Clicked: Send is disabled once the editor empties, and Qt would pass its focus on
            # to the next button in the window (New, where a space opens a dialog).
            self.editor.setFocus(Qt.FocusReason.OtherFocusReason)
        self.editor.clear()
        self.send_requested.emit(text)

    def give_back(self, text: str, reason: str) -> None:
        """A message that was not sent: its text returns to the editor (before anything typed
        since) and ``reason`` shows beside it."""
        typed = self.editor.toPlainText()
        if typed.strip() != text:
            self.editor.setPlainText(text + ("\n" + typed if typed.strip() else ""))
        cursor = self.editor.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.editor.setTextCursor(cursor)
        self.note_label.setText(reason)
        self.note_label.setVisible(bool(reason))
        palette = self.note_label.palette()
        palette.setColor(QPalette.ColorRole.WindowText, theme.accent(Severity.WARN, self.palette()))
        self.note_label.setPalette(palette)
        self.editor.setFocus(Qt.FocusReason.OtherFocusReason)

    @property
    def draft(self) -> str:
        """The message being written, as typed (not yet sent)."""
        return self.editor.toPlainText()

    def set_draft(self, text: str) -> None:
        """Show ``text`` as the message being written: the draft of the session now shown
        ("" for a session without one), with the cursor at its end."""
        if self.editor.toPlainText() != text:
            self.editor.setPlainText(text)
        cursor = self.editor.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.editor.setTextCursor(cursor)

    def show_note(self, text: str) -> None:
        """A sentence beside the editor about what a message would meet (not a refusal)."""
        self.note_label.setText(text)
        self.note_label.setVisible(bool(text))
        palette = self.note_label.palette()
        palette.setColor(QPalette.ColorRole.WindowText, theme.accent(Severity.WARN, self.palette()))
        self.note_label.setPalette(palette)

    def clear_note(self) -> None:
        self.note_label.clear()
        self.note_label.setVisible(False)

    @property
    def note(self) -> str:
        return self.note_label.text() if self.note_label.isVisible() else ""

    @property
    def limit_note(self) -> str:
        """Why Send is off for a message over the limit ("" when it is not over)."""
        return self.limit_label.text() if not self.limit_label.isHidden() else ""

    def _update_enabled(self) -> None:
        length = len(self.editor.toPlainText().strip())
        over = length > MAX_TEXT_CHARS
        self.send_button.setEnabled(
            self._available
            and not self._running
            and self._held_by is None
            and length > 0
            and not over
        )
        if over:
            sentence = (
                _tr(
                    "Too long to send: this message has {count} characters and a message can "
                    "have at most {limit}. Shorten it by {excess} to send it."
                )
                .replace("{count}", f"{length:,}")
                .replace("{limit}", f"{MAX_TEXT_CHARS:,}")
                .replace("{excess}", f"{length - MAX_TEXT_CHARS:,}")
            )
            if self.limit_label.text() != sentence:
                self.limit_label.setText(sentence)
                palette = self.limit_label.palette()
                colour = theme.accent(Severity.WARN, self.palette())
                palette.setColor(QPalette.ColorRole.WindowText, colour)
                self.limit_label.setPalette(palette)
            self.send_button.setToolTip(sentence)
        elif not self.limit_label.isHidden():
            self.limit_label.clear()
            self.send_button.setToolTip(_tr("Send (Ctrl+Enter)"))
        self.limit_label.setVisible(over)
