"""A run whose ``maka run`` was killed, read in a data folder Maka cannot write (a backup on a
read-only mount): nothing runs it, and the reading commands say so.

- ``timeline``, ``sessions`` and ``doctor`` say the run awaits repair, as in a writable folder
  nobody owns (the lock file cannot be taken there, but a killed holder holds nothing), and the
  timeline says the repair needs a writable copy; ``plan`` says ``data_dir_read_only`` (it can
  neither repair the run nor plan without the repair), never that the turn is still running.
- A live process holding the data folder's lock still counts: then nothing awaits repair.
- ``maka resume`` and ``maka sessions remove`` there say to copy the folder somewhere writable
  and give the copy as ``--data-dir`` (codes.md), not to choose another data folder.

The read-only view is a read-only bind mount of the data folder (root: file modes do not stop
root); elsewhere the folder is made read-only with ``chmod``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.instance_lock import InstanceLock, LockOutcome
from tests.helpers.maka_run import RunResult, maka, scripted_env, write_script

pytestmark = pytest.mark.e2e

_SCRIPT = [
    [
        {
            "text": "Counting.",
            "toolCalls": [{"id": "c1", "name": "bash", "args": {"command": "echo x >> n.txt"}}],
        },
        {"text": "Counted."},
    ],
]
COPY_WORDS = "copy the data folder somewhere writable and give the copy as --data-dir"


def _killed(tmp_path: Path) -> tuple[Path, str, str, dict[str, str]]:
    """A data folder whose one session's ``maka run`` was killed (SIGKILL) in its ``bash``
    call: the folder, the session, the run still marked running, the scripted environment."""
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = scripted_env(write_script(tmp_path / "script.json", _SCRIPT))
    crashed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"],
        data,
        env={**env, "MAKA_FAILPOINT": "P6"},
    )
    assert crashed.returncode == -9, crashed.stderr
    listed = json.loads(maka(["sessions", "--json"], data).stdout)["sessions"]
    session_id: str = listed[0]["sessionId"]
    timeline = json.loads(maka(["timeline", session_id, "--json"], data).stdout)
    run_ids = [run["runId"] for run in timeline["runs"]]
    assert len(run_ids) == 1, timeline
    return data, session_id, run_ids[0], env


@contextlib.contextmanager
def _read_only(data: Path, view: Path) -> Iterator[Path]:
    """``data`` as this user cannot write it: a read-only bind mount at ``view`` (root), else
    the folder itself made read-only (``chmod -R a-w``)."""
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "a-w", str(data)], check=True)
        try:
            yield data
        finally:
            subprocess.run(["chmod", "-R", "u+w", str(data)], check=False)
        return
    view.mkdir()
    bound = subprocess.run(
        ["mount", "--bind", str(data), str(view)], capture_output=True, check=False
    )
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bound.stderr.decode(errors='replace').strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        yield view
    finally:
        subprocess.run(["umount", "-l", str(view)], check=False)


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _clean(result: RunResult) -> None:
    assert "Traceback" not in result.stderr, result.stderr


def test_a_killed_run_in_a_read_only_folder_awaits_repair(tmp_path: Path) -> None:
    data, session_id, run_id, _ = _killed(tmp_path)
    before = _files(data)
    with _read_only(data, tmp_path / "ro") as view:
        timeline = maka(["timeline", session_id], view)
        _clean(timeline)
        assert timeline.returncode == 0, timeline.stderr
        assert f"run {run_id} is still marked running, but no Maka process" in timeline.stdout
        assert "cannot be repaired here" in timeline.stdout, timeline.stdout
        assert COPY_WORDS in timeline.stdout, timeline.stdout
        document = json.loads(maka(["timeline", session_id, "--json"], view).stdout)
        assert document["awaitingRepair"] == [run_id], document
        rows = json.loads(maka(["sessions", "--json"], view).stdout)["sessions"]
        assert rows[0]["awaitingRepair"] is True and rows[0]["interrupted"] is True, rows
        assert "INTERRUPTED (repaired at the next start)" in maka(["sessions"], view).stdout
        doctor = maka(["doctor"], view)
        _clean(doctor)
        assert "run_awaiting_repair" in doctor.stdout, doctor.stdout
        plan = maka(["plan", session_id], view)
        _clean(plan)
        assert plan.returncode == 1, (plan.stdout, plan.stderr)
        assert "maka: error [data_dir_read_only]:" in plan.stderr, plan.stderr
        assert "session_busy" not in plan.stdout + plan.stderr
        assert "still running" not in plan.stdout + plan.stderr
        assert f"run {run_id} of session {session_id} was interrupted" in plan.stderr
        assert COPY_WORDS in plan.stderr.lower(), plan.stderr
    assert _files(data) == before


def test_a_live_owner_of_a_read_only_folder_still_counts(tmp_path: Path) -> None:
    data, session_id, _, _ = _killed(tmp_path)
    owner = InstanceLock(data)  # a live process holding the folder (this test)
    assert owner.acquire().outcome is LockOutcome.ACQUIRED
    try:
        with _read_only(data, tmp_path / "ro") as view:
            timeline = maka(["timeline", session_id], view)
            _clean(timeline)
            assert "still marked running, but" not in timeline.stdout, timeline.stdout
            document = json.loads(maka(["timeline", session_id, "--json"], view).stdout)
            assert "awaitingRepair" not in document, document
            rows = json.loads(maka(["sessions", "--json"], view).stdout)["sessions"]
            assert "awaitingRepair" not in rows[0], rows
            assert "run_awaiting_repair" not in maka(["doctor"], view).stdout
            plan = maka(["plan", session_id], view)
            _clean(plan)
            assert "data_dir_read_only" not in plan.stderr, plan.stderr
            assert "is still running" in plan.stdout, plan.stdout
    finally:
        owner.release()


def test_writing_commands_there_say_to_copy_the_folder(tmp_path: Path) -> None:
    data, session_id, _, env = _killed(tmp_path)
    with _read_only(data, tmp_path / "ro") as view:
        for args in (["resume", session_id], ["sessions", "remove", session_id, "--yes"]):
            refused = maka(args, view, env={**env, "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1"})
            _clean(refused)
            assert refused.returncode == 1, (args, refused.stdout, refused.stderr)
            assert "maka: error [data_dir_read_only]:" in refused.stderr, refused.stderr
            assert COPY_WORDS in refused.stderr.lower(), refused.stderr
            assert "Choose another --data-dir" not in refused.stderr, refused.stderr


def _objects(data: Path) -> list[str]:
    """Every file under the data folder's snapshot store (its objects, indexes, lock files)."""
    return sorted(str(path.relative_to(data)) for path in (data / "checkpoints").rglob("*"))


def test_looking_writes_nothing_in_the_snapshot_store(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    env = {
        **scripted_env(write_script(tmp_path / "script.json", _SCRIPT), checkpoints=True),
        "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME": "1",
    }
    crashed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "count once"],
        data,
        env={**env, "MAKA_FAILPOINT": "P8"},
    )
    assert crashed.returncode == -9, crashed.stderr
    session_id = json.loads(maka(["sessions", "--json"], data).stdout)["sessions"][0]["sessionId"]
    repaired = maka(["plan", session_id], data, env=env)  # owns the folder: repairs first
    assert repaired.returncode == 0, (repaired.stdout, repaired.stderr)  # it could continue
    (work / "later.txt").write_text("made after the crash\n")  # a file no snapshot holds
    before = _objects(data)
    for args in (["timeline", session_id], ["plan", session_id]):
        looked = maka(args, data, env=env)
        _clean(looked)
        assert looked.returncode in (0, 3), (args, looked.stdout, looked.stderr)
        assert _objects(data) == before, args  # no object, index or lock file was written
    with _read_only(data, tmp_path / "ro") as view:
        for args in (["timeline", session_id], ["plan", session_id]):
            looked = maka(args, view, env=env)
            _clean(looked)
            said = looked.stdout + looked.stderr
            assert "safety_observation_unavailable" not in said, (args, said)
            assert "Read-only file system" not in said, (args, said)
            assert looked.returncode in (0, 3), (args, said)
        # The folder was looked at (the file made since is seen), as on a writable folder.
        assert "workspace_drift" in looked.stdout and "later.txt" in looked.stdout, said
    assert _objects(data) == before
