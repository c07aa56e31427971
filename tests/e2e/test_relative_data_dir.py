"""A relative data directory (``--data-dir data`` or ``MAKA_DATA_DIR=data``) names the folder
under the current one, once, for every part: the real ``maka`` captures checkpoints in it, a
later command given it absolute (or through the environment) finds the same snapshots, and
``maka doctor`` is content (real store, the real ``git``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.maka_process import maka_executable
from tests.helpers.maka_run import scripted_env, write_script

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("git") is None, reason="git")]

SCRIPT = [
    [
        {
            "text": "Writing.",
            "toolCalls": [
                {"id": "c1", "name": "write_file", "args": {"path": "a.txt", "content": "a\n"}}
            ],
        },
        {"text": "Done."},
    ]
]


def _maka(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("MAKA_DATA_DIR", "MAKA_FAILPOINT", "MAKA_PROVIDER")
    }
    environment.update({"QT_QPA_PLATFORM": "offscreen", **env})
    return subprocess.run(
        [*maka_executable(), *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_relative_data_dir_keeps_its_snapshots_whichever_way_it_is_named(
    tmp_path: Path,
) -> None:
    here = tmp_path / "here"
    work = tmp_path / "work"
    here.mkdir()
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", SCRIPT), checkpoints=True)
    run = _maka(
        ["--data-dir", "data", "run", "--cwd", str(work), "--permission-mode", "auto", "write"],
        here,
        env,
    )
    assert run.returncode == 0, run.stderr
    assert (here / "data" / "runtime.sqlite").is_file()
    # Nothing in a second data folder one level deeper or in the session folder.
    assert sorted(p.name for p in work.iterdir()) == [".maka", "a.txt"]
    assert sorted(p.name for p in (work / ".maka").iterdir()) == [".gitignore", "workspace.json"]
    assert not (here / "data" / "data").exists()
    assert not (here / "data" / "checkpoints" / "data").exists()

    listings = []
    for args, extra in (
        (["--data-dir", "data"], {}),
        ([], {"MAKA_DATA_DIR": "data"}),
        (["--data-dir", str(here / "data")], {}),
    ):
        sessions = _maka([*args, "sessions", "--json"], here, {**env, **extra})
        assert sessions.returncode == 0, sessions.stderr
        [session] = json.loads(sessions.stdout)["sessions"]
        listing = [*args, "checkpoints", session["sessionId"], "--json"]
        listed = _maka(listing, here, {**env, **extra})
        assert listed.returncode == 0, listed.stderr
        checkpoints = [c for r in json.loads(listed.stdout)["runs"] for c in r["checkpoints"]]
        assert len(checkpoints) == 2  # at the start, and after the write
        assert all(c["present"] for c in checkpoints), checkpoints
        listings.append(checkpoints)
    assert listings[0] == listings[1] == listings[2]

    doctor = _maka(["doctor", "--json"], here, {**env, "MAKA_DATA_DIR": "data"})
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
