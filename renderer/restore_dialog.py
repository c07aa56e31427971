"""The confirmation behind "Continue in a restored copy…" (docs/design/workspace.md section 4):
where the copy goes (a new sibling folder, or one the user picks) and what it holds."""

from __future__ import annotations

import os
import re

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QFileDialog, QLabel, QMessageBox, QWidget

PATH_LINE_PX = 420
"""The widest line a path takes in the dialog (its text is at least this wide, so a path's
line is never wrapped again, at a "-" in a folder's name say)."""


def _tr(text: str) -> str:
    return QCoreApplication.translate("InterruptedBanner", text)


def _sentence(text: str) -> str:
    return text if text.endswith(".") else f"{text}."


def ask_restore_target(
    parent: QWidget,
    folder: str,
    point: str,
    *,
    abandoned: bool,
    place: str = "",
    clone: bool | None = None,
) -> tuple[bool, str | None]:
    """Ask to confirm the copy. ``point``: what the copy would hold when it is not the folder at
    the stop (else ""); ``abandoned``: a copy left by a resume that did not start exists (it is
    never used); ``place``: the new folder the main process would make the copy in (its
    ``workspace_restore_place`` note; "" from an older park, when the dialog names the
    pattern); ``clone``: whether the copy would be a clone of the folder's Git repository (the
    same note's field; None from an older park, when the dialog says it conditionally).
    Returns (confirmed, the folder the user picked or None for the default)."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setTextFormat(Qt.TextFormat.PlainText)  # what it names is text, never markup
    box.setWindowTitle(_tr("Continue in a restored copy"))
    box.setText(
        _tr("Continue in a restored copy of the folder?")
        if point
        else _tr("Continue in a copy of the folder as it was when the run stopped?")
    )
    where = _where(folder, place, abandoned=abandoned, metrics=box.fontMetrics())
    if clone is None:
        where += " " + _tr(
            "If your folder is a Git repository, the copy is a clone of it at your current "
            "commit with the snapshot's files on top, so git status and git diff there show "
            "the same changes, none of them staged."
        )
    elif clone:
        where += " " + _tr(
            "The copy is a clone of your Git repository at your current commit, with the "
            "snapshot's files on top: git status and git diff there show the same changes, "
            "none of them staged."
        )
    where += " " + _tr(
        "Paths Git ignores there (your .gitignore files, .git/info/exclude, your excludes file) "
        "unless it tracks "
        "them, and files over 50 MiB, are not in snapshots, so they are not in the copy."
    )
    said = _sentence(point[:1].upper() + point[1:])
    box.setInformativeText(f"{said}\n\n{where}" if point else where)
    informative = box.findChild(QLabel, "qt_msgbox_informativelabel")
    if informative is not None:  # as wide as a path's line: wrapped only where it breaks
        informative.setMinimumWidth(PATH_LINE_PX)
    make = box.addButton(_tr("Make the copy"), QMessageBox.ButtonRole.AcceptRole)
    choose = box.addButton(_tr("Choose folder…"), QMessageBox.ButtonRole.ActionRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(make)
    box.exec()
    if box.clickedButton() is make:
        return True, None
    if box.clickedButton() is choose:
        picked = QFileDialog.getExistingDirectory(
            parent, _tr("Choose an empty folder for the copy"), os.path.dirname(folder)
        )
        if picked:
            return True, picked
    return False, None


def path_lines(path: str, metrics: QFontMetrics, width: int = PATH_LINE_PX) -> str:
    """``path`` on lines of at most ``width`` pixels, broken only after a separator ("/", or
    "\\" on Windows; never inside a folder's name, as word wrap would at a "-"); a single name
    wider than a line is broken where it reaches the edge, never shortened: the lines joined
    are the exact path, which the user may need to find."""
    lines: list[str] = []
    line = ""
    for name in re.findall(r"[^/\\]*[/\\]|[^/\\]+$", path):
        if line and metrics.horizontalAdvance(line + name) > width:
            lines.append(line)
            line = ""
        rest = name
        while metrics.horizontalAdvance(line + rest) > width and len(rest) > 1:
            # A name wider than a line: as much of it as fits, then the rest below.
            cut = len(rest) - 1
            while cut > 1 and metrics.horizontalAdvance(line + rest[:cut]) > width:
                cut -= 1
            lines.append(line + rest[:cut])
            line, rest = "", rest[cut:]
        line += rest
    lines.append(line)
    return "\n".join(lines)


def _where(folder: str, place: str, *, abandoned: bool, metrics: QFontMetrics) -> str:
    """Where the copy goes: the exact folder the main process named (on lines of its own),
    else the pattern."""
    if place:
        text = _tr(
            "Maka makes the copy in a new folder,\n{place}\n(or the next free number, should "
            "that one exist by then), and the session continues there."
        ).replace("{place}", path_lines(place, metrics))
        if abandoned:
            text += " " + _tr("A copy left by a resume that did not start is not used.")
        beside = os.path.dirname(os.path.normpath(place))
        if beside != os.path.dirname(os.path.normpath(folder)):  # paths compared, no disk read
            text += " " + _tr(
                "It goes beside the Git repository your folder is in, so the repository does "
                "not see it."
            )
        return text + " " + _tr("Your folder is not changed.")
    name = os.path.basename(folder.rstrip("/\\")) or _tr("folder")
    return (
        _tr(
            "Maka makes the copy in a new folder beside yours, the next free "
            "{name}-restored-N (a copy left by a resume that did not start is not used), "
            "and the session continues there; when your folder is inside a Git repository, "
            "the new folder goes beside the repository instead "
            "(<repository>-…-{name}-restored-N), so the repository does not see it. Your "
            "folder is not changed."
        )
        if abandoned
        else _tr(
            "Maka makes the copy in a new folder beside yours, {name}-restored-1 (or the "
            "next free number), and the session continues there; when your folder is inside "
            "a Git repository, the new folder goes beside the repository instead "
            "(<repository>-…-{name}-restored-1), so the repository does not see it. Your "
            "folder is not changed."
        )
    ).replace("{name}", name)
