"""A chmod of a file the run wrote just before it was killed is drift (docs/design/workspace.md:
a chmod is a change), as it is of any other file. The snapshot is rolled forward over the write
the ledger proves (runtime/continuation/checkpoint_evidence.py ``rolled_forward``), which once
compared that file by its content alone: ``chmod 755`` on it left the resume verified.

The bits a write leaves are known: a new file gets 0644 (less the umask), an existing one keeps
its own (the checkpoint's permission record has them). The real ``maka run`` killed at P5 (the
write done, its outcome not committed), in a Git repository holding uncommitted work, then the
real ``maka plan`` (scripted provider, real tools, real store, the real ``git``)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_resume_proven_writes import Drill, _codes

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("git") is None, reason="git"),
    pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits"),
]


def _drill(tmp_path: Path, path: str) -> Drill:
    """``Drill``'s repository with ``notes.txt`` made private (0600), and a session that writes
    ``path`` once, killed at P5."""
    call = {"id": "c1", "name": "write_file", "args": {"path": path, "content": "written\n"}}
    drill = Drill(tmp_path, [{"text": "Writing.", "toolCalls": [call]}, {"text": "Done."}])
    os.chmod(drill.work / "notes.txt", 0o600)
    drill.run("P5")
    assert (drill.work / path).read_text() == "written\n"  # the write happened
    return drill


def _changed(body: dict[str, Any]) -> list[dict[str, str]]:
    [drift] = [d for d in body["diagnostics"] if d["code"] == "workspace_drift"]
    changed: list[dict[str, str]] = drift["detail"]["changedPaths"]
    return changed


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_new_file_the_write_made_left_as_it_was_is_verified(tmp_path: Path) -> None:
    drill = _drill(tmp_path, "fresh.txt")
    assert _mode(drill.work / "fresh.txt") & 0o111 == 0  # 0644 less the umask
    planned = drill.plan()
    assert planned["disposition"] == "continue", planned
    assert "workspace_verified" in _codes(planned)
    assert "workspace_drift" not in _codes(planned)


@pytest.mark.parametrize("bits", [0o755, 0o600, 0o000], ids=["755", "600", "000"])
def test_a_chmod_of_a_new_file_the_write_made_is_drift(tmp_path: Path, bits: int) -> None:
    drill = _drill(tmp_path, "fresh.txt")
    if _mode(drill.work / "fresh.txt") == bits:
        pytest.skip("the umask gives the new file these bits already")
    os.chmod(drill.work / "fresh.txt", bits)
    try:
        planned = drill.plan()
    finally:
        os.chmod(drill.work / "fresh.txt", 0o644)  # so the folder can be cleaned up
    assert planned["rejectionReasons"] == ["workspace_drift"], planned
    assert _changed(planned) == [{"path": "fresh.txt", "change": "modified"}]


def test_an_existing_file_the_write_kept_private_is_verified(tmp_path: Path) -> None:
    drill = _drill(tmp_path, "notes.txt")
    assert _mode(drill.work / "notes.txt") == 0o600  # the write kept its bits
    planned = drill.plan()
    assert planned["disposition"] == "continue", planned
    assert "workspace_verified" in _codes(planned)
    assert "workspace_drift" not in _codes(planned)


def test_a_chmod_of_an_existing_file_the_write_kept_is_drift(tmp_path: Path) -> None:
    drill = _drill(tmp_path, "notes.txt")
    os.chmod(drill.work / "notes.txt", 0o644)
    planned = drill.plan()
    assert planned["rejectionReasons"] == ["workspace_drift"], planned
    assert _changed(planned) == [{"path": "notes.txt", "change": "modified"}]
