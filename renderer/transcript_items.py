"""One widget per transcript item kind: messages, thinking, tool cards, notices, markers.

Why plain-text everywhere: model output and tool results are untrusted; rendering them as
rich text would let a result inject links or markup into the window. Colours are recomputed
on palette changes (see :mod:`renderer.tinted_panel`).
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from app.bridge_contract import (
    AssistantMessageItem,
    ContinuationMarkerItem,
    NoticeItem,
    ThinkingItem,
    ToolCardItem,
    ToolCardStatus,
    TranscriptItem,
    UserMessageItem,
)
from renderer import theme
from renderer.park_text import Severity, describe
from renderer.tinted_panel import TintedPanel


def _tr(text: str) -> str:
    return QCoreApplication.translate("Transcript", text)


def _text_label(text: str = "", *, selectable: bool = True) -> QLabel:
    label = QLabel(text)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def _set_text_colour(label: QLabel, colour: QColor) -> None:
    palette = label.palette()
    palette.setColor(QPalette.ColorRole.WindowText, colour)
    label.setPalette(palette)


# status -> (label, sentence, severity or None for success)
_STATUS_COPY: dict[ToolCardStatus, tuple[str, str, Severity | None]] = {
    ToolCardStatus.RUNNING: ("Running…", "", Severity.INFO),
    ToolCardStatus.SUCCEEDED: ("Done", "", None),
    ToolCardStatus.FAILED: ("Failed", "", Severity.ERROR),
    ToolCardStatus.INDETERMINATE: (
        "Outcome unknown",
        "Maka cannot tell whether this call took effect. Check before doing it again.",
        Severity.WARN,
    ),
    ToolCardStatus.PARKED: (
        "Parked",
        "Recovery could not settle this call; it waits for you.",
        Severity.WARN,
    ),
    ToolCardStatus.NOT_DISPATCHED: ("Not run", "This call never started.", Severity.INFO),
    ToolCardStatus.COMPLETED_AFTER_RECOVERY: (
        "Completed after recovery",
        "The result was confirmed after a restart.",
        None,
    ),
}


def status_label(status: ToolCardStatus) -> str:
    return _tr(_STATUS_COPY[status][0])


class MessageWidget(TintedPanel):
    """A user or assistant message; the user's is tinted, the assistant's sits on the page."""

    def __init__(self, item: UserMessageItem | AssistantMessageItem) -> None:
        super().__init__()
        self._is_user = isinstance(item, UserMessageItem)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 12)
        layout.setSpacing(4)
        self.role_label = QLabel(_tr("You") if self._is_user else _tr("Maka"))
        font = self.role_label.font()
        font.setBold(True)
        self.role_label.setFont(font)
        self.text_label = _text_label()
        layout.addWidget(self.role_label)
        layout.addWidget(self.text_label)
        self.update_item(item)
        self.refresh_colours()

    def update_item(self, item: TranscriptItem) -> None:
        assert isinstance(item, UserMessageItem | AssistantMessageItem)
        self.text_label.setText(item.text)

    def refresh_colours(self) -> None:
        palette = self.palette()
        if self._is_user:
            accent = theme.accent(Severity.INFO, palette)
            self.set_colours(theme.tinted_background(accent, palette), theme.subtle_border(palette))
        else:
            self.set_colours(palette.color(QPalette.ColorRole.Base), theme.subtle_border(palette))
        _set_text_colour(self.role_label, theme.muted_text(palette))


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
        self.body_label = _text_label()
        self.body_label.setContentsMargins(22, 0, 0, 4)
        font = self.body_label.font()
        font.setItalic(True)
        self.body_label.setFont(font)
        self.body_label.setVisible(False)
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.body_label)
        self.update_item(item)

    def update_item(self, item: TranscriptItem) -> None:
        assert isinstance(item, ThinkingItem)
        self.body_label.setText(item.text)

    def _on_toggled(self, shown: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        self.body_label.setVisible(shown)


class ToolCardWidget(TintedPanel):
    """Tool name, status chip, arguments, result, and what an unusual status means."""

    def __init__(self, item: ToolCardItem) -> None:
        super().__init__()
        self._item = item
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 10)
        layout.setSpacing(6)
        header = QHBoxLayout()
        header.setSpacing(8)
        self.name_label = QLabel()
        name_font = theme.monospace_font()
        name_font.setBold(True)
        self.name_label.setFont(name_font)
        self.chip = QLabel()
        self.chip.setObjectName("StatusChip")
        header.addWidget(self.name_label)
        header.addStretch(1)
        header.addWidget(self.chip)
        layout.addLayout(header)
        self.args_label = _text_label()
        self.args_label.setFont(theme.monospace_font())
        self.explanation_label = _text_label()
        self.result_label = _text_label()
        self.result_label.setFont(theme.monospace_font())
        layout.addWidget(self.args_label)
        layout.addWidget(self.explanation_label)
        layout.addWidget(self.result_label)
        self.update_item(item)

    @property
    def item(self) -> ToolCardItem:
        return self._item

    def update_item(self, item: TranscriptItem) -> None:
        assert isinstance(item, ToolCardItem)
        self._item = item
        self.name_label.setText(item.tool_name)
        self.setToolTip(item.tool_call_id)
        self.chip.setText(status_label(item.status))
        self.args_label.setText(item.args_summary)
        self.args_label.setVisible(bool(item.args_summary))
        sentence = _tr(_STATUS_COPY[item.status][1]) if _STATUS_COPY[item.status][1] else ""
        if item.park_reason:
            reason = describe(item.park_reason)
            sentence = f"{sentence} {reason.sentence}".strip()
        self.explanation_label.setText(sentence)
        self.explanation_label.setVisible(bool(sentence))
        self.result_label.setText(item.result_summary)
        self.result_label.setVisible(bool(item.result_summary))
        self.refresh_colours()

    def refresh_colours(self) -> None:
        palette = self.palette()
        severity = _STATUS_COPY[self._item.status][2]
        chip_colour = (
            theme.success(palette) if severity is None else theme.accent(severity, palette)
        )
        unusual = self._item.status in (
            ToolCardStatus.INDETERMINATE,
            ToolCardStatus.PARKED,
            ToolCardStatus.FAILED,
        )
        base = palette.color(QPalette.ColorRole.Base)
        fill = theme.blend(chip_colour, base, 0.08) if unusual else base
        self.set_colours(fill, theme.subtle_border(palette), chip_colour if unusual else None)
        chip_fill = theme.tinted_background(chip_colour, palette)
        self.chip.setStyleSheet(
            f"#StatusChip {{ color: {chip_colour.name()}; background: {chip_fill.name()};"
            f" border: 1px solid {theme.blend(chip_colour, base, 0.4).name()};"
            " border-radius: 9px; padding: 1px 8px; font-weight: 600; }"
        )
        _set_text_colour(self.args_label, theme.muted_text(palette))


class NoticeWidget(TintedPanel):
    def __init__(self, item: NoticeItem) -> None:
        super().__init__()
        self._severity = Severity(item.level.value)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 8, 12, 8)
        self.text_label = _text_label()
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
        self.text_label.setText(text)
        self.refresh_colours()

    def refresh_colours(self) -> None:
        palette = self.palette()
        accent = theme.accent(self._severity, palette)
        self.set_colours(
            theme.tinted_background(accent, palette), theme.subtle_border(palette), accent
        )


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
        self.label = QLabel(_tr("Continued after restart with Safe resume"))
        font = self.label.font()
        font.setBold(True)
        self.label.setFont(font)
        layout.addWidget(self.left_rule, 1)
        layout.addWidget(self.label)
        layout.addWidget(self.right_rule, 1)
        self.update_item(item)
        self.refresh_colours()

    def update_item(self, item: TranscriptItem) -> None:
        assert isinstance(item, ContinuationMarkerItem)
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


ItemWidget = (
    MessageWidget | ThinkingWidget | ToolCardWidget | NoticeWidget | ContinuationMarkerWidget
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
