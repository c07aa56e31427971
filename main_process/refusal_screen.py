"""How the main process tells the user it cannot start (store refused, recovery failed).

The main process has no widgets (QtCore only), so it prints ``maka: error [code]: message`` on
stderr (always: that is the answer on a terminal, over ssh and in CI) and, when a window could be
seen, starts this same program in its renderer role with ``--refusal CODE`` (the message travels in
``MAKA_REFUSAL_MESSAGE``) and waits until the user closes that dialog. Nothing was modified by the
time this runs: the store refused before writing, or recovery failed inside its transactions.
"""

from __future__ import annotations

import os
import secrets
import sys

from PySide6.QtCore import QEventLoop

from main_process.renderer_launcher import RendererLauncher

ENV_REFUSAL_MESSAGE = "MAKA_REFUSAL_MESSAGE"


def print_error(code: str, message: str) -> None:
    print(f"maka: error [{code}]: {message}", file=sys.stderr, flush=True)


def display_available() -> bool:
    """Whether a window could be seen: not offscreen/minimal, and on X11/Wayland a display."""
    platform = os.environ.get("QT_QPA_PLATFORM", "")
    if platform.startswith(("offscreen", "minimal", "vnc")):
        return False
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def show_refusal(code: str, message: str, *, windows_enabled: bool) -> None:
    """Print the refusal and, if a window can be shown, show it and wait for it to close.
    Started from a terminal (its stderr one), the printed line is the answer: the command ends
    there, as docs/design/cli.md says, instead of waiting on a dialog (a launcher has no
    terminal to print to, and gets the dialog)."""
    print_error(code, message)
    if not (windows_enabled and display_available()) or _on_a_terminal():
        return
    launcher = RendererLauncher()
    loop = QEventLoop()
    launcher.exited.connect(lambda *_: loop.quit())
    launcher.launch(
        "",
        secrets.token_urlsafe(32),
        extra_arguments=("--refusal", code),
        extra_environment={ENV_REFUSAL_MESSAGE: message[:2000]},
    )
    if launcher.running:
        loop.exec()


def _on_a_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError, OSError):
        return False
