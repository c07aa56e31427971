"""Screenshots of the desktop on a shared PostgreSQL ledger while another process runs a turn
(docs/screenshots/app-running-elsewhere*.png), for people to look at:

- ``app-running-elsewhere.png``: ``maka run`` in a terminal (its own data folder) runs a command;
  the desktop, on the same server, lists the session as "Running elsewhere", greys Stop out and
  says where the turn can be stopped;
- ``app-running-elsewhere-taken-over.png``: that ``maka run`` was killed (SIGKILL) mid-command;
  once its lease ran out the desktop took the session over and parked it, and the call's card
  asks whether it ran (it no longer says "Running…");
- ``app-renamed-removed-elsewhere.png``: two sessions finished by ``maka run`` in a terminal;
  the terminal renames one and removes the other (the one open in the window); within a sweep
  the window's list shows the new title, the removed session is gone, and the status bar says
  another Maka process removed it;
- ``app-held-elsewhere.png``: a ``maka host`` (its own data folder) served a turn and runs on,
  holding the session's lease: the window lists the session "Held elsewhere" and the composer
  names the holder while Send waits (SIGTERM to that host lets the lease go, and within a sweep
  the note is gone).

::

    .venv/bin/python -m tests.helpers.shared_ledger_screens docs/screenshots

A throwaway PostgreSQL cluster is started (``tests/helpers/postgres_cluster.py``), with the
default lease (30 s), snapshots on and a Git repository with uncommitted work as the folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.helpers import app_screenshots as shots
from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import scripted_env, write_script
from tests.helpers.postgres_cluster import PostgresCluster, find_bin_dir

JOB: dict[str, Any] = {
    "id": "j1",
    "name": "bash",
    "args": {"command": "echo started > started.txt; sleep 60; echo done >> done.txt"},
}
SCRIPT: list[list[dict[str, Any]]] = [
    [{"text": "Starting the long job.", "toolCalls": [JOB]}, {"text": "Done."}]
]
STOP_XY = (1119, 692)  # the composer's Stop button in the 1180x760 window
HELLO: list[list[dict[str, Any]]] = [[{"text": "Hello."}], [{"text": "Hello again."}]]


def _repository(folder: Path) -> None:
    commands = (
        "git init -q && echo a > a.txt && git add . && "
        "git -c user.email=me@example.com -c user.name=me commit -qm first && echo wip >> a.txt"
    )
    subprocess.run(commands, shell=True, cwd=folder, check=True)


def main(out: Path) -> None:
    bin_dir = find_bin_dir()
    assert bin_dir is not None, "PostgreSQL's initdb and pg_ctl are needed"
    cluster = PostgresCluster.start(bin_dir)
    try:
        url = cluster.new_database()
        with tempfile.TemporaryDirectory(prefix="maka-shots-") as root, shots.xvfb():
            scene = shots.Scene(Path(root), "shared", SCRIPT)
            _repository(scene.work)
            script = write_script(scene.root / "script.json", SCRIPT)
            scene.env = scripted_env(script, None, checkpoints=True, MAKA_DATABASE_URL=url)
            env = {**os.environ, **scene.env, "QT_QPA_PLATFORM": "offscreen"}
            env["MAKA_DATA_DIR"] = str(scene.root / "terminal-data")
            args = ["run", "--cwd", str(scene.work), "--permission-mode", "auto", "the long job"]
            terminal = subprocess.Popen([*maka_executable(), *args], env=env)
            while not (scene.work / "started.txt").exists():
                time.sleep(0.05)
            with scene.app() as window:
                shots.click(window, *STOP_XY)  # greyed out: nothing happens
                shots.capture(window, out / "app-running-elsewhere.png", 3.0)
                terminal.send_signal(signal.SIGKILL)
                terminal.wait(10)
                time.sleep(45)  # the lease (30 s) runs out; a sweep (every 10 s) takes over
                shots.capture(window, out / "app-running-elsewhere-taken-over.png", 2.0)
            _renamed_and_removed(Path(root), url, out)
            _held_by_a_host(Path(root), url, out)
    finally:
        cluster.stop()


def _hello_scene(root: Path, name: str, url: str, data: str) -> tuple[shots.Scene, dict[str, str]]:
    """A scene whose turns say hello, in a Git repository with uncommitted work, on the server
    at ``url``; and the environment of ``maka`` commands with their own data folder ``data``."""
    scene = shots.Scene(root, name, HELLO)
    _repository(scene.work)
    script = write_script(scene.root / "script.json", HELLO)
    scene.env = scripted_env(script, None, checkpoints=True, MAKA_DATABASE_URL=url)
    env = {**os.environ, **scene.env, "QT_QPA_PLATFORM": "offscreen"}
    env["MAKA_DATA_DIR"] = str(scene.root / data)
    return scene, env


def _renamed_and_removed(root: Path, url: str, out: Path) -> None:
    scene, env = _hello_scene(root, "renamed", url, "terminal-data")

    def terminal(*args: str) -> None:
        subprocess.run([*maka_executable(), *args], env=env, check=True, capture_output=True)

    other = scene.root / "notes"
    other.mkdir()
    for folder, message in ((scene.work, "tidy the parser"), (other, "draft the notes")):
        terminal("run", "--cwd", str(folder), "--permission-mode", "auto", message)
    listed = subprocess.run(
        [*maka_executable(), "sessions", "--json"], env=env, check=True, capture_output=True
    )
    by_title = {row["title"]: row["sessionId"] for row in json.loads(listed.stdout)["sessions"]}
    first, second = by_title["tidy the parser"], by_title["draft the notes"]
    with scene.app() as window:
        time.sleep(2.0)  # the list as the window was given it
        terminal("sessions", "rename", first, "Parser clean-up")
        terminal("sessions", "remove", second, "--yes")  # the session open in the window
        shots.capture(window, out / "app-renamed-removed-elsewhere.png", 13.0)  # one sweep


def _held_by_a_host(root: Path, url: str, out: Path) -> None:
    scene, env = _hello_scene(root, "held", url, "server-data")
    host = subprocess.Popen([*maka_executable(), "host"], env=env, stdout=subprocess.DEVNULL)
    try:
        log = scene.root / "server-data" / "logs" / "main.log"
        deadline = time.monotonic() + 60
        while "main process ready" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline and host.poll() is None, "the host did not start"
            time.sleep(0.1)
        args = ["run", "--cwd", str(scene.work), "--permission-mode", "auto", "tidy the parser"]
        subprocess.run([*maka_executable(), *args], env=env, check=True, capture_output=True)
        with scene.app() as window:
            shots.capture(window, out / "app-held-elsewhere.png", 4.0)
            host.send_signal(signal.SIGTERM)
            host.wait(20)
            time.sleep(13.0)  # a sweep: the lease let go, the note is gone
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
