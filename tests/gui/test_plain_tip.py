"""What a tooltip or a dialog shows is its text, even when that text looks like markup: a
command the model ran (``echo "<h1>hi</h1>" > index.html``) or a file named ``a<b>c.txt``
(renderer/plain_tip.py; the message boxes are plain text)."""

from __future__ import annotations

from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox, QWidget
from pytestqt.qtbot import QtBot

from app import bridge_contract as bc
from renderer.branch_dialog import BranchDialog
from renderer.plain_tip import plain_tip
from tests.gui.test_banner_workspace_decisions import stale_park

COMMAND = 'echo "<h1>hi</h1>" > index.html'


def _misread(widget: QWidget) -> list[str]:
    """The texts of ``widget``'s labels that Qt shows as markup (the text is not what shows)."""
    return [
        label.text()
        for label in widget.findChildren(QLabel)
        if label.textFormat() != Qt.TextFormat.PlainText and GuiQt.mightBeRichText(label.text())
    ]


def _shown(tip: str) -> str:
    """The text a tooltip shows for ``tip``, read as Qt reads a tooltip."""
    document = QTextDocument()
    if GuiQt.mightBeRichText(tip):
        document.setHtml(tip)
    else:
        document.setPlainText(tip)
    return document.toPlainText()


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("ab <>/&\"'=\n h1"), max_size=40))
@example(text="<b>\n")  # a paragraph dropped its last newline
@example(text="\n<b>")  # and its first
def test_a_tip_shows_its_text_whatever_it_looks_like(qapp: QApplication, text: str) -> None:
    assert _shown(plain_tip(text)) == text
    if not GuiQt.mightBeRichText(text):
        assert plain_tip(text) == text  # ordinary text is left as it is


def test_the_restore_offer_shows_a_command_with_tags_as_it_was(qtbot: QtBot) -> None:
    point = f'a restored copy would hold the folder as it was before the command "{COMMAND}"'
    banner, _bridge = stale_park(qtbot, "/home/ann/site", point)
    assert COMMAND in banner.restore_note.text()
    assert _misread(banner) == []
    assert _shown(banner.restore_button.toolTip()) == banner.restore_note.text()

    seen: list[tuple[Qt.TextFormat, str]] = []

    def cancel(box: QMessageBox) -> int:
        seen.append((box.textFormat(), box.informativeText()))
        return 0

    with mock.patch.object(QMessageBox, "exec", cancel):
        banner.restore_button.click()
    [(text_format, informative)] = seen
    assert text_format == Qt.TextFormat.PlainText
    assert f'before the command "{COMMAND}".' in informative


def test_the_branch_dialog_shows_a_title_and_message_with_tags_as_they_are(qtbot: QtBot) -> None:
    option = bc.BranchOptionItem(
        event_id="e-ask",
        run_id="r1",
        seq=1,
        kind="user_message",
        ts=0,
        label="you: make the <h1> bigger",
        snapshot_bound=True,
        snapshot_kept=True,
    )
    listed = bc.BranchOptionsListedPush(
        session_id="s1",
        title="make the <h1> bigger",
        cwd="/w/<b>site</b>",
        default_folder="/w/site-branch-1",
        options=(option,),
    )
    dialog = BranchDialog(listed, option)
    qtbot.addWidget(dialog)
    assert "“make the <h1> bigger”" in dialog.point_label.text()
    assert _misread(dialog) == []
    assert _shown(dialog.folder_edit.toolTip()) == (
        "A new or empty folder outside /w/<b>site</b>; a name without a full path goes beside it"
    )
