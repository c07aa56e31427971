"""What the user does to a whole session: Locate folder…, Rename…, Export…, Remove….

Why a separate object: the window owns the layout, this owns the dialogs and the answers. The
main process decides everything (a located folder is accepted only when its marker is the
session's workspace); the window only sends a session id and a path or a title, and shows the
answer. The dialogs are attributes so tests (and the screenshot demo) can answer them.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QDir, QObject, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QFileDialog,
    QInputDialog,
    QLineEdit,
    QMainWindow,
    QMessageBox,
)

from app.bridge_contract import (
    ErrorPush,
    SessionExportedPush,
    SessionRemovedPush,
    SessionRow,
    SessionsOverviewedPush,
    SessionSummary,
    SessionUpdatedPush,
)
from app.visible_text import visible
from renderer.bridge_port import BridgePort, ConnectionState
from renderer.interrupted_banner import InterruptedBanner
from renderer.park_text import describe
from renderer.session_list import display_title
from runtime.ledger.session_title import title_allowed


def _tr(text: str) -> str:
    return QCoreApplication.translate("SessionActions", text)


class RemoveChoice(StrEnum):
    REMOVE = "remove"
    EXPORT_FIRST = "export_first"
    CANCEL = "cancel"


BRANCHES_NAMED = 10
"""How many branch sessions the "cannot be removed yet" message names (then "and N more")."""


def start_folder(missing: str) -> str:
    """Where a folder dialog opens: the nearest existing parent of ``missing``, else home."""
    path = Path(missing) if missing else None
    while path is not None and path != path.parent:
        if path.is_dir():
            return str(path)
        path = path.parent
    return QDir.homePath()


class SessionActions(QObject):
    def __init__(
        self,
        window: QMainWindow,
        bridge: BridgePort,
        banner: InterruptedBanner,
        summary_of: Callable[[str], SessionSummary | None],
        current: Callable[[], str | None],
    ) -> None:
        super().__init__(window)
        self._window = window
        self._bridge = bridge
        self._banner = banner
        self._summary_of = summary_of
        self._current = current
        self._remove_after_export: set[str] = set()
        self._remove_checking: str | None = None
        self.choose_folder: Callable[[str], str] = self._choose_folder
        self.ask_title: Callable[[str], str | None] = self._ask_title
        self.confirm_remove: Callable[[SessionSummary], RemoveChoice] = self._confirm_remove
        self.choose_export_path: Callable[[SessionSummary], str] = self._choose_export_path
        self.show_problem: Callable[[str, str], None] = self._show_problem
        self.explain_branches: Callable[[SessionSummary, list[str]], None] = self._explain_branches
        self.locate_action = QAction(_tr("&Locate folder…"), window)
        self.locate_action.triggered.connect(lambda: self._on_current(self.locate_folder))
        self.rename_action = QAction(_tr("Re&name…"), window)
        self.rename_action.setShortcut("F2")
        self.rename_action.triggered.connect(lambda: self._on_current(self.rename))
        self.export_action = QAction(_tr("&Export…"), window)
        self.export_action.triggered.connect(lambda: self._on_current(self.export))
        self.remove_action = QAction(_tr("Re&move session…"), window)
        self.remove_action.triggered.connect(lambda: self._on_current(self.remove))
        banner.locate_folder_requested.connect(self.locate_folder)
        banner.remove_session_requested.connect(self.remove)
        bridge.session_change_done.connect(self._on_change_done)
        bridge.session_removed.connect(self._on_removed)
        bridge.session_exported.connect(self._on_exported)
        bridge.session_change_refused.connect(self._on_refused)
        bridge.sessions_overviewed.connect(self._on_overviewed)
        bridge.connection_state_changed.connect(self._on_connection)

    @property
    def actions(self) -> list[QAction]:
        return [self.rename_action, self.locate_action, self.export_action, self.remove_action]

    def set_enabled(self, enabled: bool) -> None:
        for action in self.actions:
            action.setEnabled(enabled)

    # ----------------------------------------------------------------- requests

    def _on_current(self, act: Callable[[str], None]) -> None:
        session_id = self._current()
        if session_id is not None:
            act(session_id)

    def locate_folder(self, session_id: str) -> None:
        summary = self._summary_of(session_id)
        folder = self.choose_folder(summary.cwd if summary else "")
        if folder:
            self._bridge.relocate_session(session_id, folder)

    def rename(self, session_id: str) -> None:
        summary = self._summary_of(session_id)
        title = (self.ask_title(summary.title if summary else "") or "").strip()
        if not title:
            return
        if not title_allowed(title):
            # Said here, not sent: the main process would refuse it with the same code.
            sentence = describe("session_title_invalid").sentence
            self.show_problem(_tr("The session was not renamed"), sentence)
            return
        self._bridge.rename_session(session_id, title)

    def export(self, session_id: str) -> None:
        summary = self._summary_of(session_id)
        if summary is None:
            return
        path = self.choose_export_path(summary)
        if path:
            self._bridge.export_session(session_id, path)

    def remove(self, session_id: str) -> None:
        """First ask the main process which sessions were branched from this one: a session
        others were branched from cannot be removed (they refer to its history), which is said
        up front, naming them, instead of a confirmation that its history is deleted for good
        followed by a refusal."""
        if self._summary_of(session_id) is None:
            return
        self._remove_checking = session_id
        if not self._bridge.overview_sessions():
            self._remove_checking = None
            self._confirm_and_remove(session_id)  # not sent: the main process still checks

    def _on_overviewed(self, push: SessionsOverviewedPush | None) -> None:
        session_id, self._remove_checking = self._remove_checking, None
        if session_id is None:
            return
        summary = self._summary_of(session_id)
        if summary is None:
            return  # removed meanwhile
        rows = {row.session_id: row for row in push.rows} if push is not None else {}
        row = rows.get(session_id)
        branches = (row.branches or ()) if row is not None else ()
        if branches:
            self.explain_branches(summary, [self._title_of(b.session_id, rows) for b in branches])
            return
        self._confirm_and_remove(session_id)

    def _title_of(self, session_id: str, rows: dict[str, SessionRow]) -> str:
        summary = self._summary_of(session_id)
        if summary is not None:
            return display_title(summary)
        row = rows.get(session_id)
        return visible(row.title) if row is not None and row.title else session_id

    def _on_connection(self, state: str) -> None:
        if state != ConnectionState.CONNECTED:
            self._remove_checking = None  # its answer will not come

    def _confirm_and_remove(self, session_id: str) -> None:
        summary = self._summary_of(session_id)
        if summary is None:
            return
        choice = self.confirm_remove(summary)
        if choice is RemoveChoice.REMOVE:
            self._bridge.remove_session(session_id)
        elif choice is RemoveChoice.EXPORT_FIRST:
            path = self.choose_export_path(summary)
            if path and self._bridge.export_session(session_id, path):
                self._remove_after_export.add(session_id)

    # ----------------------------------------------------------------- answers

    def _on_change_done(self, session_id: str, what: str, push: object) -> None:
        """This window's relocation went through (the answer to its own request; a session
        refreshed for another reason while the request is under way is no answer)."""
        if what == "relocate" and isinstance(push, SessionUpdatedPush):
            self._banner.forget_session(session_id)
            self._status(
                _tr("The session now uses {folder}.").replace("{folder}", push.session.cwd)
            )

    def _on_removed(self, push: SessionRemovedPush) -> None:
        self._banner.forget_session(push.session_id)
        if not push.elsewhere:
            self._status(_tr("The session was removed; its folder was not touched."))
            return
        summary = self._summary_of(push.session_id)
        title = f"“{display_title(summary)}”" if summary is not None else _tr("A session")
        self._status(
            _tr("{title} was removed outside this window; its folder was not touched.").replace(
                "{title}", title
            )
        )

    def _on_exported(self, push: SessionExportedPush) -> None:
        self._status(
            _tr("Exported {count} events to {path}.")
            .replace("{count}", str(push.events))
            .replace("{path}", push.path)
        )
        if push.session_id in self._remove_after_export:
            self._remove_after_export.discard(push.session_id)
            self.remove(push.session_id)

    def _on_refused(self, session_id: str, what: str, push: ErrorPush) -> None:
        self._remove_after_export.discard(session_id)
        known = describe(push.code)
        sentence = known.sentence if known.known else _tr("It could not be done.")
        headline = {
            "relocate": _tr("The folder was not accepted"),
            "rename": _tr("The session was not renamed"),
            "remove": _tr("The session was not removed"),
            "export": _tr("The session was not exported"),
        }.get(what, _tr("That did not work"))
        self.show_problem(headline, sentence)

    def _status(self, text: str) -> None:
        self._window.statusBar().showMessage(text, 10_000)

    # ----------------------------------------------------------------- dialogs

    def _choose_folder(self, missing: str) -> str:
        return QFileDialog.getExistingDirectory(
            self._window, _tr("Where is the session's folder now?"), start_folder(missing)
        )

    def _ask_title(self, current: str) -> str | None:
        title, accepted = QInputDialog.getText(
            self._window,
            _tr("Rename session"),
            _tr("Session title:"),
            QLineEdit.EchoMode.Normal,
            current,
        )
        return title if accepted else None

    def _confirm_remove(self, summary: SessionSummary) -> RemoveChoice:
        box = QMessageBox(self._window)
        box.setIcon(QMessageBox.Icon.Warning)
        box.setTextFormat(Qt.TextFormat.PlainText)  # what it names is text, never markup
        box.setWindowTitle(_tr("Remove session"))
        box.setText(_tr("Remove “{title}”?").replace("{title}", display_title(summary)))
        box.setInformativeText(
            _tr(
                "Its history (every message, tool call and result Maka recorded) is deleted "
                "and cannot be brought back. The folder {folder} and its files are not touched. "
                "Export it first to keep a copy."
            ).replace("{folder}", summary.cwd)
        )
        export = box.addButton(_tr("&Export first…"), QMessageBox.ButtonRole.ActionRole)
        remove = box.addButton(_tr("&Remove"), QMessageBox.ButtonRole.DestructiveRole)
        cancel = box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(cancel)
        box.exec()
        clicked = box.clickedButton()
        if clicked is remove:
            return RemoveChoice.REMOVE
        if clicked is export:
            return RemoveChoice.EXPORT_FIRST
        return RemoveChoice.CANCEL

    def _explain_branches(self, summary: SessionSummary, titles: list[str]) -> None:
        box = QMessageBox(self._window)
        box.setIcon(QMessageBox.Icon.Information)
        box.setTextFormat(Qt.TextFormat.PlainText)  # what it names is text, never markup
        box.setWindowTitle(_tr("Remove session"))
        box.setText(branches_headline(summary))
        box.setInformativeText(branches_text(titles))
        box.addButton(QMessageBox.StandardButton.Ok)
        box.exec()

    def _choose_export_path(self, summary: SessionSummary) -> str:
        name = f"maka-session-{summary.session_id}.jsonl"
        path, _filter = QFileDialog.getSaveFileName(
            self._window,
            _tr("Export session"),
            str(Path(QDir.homePath()) / name),
            _tr("Maka session export (*.jsonl)"),
        )
        return path

    def _show_problem(self, headline: str, sentence: str) -> None:
        QMessageBox.warning(self._window, headline, sentence)


def branches_headline(summary: SessionSummary) -> str:
    return _tr("“{title}” cannot be removed yet.").replace("{title}", display_title(summary))


def branches_text(titles: list[str]) -> str:
    """Why a session with branches cannot be removed, naming the branches (the first
    ``BRANCHES_NAMED``, then how many more), and what to do."""
    named = ", ".join(f"“{title}”" for title in titles[:BRANCHES_NAMED])
    rest = len(titles) - min(len(titles), BRANCHES_NAMED)
    if rest:
        named += " " + _tr("and {count} more").replace("{count}", str(rest))
    pattern = (
        _tr(
            "The session {names} was branched from it and refers to its history. Remove that "
            "session first; then this one can be removed. Nothing was removed."
        )
        if len(titles) == 1
        else _tr(
            "The sessions {names} were branched from it and refer to its history. Remove "
            "those sessions first; then this one can be removed. Nothing was removed."
        )
    )
    return pattern.replace("{names}", named)
