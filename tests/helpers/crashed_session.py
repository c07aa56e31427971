"""A session whose ``maka run`` was killed at a failpoint, then the real desktop main process
started on its data folder with Safe resume on: the start-up the desktop tests of a parked
session repeat (a real ``maka run``, a real SIGKILL, the real main process)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytestqt.qtbot import QtBot

from renderer.bridge_client import RendererBridge
from renderer.interrupted_banner import BannerState, InterruptedBanner
from tests.helpers.maka_process import MainProcess, main_log, start_main
from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

FLAG = {"MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"}
COUNTING: list[list[dict[str, Any]]] = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> n.txt"}}],
        },
        {"text": "Counted."},
    ],
]
"""One turn whose ``bash`` call ``c1`` appends a line to ``n.txt``."""
WAIT_MS = 30_000


@dataclass(frozen=True)
class CrashedRun:
    data: Path
    work: Path
    env: dict[str, str]
    session_id: str


def crashed_run(
    tmp_path: Path,
    failpoint: str,
    *,
    script: list[list[dict[str, Any]]] = COUNTING,
    checkpoints: bool | None = True,
    message: str = "count once",
    files: dict[str, str] | None = None,
) -> CrashedRun:
    """``maka run`` of ``script`` in a new folder ``tmp_path / "work"`` holding ``files``, every
    call allowed, killed at ``failpoint``. Workspace snapshots on, off, or (``None``) at the
    product's default."""
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    for name, text in (files or {}).items():
        (work / name).write_text(text)
    written = write_script(tmp_path / "script.json", script)
    env = scripted_env(written, checkpoints=bool(checkpoints))
    if checkpoints is None:
        env.pop("MAKA_WORKSPACE_CHECKPOINTS")
    crashed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", message],
        data,
        env={**env, "MAKA_FAILPOINT": failpoint},
    )
    assert crashed.returncode == -9, crashed.stderr
    return CrashedRun(data, work, env, committed_runs(data)[0][0].session_id)


def main_started(
    crashed: CrashedRun, qtbot: QtBot, processes: list[MainProcess], *, parked: bool = True
) -> MainProcess:
    """The real main process on ``crashed``'s data folder (Safe resume on), in ``processes``;
    once its automatic resume parked the session, if ``parked``."""
    main = start_main(crashed.data, {**crashed.env, **FLAG}).wait_ready()
    processes.append(main)
    deadline = time.monotonic() + 30
    while parked and "auto-resume outcome: ResumeParked" not in main_log(crashed.data):
        assert time.monotonic() < deadline, main_log(crashed.data)
        qtbot.wait(50)
    return main


def parked_banner(
    qtbot: QtBot, main: MainProcess, session_id: str, work: Path
) -> tuple[RendererBridge, InterruptedBanner]:
    """The interrupted-session banner of ``session_id`` (its folder ``work``) alone, connected
    to ``main``, once it shows the session parked."""
    bridge = RendererBridge(main.socket_name, main.token)
    banner = InterruptedBanner(bridge)
    qtbot.addWidget(banner)
    banner.show()
    banner.set_session(session_id, interrupted=True, folder=str(work))
    bridge.start()
    qtbot.waitUntil(lambda: banner.state is BannerState.PARKED, timeout=WAIT_MS)
    return bridge, banner


def drifted_run(tmp_path: Path) -> CrashedRun:
    """The counting run (snapshots on) killed at P8, its checkpoints committed, then ``n.txt``
    edited by hand: its automatic resume parks with ``workspace_drift``."""
    crashed = crashed_run(tmp_path, "P8")
    (crashed.work / "n.txt").write_text("edited by hand\n")
    return crashed


def drifted_banner(
    tmp_path: Path, qtbot: QtBot, processes: list[MainProcess]
) -> tuple[Path, Path, str, RendererBridge, InterruptedBanner]:
    """``drifted_run``, the main process parked on it, and its banner parked: the data folder,
    the session's folder, the session, the banner's bridge and the banner."""
    crashed = drifted_run(tmp_path)
    main = main_started(crashed, qtbot, processes)
    bridge, banner = parked_banner(qtbot, main, crashed.session_id, crashed.work)
    return crashed.data, crashed.work, crashed.session_id, bridge, banner
