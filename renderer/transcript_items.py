"""One widget per transcript item kind: messages, thinking, tool cards, notices, markers.

Why plain-text everywhere: model output and tool results are untrusted; rendering them as
rich text would let a result inject links or markup into the window. Colours are recomputed
on palette changes (see :mod:`renderer.tinted_panel`).

Why :class:`WrappingText` and not a word-wrapped ``QLabel``: a label never breaks inside a word
and asks its layout for at least the width of its longest word, so one long URL, hash or run
of ``x`` made the whole transcript column wider than the window. ``WrappingText`` breaks at
word boundaries, or anywhere in a word longer than the line, asks for almost no width, and
keeps the text unchanged (selecting and copying gives exactly what was sent). Qt's "word
boundary or anywhere" costs time in the square of the longest word, so a text holding a run of
``LONG_RUN`` characters or more without a space (a pasted blob) is broken anywhere instead: a
90,000-character run otherwise froze the window for minutes.

Why tool output is previewed and long messages are collapsed: laying out text costs time in
proportion to its length, at every width the window takes, and a pasted 190 KB log froze the
window for seconds on opening its session and again on every resize. The card shows a command's
first lines; a message longer than a few screens (``COLLAPSE_CHARS`` / ``COLLAPSE_LINES``) shows
its first ``COLLAPSED_LINES`` lines and "Show all". Both expand into a height-capped, scrolling
plain-text view of everything, created only when the reader asks for it, which lays out only
the lines it shows. ``WrappingText`` also measures once per (width, text): a layout asks a row's
height for the same width many times, and each answer used to lay the whole text out twice.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from enum import Enum

from PySide6.QtCore import QCoreApplication, QEvent, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QPaintEvent,
    QPalette,
    QTextCursor,
    QTextOption,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSizePolicy,
    QTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.bridge_contract import (
    AssistantMessageItem,
    AttestationChoice,
    BranchMarkerItem,
    ContinuationMarkerItem,
    NoticeItem,
    ThinkingItem,
    ToolCardItem,
    ToolCardStatus,
    TranscriptItem,
    UserMessageItem,
)
from app.visible_text import visible
from renderer import theme
from renderer.park_text import Severity, describe
from renderer.quoted_text import FENCE, apply_quoted_format, split_quoted
from renderer.settle_panel import SettlePanel, confirmation_text
from renderer.tinted_panel import TintedPanel

PREVIEW_LINES = 6
"""Output lines a tool card shows before "Show N more lines"."""
PREVIEW_CHARS = 800
"""At most this much output is shown unexpanded (one very long line is previewed, too)."""
OUTPUT_VIEW_LINES = 18
"""Height cap of the expanded output view, in lines; it scrolls beyond that."""


COLLAPSE_CHARS = 12_000
"""A message longer than this (characters) is shown collapsed, with "Show all"."""
COLLAPSE_LINES = 150
"""... and so is one of more lines than this."""
COLLAPSED_LINES = 20
"""A collapsed message shows its first lines, up to this many ..."""
COLLAPSED_CHARS = 2_000
"""... and at most this many characters of them (one very long line is cut, too)."""
EXPANDED_VIEW_LINES = 30
"""Height cap of an expanded message's view, in lines; it scrolls beyond that."""

LONG_RUN = 2_000
"""From this many characters without whitespace on, a text wraps anywhere (see above)."""


def _has_long_run(text: str) -> bool:
    return len(text) >= LONG_RUN and any(len(word) >= LONG_RUN for word in text.split())


def _tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


def collapsed_head(text: str) -> str | None:
    """The beginning a long text is shown by while collapsed, or None: short enough to show."""
    if len(text) <= COLLAPSE_CHARS and text.count("\n", 0, COLLAPSE_CHARS) < COLLAPSE_LINES:
        return None
    cut = -1
    for _ in range(COLLAPSED_LINES):
        cut = text.find("\n", cut + 1, COLLAPSED_CHARS)
        if cut < 0:
            break
    head = text[:cut] if cut >= 0 else text[:COLLAPSED_CHARS]
    return head.rstrip("\n") + "\n…"


def _plain_view(accessible_name: str, font: QFont | None = None) -> QPlainTextEdit:
    """A read-only plain-text view that scrolls; it lays out only the lines it shows."""
    view = QPlainTextEdit()
    view.setReadOnly(True)
    view.setUndoRedoEnabled(False)
    if font is not None:
        view.setFont(font)
    view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
    view.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    view.setTabChangesFocus(True)
    view.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
    view.setAccessibleName(accessible_name)
    return view


def _set_view_text(view: QPlainTextEdit, text: str, shown: str) -> None:
    """Show ``text`` in ``view``, which shows ``shown`` now (streaming: append the new part)."""
    if shown == text:
        return
    mode = (
        QTextOption.WrapMode.WrapAnywhere
        if _has_long_run(text)
        else QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere
    )
    if view.wordWrapMode() != mode:
        view.setWordWrapMode(mode)
    if shown and text.startswith(shown):
        cursor = QTextCursor(view.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text[len(shown) :])
    else:
        view.setPlainText(text)


def _cap_height(view: QPlainTextEdit, lines: int) -> None:
    frame = 2 * view.frameWidth() + 2 * math.ceil(view.document().documentMargin())
    view.setFixedHeight(lines * view.fontMetrics().lineSpacing() + frame)


class WrappingText(QTextEdit):
    """Read-only, selectable plain text that wraps anywhere a line needs it and is exactly as
    tall as its text for the width it gets. Wheel scrolling goes to the transcript."""

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.setReadOnly(True)
        self.setAcceptRichText(False)
        self.setUndoRedoEnabled(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setContentsMargins(0, 0, 0, 0)
        self.setViewportMargins(0, 0, 0, 0)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setLineWrapMode(QTextEdit.LineWrapMode.WidgetWidth)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.setTabChangesFocus(True)
        self.document().setDocumentMargin(0)
        self.viewport().setAutoFillBackground(False)
        self.viewport().setCursor(Qt.CursorShape.IBeamCursor)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self._text = ""
        self._heights: dict[tuple[int, int, int], int] = {}
        self.document().contentsChanged.connect(self._forget_heights)
        self.setText(text)

    def text(self) -> str:
        return self._text

    def setText(self, text: str) -> None:  # noqa: N802 (QLabel-like API; always plain text)
        if text == self._text:
            return
        previous, self._text = self._text, text
        mode = (
            QTextOption.WrapMode.WrapAnywhere
            if _has_long_run(text)
            else QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere
        )
        if self.wordWrapMode() != mode:
            self.setWordWrapMode(mode)
        if previous and text.startswith(previous):
            cursor = QTextCursor(self.document())  # streaming: append the new part only
            cursor.movePosition(QTextCursor.MoveOperation.End)
            cursor.insertText(text[len(previous) :])
        else:
            self.setPlainText(text)
        self.updateGeometry()

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt override)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt override)
        margins = self.viewportMargins()
        key = (width, margins.left() + margins.right(), margins.top() + margins.bottom())
        known = self._heights.get(key)
        if known is None:
            known = self._heights[key] = self._measure(width)
        return known

    def _forget_heights(self) -> None:
        self._heights.clear()

    def _measure(self, width: int) -> int:
        margins = self.viewportMargins()
        frame = 2 * self.frameWidth()
        text_width = max(width - margins.left() - margins.right() - frame, 1)
        document = self.document()
        if document.textWidth() != text_width:
            document.setTextWidth(text_width)
        height = math.ceil(document.size().height())
        # The width the text is shown at is put back when it is painted (``paintEvent``), not
        # here: a layout asks for several widths in a row and usually settles on the last one,
        # so putting each back would lay the whole text out twice per question.
        height = max(height, self.fontMetrics().lineSpacing())
        return height + margins.top() + margins.bottom() + frame

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 (Qt override)
        shown = float(self.viewport().width())
        if self.lineWrapMode() is QTextEdit.LineWrapMode.WidgetWidth and (
            self.document().textWidth() != shown
        ):
            self.document().setTextWidth(shown)  # a measurement left another width
        super().paintEvent(event)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        width = self.width() if self.width() > 0 else 400
        return QSize(self.fontMetrics().averageCharWidth() * 8, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(self.fontMetrics().averageCharWidth() * 4, self.fontMetrics().lineSpacing())

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802 (Qt override)
        event.ignore()  # nothing to scroll here; the transcript scrolls

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._forget_heights()

    def set_text_colour(self, colour: QColor) -> None:
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Text, colour)
        self.setPalette(palette)


def _text_label(text: str = "", *, selectable: bool = True) -> QLabel:
    """A word-wrapped label for Maka's own sentences (never for untrusted text)."""
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def _set_text_colour(label: QWidget, colour: QColor) -> None:
    palette = label.palette()
    palette.setColor(QPalette.ColorRole.WindowText, colour)
    palette.setColor(QPalette.ColorRole.Text, colour)
    label.setPalette(palette)


class Tone(Enum):
    """How a status chip is coloured: severities, success, or neutral (the user's own choice)."""

    INFO = "info"
    WARN = "warn"
    ERROR = "error"
    SUCCESS = "success"
    NEUTRAL = "neutral"


# Codes the main process puts in a card's ``park_reason`` to say more about a running or failed
# call than the status can: it waits for the user's permission, the user stopped it, or the
# user (or the permission mode) refused it.
AWAITING_PERMISSION = "awaiting_permission"
CANCELLED = "cancelled"
PERMISSION_DENIED = "permission_denied"
HOST_STOPPED = "host_stopped"
WINDOW_LOST = "window_lost"
"""The window's own mark of a call it showed running when its main process died: the record
may hold its result already (never a code the main process sends)."""

# (status, qualifying code or None) -> (chip label, sentence, tone)
_STATUS_COPY: dict[tuple[ToolCardStatus, str | None], tuple[str, str, Tone]] = {
    (ToolCardStatus.RUNNING, None): ("Running…", "", Tone.INFO),
    (ToolCardStatus.RUNNING, AWAITING_PERMISSION): ("Waiting for permission", "", Tone.WARN),
    (ToolCardStatus.SUCCEEDED, None): ("Done", "", Tone.SUCCESS),
    (ToolCardStatus.FAILED, None): ("Failed", "", Tone.ERROR),
    (ToolCardStatus.FAILED, CANCELLED): ("Stopped", "", Tone.NEUTRAL),
    (ToolCardStatus.FAILED, PERMISSION_DENIED): ("Denied", "", Tone.NEUTRAL),
    (ToolCardStatus.INDETERMINATE, HOST_STOPPED): (
        "Interrupted",
        "Maka stopped while this call was running; it may have run in part. Check before "
        "doing it again.",
        Tone.WARN,
    ),
    (ToolCardStatus.INDETERMINATE, WINDOW_LOST): (
        "Interrupted",
        "Maka stopped before this window heard how this call ended: it may have finished, or "
        "run in part. The next start of Maka reads what was recorded; check before doing it "
        "again.",
        Tone.WARN,
    ),
    (ToolCardStatus.INDETERMINATE, None): (
        "Outcome unknown",
        "Maka cannot tell whether this call took effect. Check before doing it again.",
        Tone.WARN,
    ),
    (ToolCardStatus.PARKED, None): (
        "Parked",
        # (a card the user can answer says so in its question; update_item)
        "Recovery could not settle this call, and no answer can: Safe resume does not continue "
        "its run, and the call is never retried.",
        Tone.WARN,
    ),
    (ToolCardStatus.NOT_DISPATCHED, None): ("Not run", "This call never started.", Tone.INFO),
    (ToolCardStatus.COMPLETED_AFTER_RECOVERY, None): (
        "Completed after recovery",
        "The result was confirmed after a restart.",
        Tone.SUCCESS,
    ),
}

RECONCILE_MATCHES_PRIOR_STATE = "reconcile_matches_prior_state"
"""The park reason of a file write recovery found not done (the file as it was before it)."""


def _asks_to_confirm(item: ToolCardItem) -> bool:
    """A file write recovery found untouched, in the session's latest run: the user may confirm
    that finding (it did not run), the one answer a parked call takes."""
    return (
        item.settleable
        and item.status is ToolCardStatus.PARKED
        and item.park_reason == RECONCILE_MATCHES_PRIOR_STATE
        and item.attestation is None
    )


_UNUSUAL = frozenset({ToolCardStatus.INDETERMINATE, ToolCardStatus.PARKED, ToolCardStatus.FAILED})


def _tone(item: ToolCardItem) -> Tone:
    if item.attestation is AttestationChoice.NOT_RUN:
        return Tone.NEUTRAL  # the user's own answer: nothing went wrong, nothing happened
    return _STATUS_COPY[_status_key(item)][2]


def _status_key(item: ToolCardItem) -> tuple[ToolCardStatus, str | None]:
    key = (item.status, item.park_reason)
    return key if key in _STATUS_COPY else (item.status, None)


def status_label(status: ToolCardStatus, qualifier: str | None = None) -> str:
    key = (status, qualifier) if (status, qualifier) in _STATUS_COPY else (status, None)
    return _tr(_STATUS_COPY[key][0])


def _tone_colour(tone: Tone, palette: QPalette) -> QColor:
    match tone:
        case Tone.SUCCESS:
            return theme.success(palette)
        case Tone.NEUTRAL:
            return theme.muted_text(palette)
        case _:
            return theme.accent(Severity(tone.value), palette)


_EXIT_CODE = re.compile(
    r"exit code (-?\d+)(?: · (\d+) background process(?:es)? stopped)?(: |\n|$)"
)


@dataclass(frozen=True, slots=True)
class ResultParts:
    """A result summary split for display: a status line ("exit code 0"), the output, and
    whether the output is only its last line (what older summaries carry)."""

    status_line: str
    output: str
    last_line_only: bool = False


def split_result(summary: str) -> ResultParts:
    match = _EXIT_CODE.match(summary)
    if match is None:
        return ResultParts("", summary)
    rest = summary[match.end() :]
    status = _tr("exit code {code}").replace("{code}", match.group(1))
    if match.group(2) is not None:
        stopped = int(match.group(2))
        status += " · " + (
            _tr("1 background process it left running was stopped when it ended")
            if stopped == 1
            else _tr(
                "{count} background processes it left running were stopped when it ended"
            ).replace("{count}", f"{stopped:,}")
        )
    return ResultParts(status, rest, match.group(3) == ": " and "\n" not in rest)


def preview_of(output: str) -> tuple[str, int]:
    """The first lines of ``output`` and how many lines are not in them (0: all shown)."""
    lines = output.split("\n")
    if len(lines) <= PREVIEW_LINES + 1 and len(output) <= PREVIEW_CHARS:
        return output, 0
    head = "\n".join(lines[:PREVIEW_LINES])
    hidden = max(len(lines) - PREVIEW_LINES, 0)
    if len(head) > PREVIEW_CHARS:
        head = head[:PREVIEW_CHARS] + "…"
        hidden = len(lines) - head.count("\n") - 1
    return head, hidden


class MessageWidget(TintedPanel):
    """A user or assistant message; the user's is tinted, the assistant's sits on the page.

    A message longer than a few screens is collapsed to its first lines; "Show all" swaps them
    for a scrolling view of the whole text (see the module's notes)."""

    def __init__(self, item: UserMessageItem | AssistantMessageItem) -> None:
        super().__init__()
        self._is_user = isinstance(item, UserMessageItem)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(14, 10, 14, 12)
        self._layout.setSpacing(4)
        self.role_label = QLabel(_tr("You") if self._is_user else _tr("Maka"))
        font = self.role_label.font()
        font.setBold(True)
        self.role_label.setFont(font)
        self.text_label = WrappingText()
        self._had_quotes = False
        self._full_text = ""
        self._collapsible = False
        self._expanded = False
        self.full_view: QPlainTextEdit | None = None
        self.expand_button = QToolButton()
        self.expand_button.setAutoRaise(True)
        self.expand_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.expand_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.expand_button.clicked.connect(lambda: self.set_expanded(not self._expanded))
        self.expand_button.setVisible(False)
        self._layout.addWidget(self.role_label)
        self._layout.addWidget(self.text_label)
        self._layout.addWidget(self.expand_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.update_item(item)
        self.refresh_colours()

    @property
    def collapsed(self) -> bool:
        """Whether only the beginning of a long message is shown."""
        return self._collapsible and not self._expanded

    @property
    def full_text(self) -> str:
        """The whole message as shown (control characters made visible, fences removed)."""
        return self._full_text

    def update_item(self, item: TranscriptItem) -> None:
        assert isinstance(item, UserMessageItem | AssistantMessageItem)
        quoted = not self._is_user and FENCE in item.text
        if quoted:
            shown, spans = split_quoted(item.text)
        else:
            shown, spans = visible(item.text), []
        self._full_text = shown
        head = collapsed_head(shown)
        self._collapsible = head is not None
        if head is not None:
            shown = head
            spans = [(a, min(b, len(head))) for a, b in spans if a < len(head)]
        self.quoted_spans: list[tuple[int, int]] = spans
        self.text_label.setText(shown)
        if spans or self._had_quotes:
            apply_quoted_format(self.text_label.document(), spans)
            self._had_quotes = bool(spans)
        self._render_expansion()

    def set_expanded(self, expanded: bool) -> None:
        """Show the whole of a long message (``True``) or its first lines only."""
        self._expanded = expanded and self._collapsible
        self._render_expansion()

    def _render_expansion(self) -> None:
        if not self._collapsible:
            self._expanded = False
        self.expand_button.setVisible(self._collapsible)
        self.expand_button.setArrowType(
            Qt.ArrowType.UpArrow if self._expanded else Qt.ArrowType.DownArrow
        )
        if self._collapsible:
            size = f"{len(self._full_text):,}"
            lines = f"{self._full_text.count(chr(10)) + 1:,}"
            self.expand_button.setText(
                _tr("Show less")
                if self._expanded
                else _tr("Show all ({lines} lines, {size} characters)")
                .replace("{lines}", lines)
                .replace("{size}", size)
            )
        self.text_label.setVisible(not self._expanded)
        if self._expanded:
            view = self.full_view
            if view is None:
                view = self.full_view = _plain_view(_tr("Whole message"))
                view.setFrameShape(QFrame.Shape.NoFrame)
                view.viewport().setAutoFillBackground(False)
                self._layout.insertWidget(self._layout.indexOf(self.text_label) + 1, view)
                self.refresh_colours()
            _set_view_text(view, self._full_text, view.toPlainText())
            _cap_height(view, EXPANDED_VIEW_LINES)
            view.setVisible(True)
        elif self.full_view is not None:
            self.full_view.setVisible(False)

    def refresh_colours(self) -> None:
        palette = self.palette()
        if self._is_user:
            accent = theme.accent(Severity.INFO, palette)
            self.set_colours(theme.tinted_background(accent, palette), theme.subtle_border(palette))
        else:
            self.set_colours(palette.color(QPalette.ColorRole.Base), theme.subtle_border(palette))
        _set_text_colour(self.role_label, theme.muted_text(palette))
        self.text_label.set_text_colour(palette.color(QPalette.ColorRole.WindowText))
        if self.full_view is not None:
            _set_text_colour(self.full_view, palette.color(QPalette.ColorRole.WindowText))


class ThinkingWidget(QWidget):
    """Thinking is collapsed: one muted line that expands on demand."""

    def __init__(self, item: ThinkingItem) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(2)
        self.toggle = QToolButton()
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setText(_tr("Thinking"))
        self.toggle.toggled.connect(self._on_toggled)
        self.body_label = WrappingText()
        self.body_label.setViewportMargins(22, 0, 0, 4)
        font = self.body_label.font()
        font.setItalic(True)
        self.body_label.setFont(font)
        self.body_label.setVisible(False)
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.body_label)
        self.update_item(item)

    def update_item(self, item: TranscriptItem) -> None:
        assert isinstance(item, ThinkingItem)
        self.body_label.setText(visible(item.text))

    def _on_toggled(self, shown: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        self.body_label.setVisible(shown)


class ToolCardWidget(TintedPanel):
    """Tool name, status chip, arguments, result, and what an unusual status means.

    A result is shown as an optional status line ("exit code 0", kept apart from the output)
    and the output's first lines; "Show N more lines" swaps the preview for a read-only,
    height-capped view of everything the card received.

    A call whose outcome is unknown and that the user may settle asks "Did it run?"
    (:class:`renderer.settle_panel.SettlePanel`, emitting ``settle_requested``); once settled the
    card reads "Confirmed by you: it ran" (or "it did not run") with the time and the note."""

    settle_requested = Signal(str, bool, str)
    """(tool call id, ran, note or "")"""

    def __init__(self, item: ToolCardItem) -> None:
        super().__init__()
        self._item = item
        self.settle_panel: SettlePanel | None = None
        self._output = ""
        self._expanded = False
        self._hidden_lines = 0
        self.output_view: QPlainTextEdit | None = None
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(14, 10, 14, 10)
        self._layout.setSpacing(6)
        header = QHBoxLayout()
        header.setSpacing(8)
        self.name_label = QLabel()
        self.name_label.setTextFormat(Qt.TextFormat.PlainText)
        name_font = theme.monospace_font()
        name_font.setBold(True)
        self.name_label.setFont(name_font)
        self.name_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.chip = QLabel()
        self.chip.setObjectName("StatusChip")
        header.addWidget(self.name_label, 1)
        header.addWidget(self.chip)
        self._layout.addLayout(header)
        self.args_label = WrappingText()
        self.args_label.setFont(theme.monospace_font())
        self.explanation_label = _text_label()
        self.status_line = QLabel()
        self.status_line.setTextFormat(Qt.TextFormat.PlainText)
        self.status_line.setFont(theme.monospace_font())
        self.result_label = WrappingText()
        self.result_label.setFont(theme.monospace_font())
        self.more_button = QToolButton()
        self.more_button.setAutoRaise(True)
        self.more_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.more_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.more_button.clicked.connect(lambda: self.set_expanded(not self._expanded))
        self._layout.addWidget(self.args_label)
        self._layout.addWidget(self.explanation_label)
        self._layout.addWidget(self.status_line)
        self._layout.addWidget(self.result_label)
        self._layout.addWidget(self.more_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.update_item(item)

    @property
    def item(self) -> ToolCardItem:
        return self._item

    @property
    def expanded(self) -> bool:
        return self._expanded

    def update_item(self, item: TranscriptItem) -> None:
        assert isinstance(item, ToolCardItem)
        self._item = item
        key = _status_key(item)
        self.name_label.setText(visible(item.tool_name))
        self.name_label.setToolTip(visible(item.tool_name))
        self.setToolTip(item.tool_call_id)
        self.chip.setText(status_label(*key))
        self.args_label.setText(visible(item.args_summary, strict=True))
        self.args_label.setVisible(bool(item.args_summary))
        sentence = _tr(_STATUS_COPY[key][1]) if _STATUS_COPY[key][1] else ""
        if _asks_to_confirm(item):
            sentence = _tr("Recovery could not settle this call on its own; it waits for you.")
        if item.park_reason and key[1] is None:
            reason = describe(item.park_reason)
            sentence = f"{sentence} {reason.sentence}".strip()
        if item.attestation is not None:
            self.chip.setText(_tr("Confirmed by you"))
            sentence = confirmation_text(item.attestation, item.attested_at, item.attestation_note)
        self._show_settle_panel(item)
        self.explanation_label.setText(sentence)
        self.explanation_label.setVisible(bool(sentence))
        self._show_result(split_result(visible(item.result_summary)))
        self.refresh_colours()

    def _show_settle_panel(self, item: ToolCardItem) -> None:
        confirming = _asks_to_confirm(item)
        asking = confirming or (
            item.settleable
            and item.status is ToolCardStatus.INDETERMINATE
            and item.attestation is None
        )
        if asking and self.settle_panel is None:
            panel = SettlePanel()
            panel.chosen.connect(
                lambda ran, note: self.settle_requested.emit(self._item.tool_call_id, ran, note)
            )
            self._layout.insertWidget(self._layout.indexOf(self.explanation_label) + 1, panel)
            self.settle_panel = panel
        # The question shows the command in full; the one-line summary would repeat it.
        self.args_label.setVisible(bool(item.args_summary) and not asking)
        if self.settle_panel is not None:
            if asking:
                self.settle_panel.set_not_run_only(confirming)
                self.settle_panel.set_command(item.args_full or item.args_summary)
                self.settle_panel.set_folder_note(item.settle_folder)
                self.settle_panel.set_waiting(False)
                self.settle_panel.show_status("")
            self.settle_panel.setVisible(asking)

    def settle_refused(self, reason: str) -> None:
        """The main process did not record the answer: say why, and ask again."""
        if self.settle_panel is not None:
            self.settle_panel.refused(reason)

    def _show_result(self, parts: ResultParts) -> None:
        status = parts.status_line
        if parts.last_line_only and parts.output:
            status = _tr("{status} · last line of output:").replace("{status}", status)
        self.status_line.setText(status)
        self.status_line.setVisible(bool(status))
        self._output = parts.output
        preview, hidden = preview_of(parts.output)
        self.result_label.setText(preview)
        self._hidden_lines = hidden
        if not hidden:
            self._expanded = False
        self._render_expansion()

    def set_expanded(self, expanded: bool) -> None:
        """Show everything the card received (``True``) or the first lines only."""
        self._expanded = expanded and self._hidden_lines > 0
        self._render_expansion()

    def _render_expansion(self) -> None:
        expandable = self._hidden_lines > 0
        self.more_button.setVisible(expandable)
        self.more_button.setArrowType(
            Qt.ArrowType.UpArrow if self._expanded else Qt.ArrowType.DownArrow
        )
        if self._expanded:
            self.more_button.setText(_tr("Show fewer lines"))
        elif self._hidden_lines == 1:
            self.more_button.setText(_tr("Show 1 more line"))
        else:
            self.more_button.setText(
                _tr("Show {count} more lines").replace("{count}", f"{self._hidden_lines:,}")
            )
        self.result_label.setVisible(bool(self._output) and not self._expanded)
        if self._expanded:
            view = self._ensure_output_view()
            _set_view_text(view, self._output, view.toPlainText())
            lines = min(self._output.count("\n") + 1, OUTPUT_VIEW_LINES)
            if len(self._output) > PREVIEW_CHARS * 2:
                lines = OUTPUT_VIEW_LINES
            _cap_height(view, lines)
            view.setVisible(True)
        elif self.output_view is not None:
            self.output_view.setVisible(False)

    def _ensure_output_view(self) -> QPlainTextEdit:
        if self.output_view is None:
            view = _plain_view(_tr("Tool output"), theme.monospace_font())
            self._layout.insertWidget(self._layout.indexOf(self.result_label) + 1, view)
            self.output_view = view
        return self.output_view

    def refresh_colours(self) -> None:
        palette = self.palette()
        tone = _tone(self._item)
        chip_colour = _tone_colour(tone, palette)
        unusual = self._item.status in _UNUSUAL and tone is not Tone.NEUTRAL
        base = palette.color(QPalette.ColorRole.Base)
        fill = theme.blend(chip_colour, base, 0.08) if unusual else base
        self.set_colours(fill, theme.subtle_border(palette), chip_colour if unusual else None)
        chip_fill = theme.tinted_background(chip_colour, palette)
        self.chip.setStyleSheet(
            f"#StatusChip {{ color: {chip_colour.name()}; background: {chip_fill.name()};"
            f" border: 1px solid {theme.blend(chip_colour, base, 0.4).name()};"
            " border-radius: 9px; padding: 1px 8px; font-weight: 600; }"
        )
        muted = theme.muted_text(palette)
        _set_text_colour(self.args_label, muted)
        _set_text_colour(self.status_line, muted)
        self.result_label.set_text_colour(palette.color(QPalette.ColorRole.WindowText))


class NoticeWidget(TintedPanel):
    def __init__(self, item: NoticeItem) -> None:
        super().__init__()
        self._severity = Severity(item.level.value)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 8, 12, 8)
        self.text_label = WrappingText()
        layout.addWidget(self.text_label)
        self.update_item(item)

    def update_item(self, item: TranscriptItem) -> None:
        assert isinstance(item, NoticeItem)
        self._severity = Severity(item.level.value)
        text = item.text
        if item.code:
            known = describe(item.code)
            text = item.text or known.sentence
            self.setToolTip(item.code)
        self.text_label.setText(visible(text))
        self.refresh_colours()

    def refresh_colours(self) -> None:
        palette = self.palette()
        accent = theme.accent(self._severity, palette)
        self.set_colours(
            theme.tinted_background(accent, palette), theme.subtle_border(palette), accent
        )


def continued_words(after: str, automatic: bool = False) -> str:
    """The continuation marker's words: what Safe resume continued after, and whether
    automatic resume started it rather than the user. "After Maka stopped", not "after restart":
    the run may have been ended by another host that took its session over (a shared ledger)."""
    if automatic:
        return _tr("Continued by automatic resume after Maka stopped")
    if after == "stop":
        return _tr("Continued with Safe resume after the stop")
    if after == "failure":
        return _tr("Continued with Safe resume after the failure")
    return _tr("Continued with Safe resume after Maka stopped")


class ContinuationMarkerWidget(QWidget):
    """A labelled rule: everything below belongs to a continuation run."""

    def __init__(self, item: ContinuationMarkerItem) -> None:
        super().__init__()
        self.setAccessibleName(_tr("Continuation"))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 6, 0, 6)
        layout.setSpacing(10)
        self.left_rule = QFrame()
        self.left_rule.setFrameShape(QFrame.Shape.HLine)
        self.right_rule = QFrame()
        self.right_rule.setFrameShape(QFrame.Shape.HLine)
        self._automatic = False
        self.label = QLabel(continued_words(item.after))
        font = self.label.font()
        font.setBold(True)
        self.label.setFont(font)
        layout.addWidget(self.left_rule, 1)
        layout.addWidget(self.label)
        layout.addWidget(self.right_rule, 1)
        self.update_item(item)
        self.refresh_colours()

    def set_automatic(self, automatic: bool) -> None:
        """Automatic resume started this continuation (its ``resume.started`` said so)."""
        self._automatic = automatic
        self.update_item(self._item)

    def update_item(self, item: TranscriptItem) -> None:
        assert isinstance(item, ContinuationMarkerItem)
        self._item = item
        self.label.setText(continued_words(item.after, self._automatic or item.automatic))
        tip = _tr("New run {run}").replace("{run}", item.run_id)
        if item.source_run_id:
            tip += "\n" + _tr("continues run {run}").replace("{run}", item.source_run_id)
        self.setToolTip(tip)

    def refresh_colours(self) -> None:
        _set_text_colour(self.label, theme.accent(Severity.INFO, self.palette()))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self.refresh_colours()


class BranchMarkerWidget(QWidget):
    """A labelled rule after the point another session was branched from this one:
    "Branched here → <its title>", with a link that opens it."""

    open_requested = Signal(str)
    """The branch's session id: the user asked to open it."""

    def __init__(self, item: BranchMarkerItem) -> None:
        super().__init__()
        self.session_id: str = item.branch_session_id
        self.text = ""
        self.setAccessibleName(_tr("Branched here"))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 4)
        layout.setSpacing(10)
        self.left_rule = QFrame()
        self.left_rule.setFrameShape(QFrame.Shape.HLine)
        self.right_rule = QFrame()
        self.right_rule.setFrameShape(QFrame.Shape.HLine)
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(
            Qt.TextInteractionFlag.LinksAccessibleByMouse
            | Qt.TextInteractionFlag.LinksAccessibleByKeyboard
        )
        self.label.linkActivated.connect(lambda _link: self.open_requested.emit(self.session_id))
        layout.addWidget(self.left_rule, 1)
        layout.addWidget(self.label)
        layout.addWidget(self.right_rule, 1)
        self.update_item(item)
        self.refresh_colours()

    def update_item(self, item: TranscriptItem) -> None:
        assert isinstance(item, BranchMarkerItem)
        self.session_id = item.branch_session_id
        title = visible(item.branch_title or item.branch_session_id)
        if len(title) > 60:
            title = title[:59] + "…"
        self.text = _tr("Branched here → {title}").replace("{title}", title)
        safe = html.escape(title)
        self.label.setText(html.escape(_tr("Branched here →")) + f' <a href="open">{safe}</a>')
        self.setToolTip(
            _tr("Session {session} continues from this point (open it)").replace(
                "{session}", item.branch_session_id
            )
        )

    def refresh_colours(self) -> None:
        _set_text_colour(self.label, theme.accent(Severity.INFO, self.palette()))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self.refresh_colours()


ItemWidget = (
    MessageWidget
    | ThinkingWidget
    | ToolCardWidget
    | NoticeWidget
    | ContinuationMarkerWidget
    | BranchMarkerWidget
)


def widget_for(item: TranscriptItem) -> ItemWidget:
    match item:
        case UserMessageItem() | AssistantMessageItem():
            return MessageWidget(item)
        case ThinkingItem():
            return ThinkingWidget(item)
        case ToolCardItem():
            return ToolCardWidget(item)
        case NoticeItem():
            return NoticeWidget(item)
        case ContinuationMarkerItem():
            return ContinuationMarkerWidget(item)
        case BranchMarkerItem():
            return BranchMarkerWidget(item)
