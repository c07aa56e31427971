"""A desktop that cannot start, started from a terminal: the printed refusal is the answer and
the command ends (docs/design/cli.md: ``maka gui`` "exits 1" with it). It also opened the
"Maka cannot start" dialog and waited until someone closed it, so ``maka gui | tail`` and a
script calling ``maka gui`` hung. Started from a launcher (no terminal) the dialog still shows."""

from __future__ import annotations

import io
from typing import Any, ClassVar

import pytest

from main_process import refusal_screen


class _Stderr(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


class _Launcher:
    launched: ClassVar[list[tuple[Any, ...]]] = []

    def __init__(self) -> None:
        self.running = False
        self.exited = self

    def connect(self, slot: Any) -> None:
        del slot

    def launch(self, *args: Any, **kwargs: Any) -> None:
        _Launcher.launched.append(args)


@pytest.mark.parametrize("tty", [True, False])
def test_the_dialog_is_for_a_launcher_and_a_terminal_gets_the_line(
    monkeypatch: pytest.MonkeyPatch, tty: bool
) -> None:
    stderr = _Stderr(tty)
    _Launcher.launched = []
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setattr(refusal_screen, "display_available", lambda: True)
    monkeypatch.setattr(refusal_screen, "RendererLauncher", _Launcher)
    refusal_screen.show_refusal("store_corrupt", "the database is damaged", windows_enabled=True)
    assert "maka: error [store_corrupt]: the database is damaged" in stderr.getvalue()
    assert len(_Launcher.launched) == (0 if tty else 1)
