"""No process a command starts escapes its host (Linux): one that leaves the command's group and
session (``setsid``, a double fork, ``nohup … &``) is re-parented to the tool supervisor, a child
subreaper, and stopped with everything else when a real ``maka run`` is killed with SIGKILL.

The same escapes run again with the subreaper switched off (the test-only
``MAKA_FAILPOINT=tool_supervisor_no_subreaper``), the path of platforms without one (macOS): the
escaped process is re-parented to init there, and the supervisor's descendant tracker, which
remembered it, stops it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import scripted_env, write_script

pytestmark = [
    pytest.mark.crash,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreaper: Linux"),
]

BODY = "echo $$ >> escaped.pid; sleep 8; echo escaped >> late.txt"
ESCAPES = {
    "setsid": f"setsid sh -c '{BODY}' > /dev/null 2>&1 < /dev/null &",
    "double fork": f"( sh -c '{BODY}' > /dev/null 2>&1 < /dev/null & )",
    "setsid in a double fork": f"( setsid sh -c '{BODY}' > /dev/null 2>&1 < /dev/null & )",
    "nohup": f"nohup sh -c '{BODY}' > /dev/null 2>&1 < /dev/null &",
}


def _command(form: str) -> str:
    return "\n".join(
        [
            ESCAPES[form],
            "while [ ! -s escaped.pid ]; do sleep 0.05; done",
            "echo started > started.txt",
            "sleep 30",
        ]
    )


def _below_a_supervisor(process: psutil.Process) -> bool:
    for parent in process.parents():
        try:
            if any("tool_supervisor" in part for part in parent.cmdline()):
                return True
        except psutil.Error:
            continue
    return False


@pytest.mark.timeout(120)
@pytest.mark.parametrize("subreaper", [True, False], ids=["subreaper", "tracker"])
@pytest.mark.parametrize("form", sorted(ESCAPES))
def test_a_detached_process_dies_with_a_sigkilled_host(
    tmp_path: Path, form: str, subreaper: bool
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = write_script(
        tmp_path / "script.json",
        [
            [
                {
                    "text": "Running it.",
                    "toolCalls": [
                        {"id": "c1", "name": "bash", "args": {"command": _command(form)}}
                    ],
                },
                {"text": "Done."},
            ]
        ],
    )
    environment = dict(os.environ)
    environment.pop("MAKA_FAILPOINT", None)
    environment.update({"MAKA_DATA_DIR": str(tmp_path / "data"), "QT_QPA_PLATFORM": "offscreen"})
    environment.update(scripted_env(script))
    if not subreaper:
        environment["MAKA_FAILPOINT"] = "tool_supervisor_no_subreaper"
    host = subprocess.Popen(
        [*maka_executable(), "run", "--cwd", str(work), "--permission-mode", "auto", "go"],
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not (work / "started.txt").exists():
            assert host.poll() is None, "maka run ended before the command started"
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        escaped = psutil.Process(int((work / "escaped.pid").read_text().split()[0]))
        assert escaped.is_running()
        if "setsid" in form:
            assert os.getsid(escaped.pid) != os.getsid(host.pid), "it left the session"
        if not subreaper and "double fork" in form:  # re-parented to init, not the supervisor
            assert not _below_a_supervisor(escaped)
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        _, alive = psutil.wait_procs([escaped], timeout=15)
        assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], "it escaped"
        time.sleep(9)  # past the moment it would have written
        assert not (work / "late.txt").exists()
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)
