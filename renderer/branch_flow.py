""" "Continue from here…" from the Timeline or the transcript, to the new session open.

1. A surface names the point (``continue_at``: an event id, or a transcript card's call);
2. the main process is asked for the session's branch options (always afresh: a turn may have
   ended since) and the point is found among them;
3. the confirmation (``BranchDialog``) shows it, the folder and whether a snapshot is kept;
4. ``branch.create``; ``branch.made`` opens the new session (its row arrived as
   ``session.updated`` just before); ``branch.refused`` is shown with its code and sentence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, QObject, Qt
from PySide6.QtWidgets import QDialog, QMessageBox, QWidget

from app.bridge_contract import (
    BranchMadePush,
    BranchOptionItem,
    BranchOptionsListedPush,
    BranchRefusedPush,
)
from app.code_text import BRANCH_FOLDER_WORDS
from app.visible_text import visible
from renderer.branch_dialog import BranchDialog
from renderer.bridge_port import BridgePort
from renderer.park_text import CONTEXT, describe


def _tr(text: str) -> str:
    return QCoreApplication.translate("BranchFlow", text)


@dataclass(frozen=True, slots=True)
class BranchPoint:
    """What a surface names: a boundary's event id, or (a transcript card) the call whose
    result it is, in a run."""

    event_id: str | None = None
    tool_call_id: str | None = None
    run_id: str | None = None

    def matches(self, option: BranchOptionItem) -> bool:
        if self.event_id is not None:
            return option.event_id == self.event_id
        return (
            self.tool_call_id is not None
            and option.tool_call_id == self.tool_call_id
            and (self.run_id is None or option.run_id == self.run_id)
        )


class BranchFlow(QObject):
    def __init__(
        self,
        window: QWidget,
        bridge: BridgePort,
        open_session: Callable[[str], None],
        say: Callable[[str], None],
    ) -> None:
        super().__init__(window)
        self._window = window
        self._bridge = bridge
        self._open_session = open_session
        self._say = say
        self._asked: tuple[str, BranchPoint] | None = None
        self._making: tuple[str, str] | None = None
        self.dialog: BranchDialog | None = None
        self.refusal: QMessageBox | None = None
        bridge.branch_options_listed.connect(self._on_options)
        bridge.branch_made.connect(self._on_made)
        bridge.branch_refused.connect(self._on_refused)

    @property
    def making(self) -> bool:
        return self._making is not None

    def continue_at(self, session_id: str, point: BranchPoint) -> bool:
        """Start "Continue from here…" at ``point`` of ``session_id``."""
        if self._making is not None:
            self._say(_tr("A branch is being made; wait for it to finish."))
            return False
        self._asked = (session_id, point)
        if not self._bridge.branch_options(session_id):
            self._asked = None
            self._say(describe("bridge_disconnected").sentence)
            return False
        return True

    def _on_options(self, push: BranchOptionsListedPush) -> None:
        if self._asked is None or self._asked[0] != push.session_id:
            return
        point = self._asked[1]
        self._asked = None
        option = next((o for o in reversed(push.options) if point.matches(o)), None)
        if option is None:
            # The whole reason is too long for the status bar (it ran into the connection
            # state there): a short line, and the reason in a box that fits it.
            self._say(_tr("Maka cannot continue from this point."))
            box = QMessageBox(self._window)
            box.setIcon(QMessageBox.Icon.Information)
            box.setTextFormat(Qt.TextFormat.PlainText)
            box.setWindowTitle(_tr("Continue from here"))
            box.setText(_tr("Maka cannot continue from this point of this session."))
            box.setInformativeText(
                _tr(
                    "Only after a message you sent, a tool's result or the end of a turn that "
                    "has ended. A call whose outcome is unknown has no result to continue "
                    "after: settle it first, or pick an earlier point. (A point before a "
                    "branch was made is in the session it came from.)"
                )
            )
            box.setStandardButtons(QMessageBox.StandardButton.Ok)
            self.refusal = box
            box.open()
            return
        self.dialog = BranchDialog(push, option, self._window)
        self.dialog.finished.connect(self._on_dialog_done)
        self.dialog.open()

    def _on_dialog_done(self, result: int) -> None:
        dialog = self.dialog
        if dialog is None or result != QDialog.DialogCode.Accepted:
            return
        session_id = dialog.session_id
        event_id = dialog.option.event_id
        self._making = (session_id, event_id)
        self._say(_tr("Making the new session's folder…"))
        self._bridge.create_branch(session_id, event_id, dialog.target(), dialog.current_files)

    def _on_made(self, push: BranchMadePush) -> None:
        if self._making != (push.session_id, push.event_id):
            return
        self._making = None
        self._open_session(push.new_session_id)
        how = _tr("a copy of the current files") if push.current_files else _tr("its folder")
        self._say(
            _tr("Branched into a new session in {folder} ({how}).")
            .replace("{folder}", visible(push.cwd))
            .replace("{how}", how)
        )

    def _on_refused(self, push: BranchRefusedPush) -> None:
        if self._making is None:
            if self._asked is not None and self._asked[0] == push.session_id:
                self._asked = None  # the options could not be read
            else:
                return
        elif self._making[0] != push.session_id:
            return
        self._making = None
        # A branch's folder is the new session's, not a restored copy's (the codes are shared).
        words = BRANCH_FOLDER_WORDS.get(push.code)
        known = describe(push.code)
        sentence = (
            QCoreApplication.translate(CONTEXT, words)
            if words is not None
            else known.sentence
            if known.known
            else _tr("No branch was made.")
        )
        box = QMessageBox(self._window)
        box.setIcon(QMessageBox.Icon.Warning)
        box.setTextFormat(Qt.TextFormat.PlainText)  # what it names is text, never markup
        box.setWindowTitle(_tr("No branch was made"))
        box.setText(f"{sentence} [{push.code}]")
        if push.message:
            box.setInformativeText(visible(push.message[:600]))
        box.setStandardButtons(QMessageBox.StandardButton.Ok)
        self.refusal = box
        self._say(f"{sentence} [{push.code}]")
        box.open()
