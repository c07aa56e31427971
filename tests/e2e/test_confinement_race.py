"""Writes under a concurrent folder-for-link swap never leave the session folder.

A real swapper process exchanges ``race/`` (a real folder) with a symbolic link to a folder
outside the workspace, over and over, while the real ``maka run`` (scripted provider) writes
hundreds of files into ``race/``. Afterwards: nothing landed outside, no temporary file was left
anywhere, and every write the ledger records as successful is exactly the file found at the path
its evidence names.
"""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.maka_run import committed_runs, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

WRITES = 300

# Exchanges ``race`` and ``.swap`` atomically (renameat2 RENAME_EXCHANGE) where the C library
# has it, else with two renames; stops when ``stop`` exists and leaves the real folder at
# ``race``. It flips in bursts of 16 exchanges (about every half millisecond) and after each
# burst, with the real folder in place, holds still for 5-30 ms: a write takes several
# milliseconds (two committed transactions around it), so without the still spells hardly any
# write can finish on a loaded machine, and the test could not tell a confined write from none.
SWAPPER = textwrap.dedent(
    """
    import ctypes, os, random, sys, time
    work, stop = sys.argv[1], sys.argv[2]
    race, swap = os.path.join(work, "race"), os.path.join(work, ".swap")
    libc = ctypes.CDLL(None, use_errno=True)
    exchange = getattr(libc, "renameat2", None)

    def flip():
        if exchange is not None:
            if exchange(-100, race.encode(), -100, swap.encode(), 2) != 0:
                raise OSError(ctypes.get_errno(), "renameat2")
            return
        os.rename(race, race + ".tmp")
        os.rename(swap, race)
        os.rename(race + ".tmp", swap)

    flips = 0
    print("ready", flush=True)
    while not os.path.exists(stop):
        flip()
        flips += 1
        time.sleep(0.0005)
        if flips % 16 == 0:
            time.sleep(random.uniform(0.005, 0.03))
    if os.path.islink(race):
        flip()
    print(flips, flush=True)
    """
)


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_a_folder_swapped_for_an_outside_link_never_receives_a_write(tmp_path: Path) -> None:
    workspace = (tmp_path / "project").resolve()
    outside = (tmp_path / "outside").resolve()
    (workspace / "race").mkdir(parents=True)
    outside.mkdir()
    (workspace / ".swap").symlink_to(outside, target_is_directory=True)
    data_dir = tmp_path / "data"
    calls = [
        {
            "id": f"w{index}",
            "name": "write_file",
            "args": {"path": f"race/f{index}.txt", "content": f"content {index}\n"},
        }
        for index in range(WRITES)
    ]
    steps = [{"toolCalls": calls[start : start + 50]} for start in range(0, WRITES, 50)]
    script = write_script(tmp_path / "script.json", [[*steps, {"text": "done"}]])
    stop = tmp_path / "stop"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(workspace), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert swapper.stdout is not None
        assert swapper.stdout.readline().strip() == "ready"
        result = maka(
            ["run", "--cwd", str(workspace), "--permission-mode", "auto", "write the files"],
            data_dir,
            env=scripted_env(script),
            timeout=300,
        )
    finally:
        stop.touch()
        out, _ = swapper.communicate(timeout=30)
    flips = int(out.strip().splitlines()[-1])
    assert flips > 100, f"the swapper barely ran ({flips} flips)"
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr

    assert sorted(p.name for p in outside.iterdir()) == [], "a write escaped the workspace"
    stray = [p for p in tmp_path.rglob("*.tmp") if ".maka-" in p.name]
    assert stray == [], f"temporary files were left behind: {stray}"
    assert (workspace / "race").is_dir() and not (workspace / "race").is_symlink()

    [(header, events)] = committed_runs(data_dir)
    assert header.status.value == "completed"
    evidence = {
        event["refs"]["toolCallId"]: event["actions"]["toolDispatch"]["evidence"]
        for event in events
        if "toolDispatch" in (event.get("actions") or {})
    }
    succeeded = refused = 0
    for event in events:
        content: dict[str, Any] = dict(event.get("content") or {})
        if content.get("kind") != "function_response" or "operationId" not in (
            event.get("refs") or {}
        ):
            continue
        if content.get("isError"):
            refused += 1
            continue
        succeeded += 1
        recorded = evidence[content["id"]]
        written = workspace / recorded["path"]
        assert recorded["path"] == f"race/f{content['id'][1:]}.txt"
        assert written.read_bytes() == f"content {content['id'][1:]}\n".encode()
        assert _sha(written.read_bytes()) == recorded["expectedAfter"]["sha256"]
        assert content["result"]["sha256"] == recorded["expectedAfter"]["sha256"]
    assert succeeded > 0, "no write succeeded at all: the race did not exercise the write path"
    assert refused > 0, "no write was refused: the swap never met a write"


def test_the_swapper_really_redirects_path_based_writes(tmp_path: Path) -> None:
    """Control: while the swapper runs, a plain path-based write does land outside sometimes,
    so the test above would see an escape if the tools followed the path."""
    workspace = (tmp_path / "project").resolve()
    outside = (tmp_path / "outside").resolve()
    (workspace / "race").mkdir(parents=True)
    outside.mkdir()
    (workspace / ".swap").symlink_to(outside, target_is_directory=True)
    stop = tmp_path / "stop"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(workspace), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert swapper.stdout is not None
        swapper.stdout.readline()
        deadline = time.monotonic() + 20
        index = 0
        while not any(outside.iterdir()) and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                (workspace / "race" / f"p{index}.txt").write_text("x")
            index += 1
    finally:
        stop.touch()
        swapper.communicate(timeout=30)
    assert any(outside.iterdir())
