"""The confirmation behind "Continue from here…" (issue #36, docs/design/workspace.md section 6):
the point the new session continues from, the folder its copy goes to (editable, with a folder
chooser), and whether a snapshot of the folder is kept for that point. Without one it says so and
offers "Continue with the current files" instead (the model is told the files may differ from
the history, as after a rebaseline).

It looks like the restore confirmation (``restore_dialog``): a question icon, a bold question,
plain sentences below, the action that does it as the default button.
"""

from __future__ import annotations

import os

from PySide6.QtCore import QCoreApplication, QEvent, Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from app.bridge_contract import BranchOptionItem, BranchOptionsListedPush
from app.visible_text import visible
from renderer import theme
from renderer.park_text import Severity
from renderer.plain_tip import plain_tip

DIALOG_WIDTH = 600


def _tr(text: str) -> str:
    return QCoreApplication.translate("BranchDialog", text)


def point_words(option: BranchOptionItem) -> str:
    """Where the new session continues from, in words; a tool's result names its call (its id
    and, in short, its arguments, as its transcript card shows them): a session may have many
    calls of the same tool."""
    words = boundary_words(option.kind, option.label)
    if option.kind == "tool_result" and option.tool_call_id:
        call = visible(option.tool_call_id)
        args = visible(option.tool_args or "")
        which = (
            _tr("call {call}: {args}").replace("{call}", call).replace("{args}", args)
            if args
            else _tr("call {call}").replace("{call}", call)
        )
        words += f" ({which})"
    return words


def boundary_words(kind: str | None, label: str) -> str:
    """A boundary in words: "after your message “…”", "after the result of bash", "at the end
    of the turn (completed)"."""
    label = visible(label)
    if kind == "user_message":
        text = label.removeprefix("you: ")
        return _tr("after your message “{text}”").replace("{text}", text)
    if kind == "tool_result":
        name = label.removeprefix("result of ")
        return _tr("after the result of {tool}").replace("{tool}", name)
    if kind == "run_ending":
        how = label.removeprefix("run ended ")
        return _tr("at the end of the turn ({how})").replace("{how}", how)
    return label


class BranchDialog(QDialog):
    """Ask to confirm a branch. After ``accepted``: ``target()`` (None = the default sibling
    folder) and ``current_files`` (the copy is of the folder as it is now)."""

    def __init__(
        self,
        listed: BranchOptionsListedPush,
        option: BranchOptionItem,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._listed = listed
        self.session_id = listed.session_id
        self.option = option
        self.current_files = not option.snapshot_kept
        self.setWindowTitle(_tr("Continue from here"))
        self.setMinimumWidth(DIALOG_WIDTH)
        column = QVBoxLayout(self)
        column.setSpacing(10)
        top = QHBoxLayout()
        icon = QLabel()
        size = self.style().pixelMetric(QStyle.PixelMetric.PM_MessageBoxIconSize)
        icon.setPixmap(
            self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxQuestion).pixmap(size)
        )
        icon.setAlignment(Qt.AlignmentFlag.AlignTop)
        top.addWidget(icon)
        words = QVBoxLayout()
        self.question = QLabel(_tr("Continue from this point in a new session?"))
        font = self.question.font()
        font.setBold(True)
        self.question.setFont(font)
        self.question.setWordWrap(True)
        words.addWidget(self.question)
        title = visible(listed.title) or listed.session_id
        self.point_label = QLabel(
            _tr("It continues {point}, in session “{title}”.")
            .replace("{title}", title)
            .replace("{point}", point_words(option))
        )
        self.point_label.setTextFormat(Qt.TextFormat.PlainText)
        self.point_label.setWordWrap(True)
        self.point_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        words.addWidget(self.point_label)
        self.explain_label = QLabel(
            _tr(
                "The new session's history is this session's up to that point; the model "
                "sees nothing after it. This session and its folder are left as they are."
            )
        )
        self.explain_label.setWordWrap(True)
        words.addWidget(self.explain_label)
        self.snapshot_label = QLabel(self._snapshot_words())
        self.snapshot_label.setTextFormat(Qt.TextFormat.PlainText)
        self.snapshot_label.setWordWrap(True)
        severity = Severity.INFO if option.snapshot_kept else Severity.WARN
        palette = self.snapshot_label.palette()
        palette.setColor(
            self.snapshot_label.foregroundRole(), theme.accent(severity, self.palette())
        )
        self.snapshot_label.setPalette(palette)
        words.addWidget(self.snapshot_label)
        top.addLayout(words, 1)
        column.addLayout(top)
        folder_row = QHBoxLayout()
        folder_caption = QLabel(_tr("New &folder:"))
        self.folder_edit = QLineEdit(listed.default_folder)
        self.folder_edit.setAccessibleName(_tr("The new session's folder"))
        outside = _tr(
            "A new or empty folder outside {folder}; a name without a full path goes beside it"
        ).replace("{folder}", listed.cwd)
        self.folder_edit.setToolTip(plain_tip(outside))
        folder_caption.setBuddy(self.folder_edit)
        self.choose_button = QPushButton(_tr("&Choose…"))
        self.choose_button.clicked.connect(self.choose_folder)
        self.choose_button.setAutoDefault(False)  # Enter makes the branch, wherever the focus
        folder_row.addWidget(folder_caption)
        folder_row.addWidget(self.folder_edit, 1)
        folder_row.addWidget(self.choose_button)
        column.addLayout(folder_row)
        self.folder_note = QLabel(self._folder_words())
        self.folder_note.setWordWrap(True)
        self._recolour_note()
        column.addWidget(self.folder_note)
        self.buttons = QDialogButtonBox()
        making = listed.snapshots_on and option.branchable
        self.make_button = self.buttons.addButton(
            _tr("Make the branch")
            if option.snapshot_kept
            else _tr("Continue with the current files"),
            QDialogButtonBox.ButtonRole.AcceptRole,
        )
        self.make_button.setEnabled(making)
        self.make_button.setDefault(making)
        if making:
            self.make_button.setFocus()
        self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        for widget in (self.folder_edit, self.choose_button):
            widget.setEnabled(making)
        column.addStretch(1)
        column.addWidget(self.buttons)
        # As tall as its sentences at its width: no empty bands between them, none clipped.
        self.resize(DIALOG_WIDTH, column.heightForWidth(DIALOG_WIDTH))

    def _recolour_note(self) -> None:
        """The footnote in the muted secondary colour, readable in light and dark palettes
        (the disabled grey it once had is too faint to read)."""
        palette = self.folder_note.palette()
        palette.setColor(self.folder_note.foregroundRole(), theme.muted_text(self.palette()))
        self.folder_note.setPalette(palette)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        changed = (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange)
        if event.type() in changed and hasattr(self, "folder_note"):
            self._recolour_note()

    def _folder_words(self) -> str:
        """The secondary footnote: where the copy goes and what it holds, for the choice offered
        (the files of that point, or the current files)."""
        where = _tr(
            "Default: a new folder beside yours (beside the Git repository your folder "
            "is in, when it is inside one)."
        )
        if self._listed.folder_gone and not self.current_files:
            what = _tr(
                "Your folder is not there any more, so the copy is the files of that point "
                "alone: not a Git repository, even if your folder was one. Paths your "
                ".gitignore ignores and files over 50 MiB are not in snapshots, so they are "
                "not in the copy."
            )
        elif self.current_files:
            what = _tr(
                "If your folder is a Git repository, the copy is a clone of it with your "
                "current files on top. Paths your .gitignore ignores and files over 50 MiB "
                "are not captured, so they are not in the copy."
            )
        else:
            what = _tr(
                "If your folder is a Git repository, the copy is a clone of it with the files "
                "of that point on top. Paths your .gitignore ignores and files over 50 MiB are "
                "not in snapshots, so they are not in the copy."
            )
        return f"{where} {what}"

    def _snapshot_words(self) -> str:
        option = self.option
        if not option.branchable and option.settled_at is not None:
            return _tr(
                "A tool call before this point had no settled outcome yet here; its outcome "
                "was recorded later. Choose that later point (the call's result) instead, or "
                "an earlier one."
            )
        if not option.branchable:
            # Every later point of the run is after that call too: the way on is an earlier
            # point, or the call settled (its card's "It ran" / "It did not run").
            return _tr(
                "A tool call before this point has no settled outcome there, so the history up "
                "to it cannot be shown to a model. Choose an earlier point (before that call), "
                "or first settle the call: say on its card in the transcript whether it ran."
            )
        if not self._listed.snapshots_on:
            return _tr("Workspace snapshots are off, so no copy of the folder can be made.")
        if option.snapshot_kept:
            return _tr(
                "A snapshot of the folder is kept for this point: the new folder gets the "
                "files as they were there."
            )
        why = (
            _tr("its files are no longer kept")
            if option.snapshot_bound
            else _tr("none was taken there")
        )
        return (
            _tr("No snapshot of the folder is kept for this point ({why}).").replace("{why}", why)
            + " "
            + _tr(
                "You can continue with a copy of the folder as it is now instead; the model is "
                "told the files may differ from what the history says."
            )
        )

    def choose_folder(self) -> None:
        start = os.path.dirname(self.folder_edit.text().rstrip("/\\")) or self._listed.cwd
        picked = QFileDialog.getExistingDirectory(
            self, _tr("Choose a new or empty folder for the branch"), start
        )
        if picked:
            self.folder_edit.setText(picked)

    def target(self) -> str | None:
        """The folder the user named, or None for the default sibling. A relative name (or
        ``~``) is taken beside the session's folder, where the default goes, never in whatever
        folder the desktop was started from."""
        text = self.folder_edit.text().strip()
        if not text or text == self._listed.default_folder:
            return None
        text = os.path.expanduser(text)
        if not os.path.isabs(text):
            beside = os.path.dirname(self._listed.cwd.rstrip("/\\")) or self._listed.cwd
            text = os.path.normpath(os.path.join(beside, text))
        return text
