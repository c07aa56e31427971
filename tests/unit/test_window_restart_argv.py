"""A window that ``maka host`` started restarts the desktop (``maka gui``), not another host."""

from __future__ import annotations

import sys

import pytest

from main_process import renderer_launcher
from main_process.renderer_launcher import window_restart_argv


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["maka", "host"], ["gui"]),
        (["maka", "--data-dir", "/d", "host"], ["--data-dir", "/d", "gui"]),
        (["maka", "--data-dir", "host", "host"], ["--data-dir", "host", "gui"]),
        (["maka", "gui"], ["gui"]),
    ],
)
def test_host_becomes_gui_in_the_restart_command(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], expected: list[str]
) -> None:
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(renderer_launcher, "is_frozen", lambda: False)
    restarted = window_restart_argv()
    assert restarted[-len(expected) :] == expected
    assert restarted[: -len(expected)] == renderer_launcher.restart_argv()[: -len(expected)]
