"""Screenshots of the real two-process application under Xvfb (docs/screenshots/app-*.png).

Unlike the widget screenshots (fake bridge), these run the real ``maka``: main process, renderer
process, store, scripted provider, real tools and failpoints. Each scene prepares its own data
directory through the real commands, starts ``maka`` on the X server, drives it with the keyboard
(``xdotool``: Ctrl+R is Safe resume) and captures the window (ImageMagick ``import``)::

    .venv/bin/python -m tests.helpers.app_screenshots docs/screenshots

Needs ``Xvfb``, ``xdotool`` and ``import`` on the PATH. The X server is started here, with its pid
kept, and killed in ``finally``; so is every ``maka``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers.maka_process import maka_executable, start_main
from tests.helpers.maka_run import maka, scripted_env, write_script

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
DISPLAY = ":93"

TOOL_CARDS_SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "thinking": "The user wants a greeting file, then a check of the folder.",
            "text": "I'll write the file first.",
            "toolCalls": [
                {
                    "id": "w1",
                    "name": "write_file",
                    "args": {"path": "hello.txt", "content": "hi\n"},
                }
            ],
        },
        {
            "text": "Now reading it back and listing the folder.",
            "toolCalls": [
                {"id": "r1", "name": "read_file", "args": {"path": "hello.txt"}},
                {"id": "b1", "name": "bash", "args": {"command": "ls -l"}},
            ],
        },
        {"text": "Done: hello.txt says hi, and it is the only file in the folder."},
    ]
]

COUNT_CALL = {"id": "c1", "name": "bash", "args": {"command": "echo x >> count.txt"}}
RESUME_SCRIPT: list[list[dict[str, Any]]] = [
    [
        {"text": "Counting.", "toolCalls": [COUNT_CALL]},
        {
            "text": "The count was written before the restart; reading it back.",
            "toolCalls": [{"id": "r2", "name": "read_file", "args": {"path": "count.txt"}}],
        },
        {"delayMs": 15000, "text": "Counted once."},
    ]
]


MIGRATE_CALL = {
    "id": "m1",
    "name": "bash",
    "args": {
        "command": "echo 'ALTER TABLE accounts ADD COLUMN migrated boolean' >> migrations.log"
    },
}
SETTLE_SCRIPT: list[list[dict[str, Any]]] = [
    [
        {"text": "Applying the migration.", "toolCalls": [MIGRATE_CALL]},
        {"text": "The migration was applied (you confirmed it); nothing else to do."},
    ]
]


@contextmanager
def xvfb() -> Iterator[None]:
    server = subprocess.Popen(
        ["Xvfb", DISPLAY, "-screen", "0", "1400x900x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        yield
    finally:
        server.terminate()
        server.wait(10)


class Scene:
    def __init__(self, root: Path, name: str, script: list[list[dict[str, Any]]]) -> None:
        self.root = root / name
        self.data = self.root / "data"
        self.work = self.root / "project"
        self.work.mkdir(parents=True)
        self.env = scripted_env(write_script(self.root / "script.json", script))

    def run(self, prompt: str, failpoint: str | None = None) -> int:
        env = {**self.env, **FLAG}
        if failpoint:
            env["MAKA_FAILPOINT"] = failpoint
        args = ["run", "--cwd", str(self.work), "--permission-mode", "auto", prompt]
        return maka(args, self.data, env=env).returncode

    def repair(self) -> None:
        """One headless start with the flag off: recovery repairs the interrupted run, so the
        next start shows the banner instead of resuming automatically."""
        main = start_main(self.data, self.env).wait_ready()
        time.sleep(1.0)
        main.terminate()
        main.stop()

    @contextmanager
    def app(self) -> Iterator[str]:
        env = dict(os.environ)
        env.update(self.env)
        env.update(FLAG)
        env.update(
            {
                "MAKA_DATA_DIR": str(self.data),
                "DISPLAY": DISPLAY,
                "QT_QPA_PLATFORM": "xcb",
            }
        )
        for key in ("MAKA_NO_RENDERER", "MAKA_FAILPOINT", "XAUTHORITY"):
            env.pop(key, None)
        main = subprocess.Popen([*maka_executable()], env=env)
        try:
            try:
                window = _window(main)
            except RuntimeError:
                log = self.data / "logs" / "main.log"
                print(log.read_text() if log.exists() else "(no log)", file=sys.stderr)
                print(_x("xwininfo", "-root", "-tree"), file=sys.stderr)
                raise
            yield window
        finally:
            main.send_signal(signal.SIGTERM)
            try:
                main.wait(30)
            except subprocess.TimeoutExpired:
                main.kill()
                main.wait(10)


def _x(*args: str) -> str:
    env = dict(os.environ, DISPLAY=DISPLAY)
    return subprocess.run(
        list(args), env=env, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def _window(main: subprocess.Popen[bytes]) -> str:
    """The renderer's main window: the largest top-level window named "Maka" (Qt also creates
    a 1x1 helper window with the same name)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if main.poll() is not None:
            raise RuntimeError(f"maka exited with {main.returncode}")
        found = subprocess.run(
            ["xdotool", "search", "--name", "Maka$"],
            env=dict(os.environ, DISPLAY=DISPLAY),
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        sized = [(_area(window), window) for window in found]
        sized = [item for item in sized if item[0] > 10_000]
        if sized:
            return max(sized)[1]
        time.sleep(0.2)
    raise RuntimeError("the Maka window did not appear")


def _area(window: str) -> int:
    result = subprocess.run(
        ["xdotool", "getwindowgeometry", window],
        env=dict(os.environ, DISPLAY=DISPLAY),
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    for line in result.splitlines():
        if "Geometry:" in line:
            width, height = line.split("Geometry:")[1].strip().split("x")
            return int(width) * int(height)
    return 0


def capture(window: str, path: Path, settle_s: float = 1.5) -> None:
    time.sleep(settle_s)  # let the window repaint before grabbing the X framebuffer
    _x("import", "-window", window, str(path))
    print(f"wrote {path}")


def capture_with_dialogs(window: str, path: Path, settle_s: float = 1.5) -> None:
    """The window with the dialogs above it: a grab of the screen cut to the window (a grab of
    the window alone leaves a dialog's area black)."""
    time.sleep(settle_s)
    geometry = _x("xdotool", "getwindowgeometry", "--shell", window)
    values = dict(line.split("=", 1) for line in geometry.splitlines() if "=" in line)
    crop = f"{values['WIDTH']}x{values['HEIGHT']}+{values['X']}+{values['Y']}"
    _x("import", "-window", "root", "-crop", crop, str(path))
    print(f"wrote {path}")


def press(window: str, keys: str) -> None:
    _x("xdotool", "windowfocus", "--sync", window)
    _x("xdotool", "key", "--clearmodifiers", *keys.split())


def click(window: str, x: int, y: int) -> None:
    _x("xdotool", "mousemove", "--window", window, str(x), str(y))
    _x("xdotool", "click", "1")


def press_in_dialog(keys: str) -> None:
    """Keys to the active window (a dialog above the main window)."""
    _x("xdotool", "key", "--clearmodifiers", *keys.split())


def type_text(window: str, text: str) -> None:
    _x("xdotool", "windowfocus", "--sync", window)
    _x("xdotool", "type", "--delay", "20", text)


SETTLE_NOTE_XY = (730, 521)
SETTLE_RAN_XY = (360, 551)
"""Where the card's note field and "It ran" button are in the window (measured on the
first screenshot)."""


def settle_scene(root: Path, out: Path, *, clicks: bool = True) -> None:
    """A bash call killed inside its command (P4): the card asks "Did it run?"; the user notes
    what they checked and answers "It ran"; the card reads "Confirmed by you" and the banner
    offers Safe resume; Safe resume continues from the confirmed call."""
    scene = Scene(root, "settle", SETTLE_SCRIPT)
    assert scene.run("apply the pending migration", failpoint="P4") == -9
    scene.repair()
    with scene.app() as window:
        time.sleep(2.0)
        press(window, "ctrl+r")  # Safe resume parks on the unknown outcome
        capture(window, out / "app-settle-question.png", 2.5)
        if not clicks:
            return
        click(window, *SETTLE_NOTE_XY)
        type_text(window, "migrations.log has the line; the column exists")
        click(window, *SETTLE_RAN_XY)
        capture(window, out / "app-settle-confirmed.png", 2.5)
        press(window, "ctrl+r")
        capture(window, out / "app-settle-resumed.png", 3.0)


SETTLE_CHANGED_RAN_XY = (358, 560)
"""Where It ran is on the card of the snapshots-on settle scene (its folder note takes a line)."""


def settle_changed_scene(root: Path, out: Path) -> None:
    """The settle scene with snapshots on: the card says what answering does to the folder;
    a file is edited after the card was shown, and It ran is refused with the card's note
    as it is now (``settle_folder_changed``), nothing recorded."""
    scene = Scene(root, "settle-changed", SETTLE_SCRIPT)
    scene.env["MAKA_WORKSPACE_CHECKPOINTS"] = "on"
    (scene.work / "main.py").write_text("print('hi')\n")
    assert scene.run("apply the pending migration", failpoint="P4") == -9
    scene.repair()
    with scene.app() as window:
        time.sleep(2.0)
        press(window, "ctrl+r")
        time.sleep(2.5)
        with (scene.work / "main.py").open("a", encoding="utf-8") as handle:
            handle.write("x\n")  # the user's edit after the card was shown
        click(window, *SETTLE_CHANGED_RAN_XY)
        capture(window, out / "app-settle-folder-changed.png", 2.5)


LONG_JOB = {
    "id": "j1",
    "name": "bash",
    "args": {"command": "echo started > started.txt; sleep 60; echo done >> late.txt"},
}
SURVIVOR_SCRIPT: list[list[dict[str, Any]]] = [
    [{"text": "Starting the long job.", "toolCalls": [LONG_JOB]}, {"text": "Done."}]
]
ORPHAN_SCRIPT: list[list[dict[str, Any]]] = [
    [{"text": "Ready when you are."}],
    [{"text": "Starting the long job.", "toolCalls": [LONG_JOB]}, {"text": "Done."}],
]
ALLOW_XY = (1107, 592)
STOP_IT_XY = (1015, 108)
"""Where the permission prompt's Allow and the banner's Stop it are (measured on the first
screenshots of these scenes)."""


def _kill_while_running(scene: Scene, failpoint: str | None) -> None:
    """``maka run`` killed (SIGKILL) while its command sleeps."""
    env = dict(os.environ)
    env.update(scene.env)
    env.update({"MAKA_DATA_DIR": str(scene.data), "QT_QPA_PLATFORM": "offscreen"})
    env.pop("MAKA_FAILPOINT", None)
    if failpoint:
        env["MAKA_FAILPOINT"] = failpoint
    args = ["run", "--cwd", str(scene.work), "--permission-mode", "auto", "run the long job"]
    host = subprocess.Popen([*maka_executable(), *args], env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (scene.work / "started.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    host.send_signal(signal.SIGKILL)
    host.wait(10)


def survivor_scene(root: Path, out: Path) -> None:
    """A command that outlived the crash (made on purpose: the supervisor is disabled by the
    test-only failpoint): the banner names it and offers Stop it; after Stop it the banner
    shows the park that still holds."""
    scene = Scene(root, "survivor", SURVIVOR_SCRIPT)
    _kill_while_running(scene, "tool_supervisor_disabled")
    try:
        with scene.app() as window:
            time.sleep(2.0)
            click(window, 350, 205)  # "Details"
            capture(window, out / "app-survivor-stop-it.png", 2.0)
            click(window, *STOP_IT_XY)
            capture(window, out / "app-survivor-stopped.png", 5.0)
    finally:
        _stop_recorded_commands(scene.data)


def _stop_recorded_commands(data: Path) -> None:
    """Stop the command this scene left running, by its recorded identity (pid + create time)."""
    from runtime.tools.process_identity import stop_tool_process
    from storage.ledger.ledger_store import open_store

    store = open_store(data, read_only=True)
    try:
        records = list(store.list_tool_processes())
    finally:
        store.close()
    for record in records:
        stop_tool_process(record, grace_seconds=1.0)


def _wait_log(data: Path, text: str, *, main_log_count: int, timeout_s: float = 30) -> None:
    """Wait until ``text`` appears ``main_log_count`` times in the main log (each start of the
    main process writes its own lines to the same log)."""
    log = data / "logs" / "main.log"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count(text) >= main_log_count:
            return
        time.sleep(0.1)


def orphan_scene(root: Path, out: Path) -> None:
    """The main process is SIGKILLed while a command runs: the window says Maka stopped
    unexpectedly and offers Restart Maka; a new start then replaces the window."""
    scene = Scene(root, "orphan", ORPHAN_SCRIPT)
    assert scene.run("hello") == 0
    env = dict(os.environ)
    env.update(scene.env)
    env.update({"MAKA_DATA_DIR": str(scene.data), "DISPLAY": DISPLAY, "QT_QPA_PLATFORM": "xcb"})
    for key in ("MAKA_NO_RENDERER", "MAKA_FAILPOINT", "XAUTHORITY"):
        env.pop(key, None)
    main = subprocess.Popen([*maka_executable()], env=env)
    second: subprocess.Popen[bytes] | None = None
    try:
        window = _window(main)
        time.sleep(2.0)
        press(window, "ctrl+l")  # the composer
        type_text(window, "run the long job")
        press(window, "ctrl+Return")
        capture(window, out / "app-permission-before-crash.png", 2.5)
        click(window, *ALLOW_XY)
        capture(window, out / "app-command-running.png", 2.0)
        main.send_signal(signal.SIGKILL)
        main.wait(10)
        capture(window, out / "app-orphaned-window.png", 3.0)
        second = subprocess.Popen([*maka_executable()], env=env)
        _wait_log(scene.data, "renderer connection 1 authenticated", main_log_count=2)
        time.sleep(1.0)
        _x("xdotool", "windowraise", window)  # the new start's window opened on top of it
        capture(window, out / "app-window-superseded.png", 0.5)
        time.sleep(8.0)
        print("late.txt exists:", (scene.work / "late.txt").exists())
    finally:
        for process in (main, second):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)


def folder_scene(root: Path, out: Path) -> None:
    """A turn killed at P6, then its folder moved away: automatic resume parks with
    ``workspace_folder_missing``; the banner names the folder and offers Locate folder… and
    Remove session…."""
    scene = Scene(root, "folder", RESUME_SCRIPT)
    assert scene.run("count once", failpoint="P6") == -9
    shutil.move(str(scene.work), str(scene.root / "moved-project"))
    with scene.app() as window:
        capture(window, out / "app-banner-folder-missing.png", 3.0)


def crash_loop_scene(root: Path, out: Path) -> None:
    """A turn killed at P6; the automatic Safe resume of it killed right after its admission:
    the next start leaves it to the user (the crash-loop guard), and the banner says why."""
    scene = Scene(root, "crash-loop", RESUME_SCRIPT)
    assert scene.run("count once", failpoint="P6") == -9
    env = {**scene.env, **FLAG, "MAKA_FAILPOINT": "after_continuation_admission_committed"}
    crashing = start_main(scene.data, env)
    assert crashing.process.wait(60) == -9
    with scene.app() as window:
        capture(window, out / "app-banner-crash-loop.png", 3.0)


def drift_restart_scene(root: Path, out: Path) -> None:
    """A park on changed files, then Maka closed and the files changed again before the next
    start: the main process checks the folder again before the banner shows. Files changed
    differently: the banner lists them as they are now; changed back: Safe resume is offered
    as usual."""
    from tests.helpers.maka_process import main_log

    for name, back in (("drift-changed", False), ("drift-back", True)):
        scene = Scene(root, name, RESUME_SCRIPT)
        scene.env = scripted_env(
            write_script(scene.root / "script.json", RESUME_SCRIPT), None, checkpoints=True
        )
        assert scene.run("count once", failpoint="P8") == -9
        (scene.work / "count.txt").write_text("edited by hand\n")
        first = start_main(scene.data, {**scene.env, **FLAG}).wait_ready()
        deadline = time.monotonic() + 30
        while "auto-resume outcome: ResumeParked" not in main_log(scene.data):
            assert time.monotonic() < deadline, main_log(scene.data)
            time.sleep(0.1)
        first.terminate()
        first.stop()
        (scene.work / "count.txt").write_text("x\n")  # the edit undone while Maka was closed
        if not back:
            (scene.work / "notes.txt").write_text("written while Maka was closed\n")
        with scene.app() as window:
            shot = "app-drift-rechecked-back.png" if back else "app-drift-rechecked-changed.png"
            capture(window, out / shot, 3.0)


def restore_point_scene(root: Path, out: Path) -> None:
    """Parks whose restored copy would not be the folder at the stop: a stale snapshot (the
    run killed right after its bash call's result, P6) and a snapshot gone from the store (an
    earlier one is offered). The note beside "Continue in a restored copy…" says what the copy
    would hold."""
    from tests.helpers.maka_run import committed_runs

    for name, failpoint in (("restore-stale", "P6"), ("restore-earlier", "P8")):
        scene = Scene(root, name, RESUME_SCRIPT)
        scene.env = scripted_env(
            write_script(scene.root / "script.json", RESUME_SCRIPT), None, checkpoints=True
        )
        assert scene.run("count once", failpoint=failpoint) == -9
        if name == "restore-earlier":
            facts = [
                e["actions"]["workspaceCheckpoint"]
                for e in committed_runs(scene.data)[0][1]
                if "workspaceCheckpoint" in e.get("actions", {})
            ]
            commit = facts[-1]["commitId"]
            [loose] = (scene.data / "checkpoints").glob(f"*.git/objects/{commit[:2]}/{commit[2:]}")
            loose.unlink()  # the snapshot at the stop is gone; the one at the start is not
        with scene.app() as window:
            capture(window, out / f"app-banner-{name}.png", 3.0)
            if name == "restore-stale":  # View › Timeline under that tall banner
                press(window, "ctrl+t")
                capture(window, out / "app-timeline-under-banner.png", 2.0)


MARKUP_CALL = {
    "id": "c1",
    "name": "bash",
    "args": {"command": 'echo "<h1>Welcome</h1>" > index.html'},
}
MARKUP_SCRIPT: list[list[dict[str, Any]]] = [
    [{"text": "Writing the page.", "toolCalls": [MARKUP_CALL]}, {"text": "Written."}]
]


def markup_scene(root: Path, out: Path) -> None:
    """A command that looks like markup (``echo "<h1>Welcome</h1>" > index.html``), the run
    killed right after its result (P6): the banner's note beside "Continue in a restored copy…"
    names the command as it is, tags and all, where Qt once showed a heading."""
    scene = Scene(root, "markup", MARKUP_SCRIPT)
    scene.env = scripted_env(
        write_script(scene.root / "script.json", MARKUP_SCRIPT), None, checkpoints=True
    )
    assert scene.run("write the welcome page", failpoint="P6") == -9
    with scene.app() as window:
        capture(window, out / "app-banner-command-with-tags.png", 3.0)


REPORT_CALL = {"id": "c2", "name": "write_file", "args": {"path": "report.txt", "content": "1\n"}}
DECISION_SCRIPT: list[list[dict[str, Any]]] = [
    [
        {"text": "Counting.", "toolCalls": [COUNT_CALL]},
        {"text": "Writing the report.", "toolCalls": [REPORT_CALL]},
        {"text": "The count is in report.txt."},
    ]
]
RESTORE_XY = (423, 221)
REBASELINE_XY = (424, 249)
DECISION_ALLOW_XY = (1107, 587)
"""Where the banner's two buttons (a park listing two files) and the write's Allow are
(measured on the first screenshots of these scenes)."""


def _drift_park(root: Path, name: str) -> Scene:
    """``maka run`` (checkpoints on, as by default) killed by SIGKILL while the model thinks
    after its first call (its snapshot taken), then the folder changed: count.txt edited and
    notes.txt added."""
    scene = Scene(root, name, DECISION_SCRIPT)
    scene.env = scripted_env(write_script(scene.root / "script.json", DECISION_SCRIPT))
    scene.env.pop("MAKA_WORKSPACE_CHECKPOINTS")  # the product's default: on
    stopping = [[{"text": "Counting.", "toolCalls": [COUNT_CALL]}, {"hang": True}]]
    env = dict(os.environ)
    env.update(scene.env)
    env.update(FLAG)
    env.update(
        {
            "MAKA_DATA_DIR": str(scene.data),
            "QT_QPA_PLATFORM": "offscreen",
            "MAKA_SCRIPT_FILE": str(write_script(scene.root / "stopping.json", stopping)),
        }
    )
    env.pop("MAKA_FAILPOINT", None)
    args = ["run", "--cwd", str(scene.work), "--permission-mode", "auto", "count once"]
    host = subprocess.Popen([*maka_executable(), *args], env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (scene.work / "count.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2.0)  # the call's result and the snapshot after it are committed
    host.send_signal(signal.SIGKILL)
    host.wait(10)
    (scene.work / "count.txt").write_text("edited by hand\n")
    (scene.work / "notes.txt").write_text("written while Maka was closed\n")
    return scene


def decisions_scene(root: Path, out: Path) -> None:
    """A park on changed files and the user's two ways forward (docs/design/workspace.md section 4):
    the banner with its two buttons, the restored copy's confirmation, the continuation in the copy
    (its write lands there; the transcript marks the move), and the same park continued with
    the current files; then a park whose snapshots are all gone (only the current files)."""
    restore = _drift_park(root, "restore")
    with restore.app() as window:
        capture(window, out / "app-banner-drift-decisions.png", 3.0)
        click(window, *RESTORE_XY)
        capture_with_dialogs(window, out / "app-restore-confirm.png", 1.5)
        _x("xdotool", "key", "Return")  # the dialog's default button: Make the copy
        time.sleep(3.0)
        click(window, *DECISION_ALLOW_XY)
        capture(window, out / "app-continued-in-restored-copy.png", 3.0)
    copy = restore.root / "project-restored-1"
    assert (copy / "report.txt").read_text() == "1\n", "the write lands in the copy"
    assert not (restore.work / "report.txt").exists(), "the user's folder is left alone"

    current = _drift_park(root, "current")
    with current.app() as window:
        time.sleep(3.0)
        click(window, *REBASELINE_XY)
        time.sleep(3.0)
        click(window, *DECISION_ALLOW_XY)
        capture(window, out / "app-continued-with-current-files.png", 3.0)
    assert (current.work / "report.txt").read_text() == "1\n"

    gone = _drift_park(root, "gone")
    shutil.rmtree(gone.data / "checkpoints")
    with gone.app() as window:
        capture(window, out / "app-banner-no-snapshot-left.png", 3.0)


def refusal_scene(root: Path, out: Path) -> None:
    """A finished session, then Maka started with the OpenAI-compatible provider and no model:
    the message typed right after the window opens (the cursor starts in the composer) is given
    back with the reason and the setting to fix."""
    scene = Scene(root, "refusal", [[{"text": "Hello."}]])
    assert scene.run("say hello") == 0
    scene.env = {
        **scene.env,
        "MAKA_PROVIDER": "openai",
        "MAKA_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }
    scene.env.pop("MAKA_MODEL", None)
    with scene.app() as window:
        time.sleep(2.0)
        type_text(window, "carry on please")
        press(window, "ctrl+Return")
        capture_with_dialogs(window, out / "app-not-sent-provider-settings.png", 2.0)


LONG_LOG = "".join(
    f"2026-11-30T10:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker[{i % 7}] request {i} served "
    f"in {i % 97} ms path=/api/v1/items/{i}\n"
    for i in range(1_400)
)[:120_000]
"""A pasted log: as long as one command-line argument may be (the prompt of ``maka run``)."""
LONG_REPLY = "Here is the token again, whole:\n" + "0123456789abcdef" * 12_000
"""A reply of one 192,000-character line."""
SHOW_ALL_XY = (470, 225)
"""Where the pasted log's "Show all" is in the 1200x800 window (measured on the first
screenshot: the transcript follows the newest item, so the log's end shows above the reply)."""


def long_content_scene(root: Path, out: Path) -> None:
    """A session with a 120 KB log pasted as a message and a 190 KB one-line reply: both are
    collapsed to their first lines with "Show all"; then the first is expanded."""
    scene = Scene(root, "long", [[{"text": LONG_REPLY}]])
    assert scene.run("What failed here?\n" + LONG_LOG) == 0
    with scene.app() as window:
        _x("xdotool", "windowsize", "--sync", window, "1200", "800")
        capture(window, out / "app-long-content-collapsed.png", 3.0)
        click(window, *SHOW_ALL_XY)
        capture(window, out / "app-long-content-expanded.png", 2.0)


def small_banners_scene(root: Path, out: Path) -> None:
    """Banners at the window's minimum size (720x480): the running text takes two lines at
    most, with More for the rest, and the transcript stays in view."""
    idle = Scene(root, "small-idle", RESUME_SCRIPT)
    assert idle.run("count once", failpoint="P6") == -9
    idle.repair()
    with idle.app() as window:
        _x("xdotool", "windowsize", "--sync", window, "720", "480")
        capture(window, out / "app-banner-small-idle.png", 3.0)
    parked = Scene(root, "small-parked", RESUME_SCRIPT)
    assert parked.run("count once", failpoint="P3") == -9
    with parked.app() as window:
        _x("xdotool", "windowsize", "--sync", window, "720", "480")
        capture(window, out / "app-banner-small-parked.png", 3.0)
    # A park on changed files on an 800x600 screen: its two ways forward keep their notes in
    # their tooltips, so the banner leaves the transcript in view.
    drift = _drift_park(root, "small-drift")
    with drift.app() as window:
        _x("xdotool", "windowsize", "--sync", window, "760", "540")
        capture(window, out / "app-banner-small-drift.png", 3.0)


NOTE_SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "text": "Writing the release note.",
            "toolCalls": [
                {
                    "id": "n1",
                    "name": "write_file",
                    "args": {"path": "NOTES.md", "content": "# 0.2\n\n- Safe resume\n"},
                }
            ],
        },
        {"text": "NOTES.md is written; the release note is ready for review."},
    ]
]


def auto_write_scene(root: Path, out: Path) -> None:
    """The everyday crash with a user's defaults: snapshots on, a Git repository with
    uncommitted work, the process killed right after an allowed ``write_file`` (P6). The next
    start resumes the session by itself (the ledger proves the write: ``workspace_verified``)
    and the continuation finishes the turn without writing again."""
    from tests.helpers.maka_process import main_log

    scene = Scene(root, "auto-write", NOTE_SCRIPT)
    scene.env = scripted_env(
        write_script(scene.root / "script.json", NOTE_SCRIPT), None, checkpoints=True
    )
    git = ["git", "-C", str(scene.work), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (scene.work / "README.md").write_text("A project.\n")
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    (scene.work / "README.md").write_text("A project, with work in progress.\n")
    assert scene.run("write the release note", failpoint="P6") == -9
    with scene.app() as window:
        deadline = time.monotonic() + 60
        while "auto-resume outcome: ResumeStarted" not in main_log(scene.data):
            assert time.monotonic() < deadline, main_log(scene.data)
            time.sleep(0.2)
        capture(window, out / "app-auto-resume-after-write.png", 4.0)
    assert (scene.work / "NOTES.md").read_text() == "# 0.2\n\n- Safe resume\n"
    assert (scene.work / "README.md").read_text() == "A project, with work in progress.\n"


BRANCH_SCRIPT: list[list[dict[str, Any]]] = [
    [
        {
            "text": "Writing the notes.",
            "toolCalls": [
                {
                    "id": "w1",
                    "name": "write_file",
                    "args": {"path": "notes.txt", "content": "parser: keep the old grammar\n"},
                }
            ],
        },
        {"text": "notes.txt is written."},
    ],
    [
        {
            "text": "Cleaning up.",
            "toolCalls": [{"id": "d1", "name": "bash", "args": {"command": "rm notes.txt"}}],
        },
        {"text": "notes.txt is deleted."},
    ],
]
WRITE_ROW_XY = (640, 212)
SOURCE_ROW_XY = (140, 140)
"""Where the write_file row of the Timeline and the source session's row in the list (once
the branch is made) are (measured on the screenshots of this scene)."""


def branch_scene(root: Path, out: Path) -> None:
    """Continue from here… (issue #36): a session's first turn (snapshots off then) writes
    notes.txt, its second (snapshots on) deletes it. In the Timeline, the first message has no
    snapshot (the dialog offers the current files); the write's result has one: Make the branch
    opens the new session, whose header names its source and point, and the source's
    transcript shows where it was branched."""
    scene = Scene(root, "branch", BRANCH_SCRIPT)
    first = {**scene.env, "MAKA_WORKSPACE_CHECKPOINTS": "off"}
    args = ["run", "--cwd", str(scene.work), "--permission-mode", "auto"]
    assert maka([*args, "write the parser notes"], scene.data, env=first).returncode == 0
    from tests.helpers.maka_run import committed_runs

    session = committed_runs(scene.data)[0][0].session_id
    scene.env.pop("MAKA_WORKSPACE_CHECKPOINTS")  # the product's default: on
    again = ["run", "--session", session, "--permission-mode", "auto", "clean up the notes"]
    assert maka(again, scene.data, env=scene.env).returncode == 0
    with scene.app() as window:
        time.sleep(2.0)
        press(window, "ctrl+t")  # the Timeline
        time.sleep(1.5)
        press(window, "Down Down")  # the first row: your first message (no snapshot)
        capture(window, out / "app-branch-timeline.png", 1.5)
        press(window, "alt+h")  # Continue from here…
        capture_with_dialogs(window, out / "app-branch-no-snapshot.png", 2.0)
        press_in_dialog("Escape")
        time.sleep(0.5)
        click(window, *WRITE_ROW_XY)  # the write's row: its result is the point
        press(window, "alt+h")
        capture_with_dialogs(window, out / "app-branch-dialog.png", 2.0)
        press_in_dialog("Return")  # Make the branch
        time.sleep(3.0)
        press(window, "ctrl+t")  # back to the transcript
        capture_with_dialogs(window, out / "app-branch-opened.png", 2.0)
        click(window, *SOURCE_ROW_XY)
        capture(window, out / "app-branch-source-marker.png", 2.0)


DATABASE_TAB_XY = (307, 27)
TEST_CONNECTION_XY = (136, 172)
"""Where the Database tab and Test connection are in the Settings dialog (measured on the widget
screenshots of ``tests/helpers/settings_demo.py``: the same dialog)."""


def database_scene(root: Path, out: Path) -> None:
    """The real app started on a throwaway PostgreSQL server because of the saved Database setting
    (no ``MAKA_DATABASE_URL``): Settings › Database shows the server in use, its password masked,
    and Test connection's answer from the main process."""
    import json

    from tests.helpers.postgres_cluster import PostgresCluster, find_bin_dir

    bin_dir = find_bin_dir()
    assert bin_dir is not None, "PostgreSQL's initdb and pg_ctl are needed"
    cluster = PostgresCluster.start(bin_dir)
    try:
        url = cluster.new_database().replace(
            "postgresql://maka@", "postgresql://maka:shot-secret@", 1
        )
        scene = Scene(root, "database", [[{"text": "Hello from the server's ledger."}]])
        scene.data.mkdir(mode=0o700)
        settings = scene.data / "settings.json"
        settings.write_text(json.dumps({"database": "postgresql", "database_url": url}))
        settings.chmod(0o600)
        scene.env.pop("MAKA_DATABASE_URL", None)
        assert scene.run("say hello") == 0
        with scene.app() as window:
            time.sleep(2.0)
            press(window, "ctrl+comma")
            time.sleep(1.5)
            dialog = _x("xdotool", "search", "--name", "^Settings$").split()[-1]
            click(dialog, *DATABASE_TAB_XY)
            time.sleep(0.5)
            click(dialog, *TEST_CONNECTION_XY)
            capture_with_dialogs(window, out / "settings-database-in-app.png", 2.5)
            press_in_dialog("Escape")
    finally:
        cluster.stop()


TIMELINE_PROMPT = "count the lines once and write the total to count.txt for the weekly report"


def timeline_small_scene(root: Path, out: Path) -> None:
    """View › Timeline in a small window (760x540: an 800x600 screen, or 1080p at 200 %) under
    the banner of a session parked on a stale snapshot (reasons pinned to a row and outside
    the record), its first row selected: the rows and the selected event's
    detail both readable, the session list's long title elided beside its badge. Then the same
    window at 1280x800 (``app-timeline-large.png``, not kept in docs/screenshots)."""
    scene = Scene(root, "timeline-small", RESUME_SCRIPT)
    scene.env = scripted_env(
        write_script(scene.root / "script.json", RESUME_SCRIPT), None, checkpoints=True
    )
    assert scene.run(TIMELINE_PROMPT, failpoint="P6") == -9  # automatic resume parks at start
    with scene.app() as window:
        _x("xdotool", "windowsize", "--sync", window, "760", "540")
        time.sleep(2.0)
        press(window, "ctrl+t")  # the Timeline
        time.sleep(1.5)
        press(window, "Down Down")  # the first row: your message
        capture(window, out / "app-timeline-small.png", 1.5)
        _x("xdotool", "windowsize", "--sync", window, "1280", "800")
        capture(window, out / "app-timeline-large.png", 1.5)


def _settle_only(root: Path, out: Path) -> None:
    settle_scene(root, out, clicks=os.environ.get("MAKA_SHOTS_CLICKS") != "0")


_SINGLE_SCENES: dict[str, Callable[[Path, Path], None]] = {
    "settle": _settle_only,
    "settle-changed": settle_changed_scene,
    "folder": folder_scene,
    "crash-loop": crash_loop_scene,
    "drift-restart": drift_restart_scene,
    "restore-point": restore_point_scene,
    "markup": markup_scene,
    "refusal": refusal_scene,
    "small-banners": small_banners_scene,
    "long": long_content_scene,
    "auto-write": auto_write_scene,
    "decisions": decisions_scene,
    "branch": branch_scene,
    "timeline-small": timeline_small_scene,
    "database": database_scene,
}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.helpers.app_screenshots OUTPUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for tool in ("Xvfb", "xdotool", "import"):
        if shutil.which(tool) is None:
            print(f"{tool} is required", file=sys.stderr)
            return 1
    with tempfile.TemporaryDirectory(prefix="maka-shots-") as temp, xvfb():
        root = Path(temp)
        only = os.environ.get("MAKA_SHOTS_ONLY", "")
        if only in ("crash", "survivor"):
            survivor_scene(root, out)
        if only in ("crash", "orphan"):
            orphan_scene(root, out)
        if only in ("crash", "survivor", "orphan"):
            return 0
        single = _SINGLE_SCENES.get(only)
        if single is not None:
            single(root, out)
            return 0
        cards = Scene(root, "cards", TOOL_CARDS_SCRIPT)
        assert cards.run("write hello.txt saying hi, then show me the folder") == 0
        with cards.app() as window:
            capture(window, out / "app-session-with-tool-cards.png", 2.5)

        idle = Scene(root, "idle", RESUME_SCRIPT)
        assert idle.run("count once", failpoint="P6") == -9
        idle.repair()
        with idle.app() as window:
            capture(window, out / "app-banner-idle.png", 2.5)

        parked = Scene(root, "parked", RESUME_SCRIPT)
        assert parked.run("count once", failpoint="P3") == -9
        parked.repair()
        with parked.app() as window:
            time.sleep(2.0)
            press(window, "ctrl+r")
            time.sleep(1.5)
            click(window, 350, 187)  # "Details": the codes and the affected operation
            capture(window, out / "app-banner-parked.png", 1.5)

        # No repair pass: auto-resume at startup parks before the window connects, and the
        # banner opens parked (not offering a Safe resume it knows will be refused).
        auto = Scene(root, "auto-parked", RESUME_SCRIPT)
        assert auto.run("count once", failpoint="P3") == -9
        with auto.app() as window:
            capture(window, out / "app-banner-auto-resume-parked.png", 3.0)
            click(window, 350, 187)  # "Details"
            capture(window, out / "app-banner-auto-resume-parked-details.png", 1.5)

        running = Scene(root, "running", RESUME_SCRIPT)
        assert running.run("count once", failpoint="P6") == -9
        running.repair()
        with running.app() as window:
            time.sleep(2.0)
            press(window, "ctrl+r")
            capture(window, out / "app-continuation-running.png", 3.0)

        settle_scene(root, out)
        folder_scene(root, out)
        drift_restart_scene(root, out)
        restore_point_scene(root, out)
        decisions_scene(root, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
