"""Screenshots of the desktop with ``maka tui`` in tmux beside it (docs/screenshots/host-*.png).

The real desktop (main process and renderer) runs on Xvfb and owns a data folder; ``maka tui``
runs in a detached tmux session on the same folder, attached to the desktop as a terminal client.
Each picture is the window (ImageMagick ``import``) beside the tmux pane as it stands
(``tmux capture-pane``, drawn in a monospace font), in one PNG:

- ``host-tui-turn-in-window.png``: a turn typed in the TUI streams live into the window's
  transcript; its permission question is open in both;
- ``host-tui-answered-in-terminal.png``: answered in the TUI, the window's prompt says where;
- ``host-window-turn-in-tui.png``: a turn sent from the window shows live in the TUI, saying who
  drives it, with its question there too;
- ``host-window-turn-answered-in-tui.png``: that question answered in the TUI; the window says so.

::

    .venv/bin/python -m tests.helpers.host_screenshots docs/screenshots

Needs ``Xvfb``, ``xdotool``, ``import``/``convert`` and ``tmux``. The X server, the desktop and the
tmux session are started here and ended in ``finally`` (the tmux session by its own name).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers.app_screenshots import Scene, _x, press, type_text, xvfb
from tests.helpers.maka_process import maka_executable

TMUX_SESSION = "maka-host-shots"
PANE_COLUMNS, PANE_ROWS = 92, 44


def _bash(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "name": "bash", "args": {"command": command}}


SCRIPT: list[list[dict[str, Any]]] = [
    [{"text": "Hello. Ready when you are."}],
    [
        {
            "text": "I'll add a line to notes.txt from here.",
            "toolCalls": [_bash("t1", "echo 'typed in the terminal' >> notes.txt")],
        },
        {"text": "Added a line to notes.txt."},
    ],
    [
        {
            "text": "Counting the lines of notes.txt.",
            "toolCalls": [_bash("w1", "wc -l notes.txt")],
        },
        {"text": "notes.txt has 1 line."},
    ],
]


def _tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout


def _pane() -> str:
    return _tmux("capture-pane", "-p", "-t", TMUX_SESSION)


def _wait(what: Callable[[], bool], label: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {label}; pane:\n{_pane()}")
        time.sleep(0.2)


def _pane_png(path: Path) -> None:
    """The pane's text drawn in a monospace font, dark like a terminal."""
    text = _pane().rstrip("\n").expandtabs()
    lines = [line[:PANE_COLUMNS] for line in text.splitlines()] or [""]
    # ImageMagick reads escapes in a label ("%", "\\"), its policy here forbids @file and a
    # label is at most a few thousand characters: one label per line, stacked.
    labels = [
        "label:" + (_kept_indent(line).replace("\\", "\\\\").replace("%", "%%") or " ")
        for line in lines
    ]
    title = f"tmux: maka tui ({PANE_COLUMNS}x{PANE_ROWS})"
    subprocess.run(
        [
            "convert",
            "-background",
            "#1e1e1e",
            "-fill",
            "#e6e6e6",
            "-font",
            "DejaVu-Sans-Mono",
            "-pointsize",
            "13",
            "-bordercolor",
            "#1e1e1e",
            "(",
            *labels,
            "-append",
            ")",
            "-border",
            "12",
            "(",
            "-background",
            "#3a3a3a",
            "-fill",
            "#ffffff",
            "-font",
            "DejaVu-Sans-Mono-Bold",
            "-pointsize",
            "13",
            f"label:{title}",
            "-bordercolor",
            "#3a3a3a",
            "-border",
            "6",
            ")",
            "+swap",
            "-background",
            "#3a3a3a",
            "-append",
            str(path),
        ],
        check=True,
        timeout=60,
    )


def _kept_indent(line: str) -> str:
    """A label drops leading spaces: no-break spaces keep a line's indentation."""
    stripped = line.lstrip(" ")
    return "\u00a0" * (len(line) - len(stripped)) + stripped


def _shot(window: str, out: Path, name: str) -> None:
    """The window and the pane side by side (tops aligned) in one PNG."""
    time.sleep(1.5)  # let the window repaint before grabbing the X framebuffer
    with tempfile.TemporaryDirectory() as temp:
        window_png = Path(temp) / "window.png"
        pane_png = Path(temp) / "pane.png"
        _x("import", "-window", window, str(window_png))
        _pane_png(pane_png)
        subprocess.run(
            [
                "convert",
                str(window_png),
                str(pane_png),
                "-background",
                "#101010",
                "-gravity",
                "North",
                "+append",
                str(out / name),
            ],
            check=True,
            timeout=60,
        )
    print(f"wrote {out / name}")


def host_scene(root: Path, out: Path) -> None:
    scene = Scene(root, "host-tui", SCRIPT)
    assert scene.run("say hello") == 0
    session = _session_of(scene)
    with scene.app() as window:
        env = {
            **scene.env,
            "MAKA_DATA_DIR": str(scene.data),
            "COLUMNS": str(PANE_COLUMNS),
            "LINES": str(PANE_ROWS),
        }
        command = " ".join(
            [
                "env",
                *(f"{key}={shlex.quote(value)}" for key, value in env.items()),
                *map(shlex.quote, maka_executable()),
                "tui",
                "--session",
                session,
                "--permission-mode",
                "ask",
            ]
        )
        _tmux(
            "new-session",
            "-d",
            "-s",
            TMUX_SESSION,
            "-x",
            str(PANE_COLUMNS),
            "-y",
            str(PANE_ROWS),
            command,
        )
        try:
            _wait(lambda: "served by the running Maka" in _pane(), "the TUI to attach")
            # A turn typed in the terminal: live in the window, its question in both.
            _tmux("send-keys", "-t", TMUX_SESSION, "add a line to notes.txt", "Enter")
            _wait(lambda: "Allow? [y/N]" in _pane(), "the terminal's question")
            _shot(window, out, "host-tui-turn-in-window.png")
            _tmux("send-keys", "-t", TMUX_SESSION, "y", "Enter")
            _wait(lambda: "Added a line" in _pane(), "the terminal's turn to end")
            _shot(window, out, "host-tui-answered-in-terminal.png")
            # A turn sent from the window: live in the terminal, its question there too.
            type_text(window, "how many lines has notes.txt?")
            press(window, "ctrl+Return")
            _wait(lambda: "the turn you are viewing" in _pane(), "the window's question")
            _shot(window, out, "host-window-turn-in-tui.png")
            _tmux("send-keys", "-t", TMUX_SESSION, "y", "Enter")
            _wait(lambda: "ended completed" in _pane(), "the window's turn to end")
            _shot(window, out, "host-window-turn-answered-in-tui.png")
            _tmux("send-keys", "-t", TMUX_SESSION, "/quit", "Enter")
            time.sleep(1.0)
        finally:
            subprocess.run(
                ["tmux", "kill-session", "-t", TMUX_SESSION], check=False, capture_output=True
            )


def _session_of(scene: Scene) -> str:
    from tests.helpers.maka_run import committed_runs

    return committed_runs(scene.data)[0][0].session_id


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.helpers.host_screenshots OUTPUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for tool in ("Xvfb", "xdotool", "import", "convert", "tmux"):
        if shutil.which(tool) is None:
            print(f"{tool} is required", file=sys.stderr)
            return 1
    os.environ.pop("TMUX", None)  # a tmux session of its own, also when run inside tmux
    with tempfile.TemporaryDirectory(prefix="maka-host-shots-") as temp, xvfb():
        host_scene(Path(temp), out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
