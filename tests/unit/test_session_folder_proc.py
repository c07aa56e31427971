"""A session folder is never a view through ``/proc`` (the main process's own working folder,
say): such a path is refused with ``invalid_cwd``, however it gets there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.host.host_services import HostServiceError
from main_process.session_folder import check_session_folder, resolves_through_proc


def _link(tmp_path: Path, name: str, target: str) -> str:
    path = tmp_path / name
    os.symlink(target, path)
    return str(path)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_paths_that_resolve_through_proc_are_refused(tmp_path: Path) -> None:
    through = [
        "/proc/self/cwd",
        "/proc",
        "/proc/1/root/tmp",
        "/dev/fd/0",
        _link(tmp_path, "to-proc", "/proc/self") + "/cwd",
        _link(tmp_path, "relative", os.path.relpath("/proc/self/cwd", tmp_path)),
    ]
    for path in through:
        assert resolves_through_proc(path), path
        with pytest.raises(HostServiceError) as refused:
            check_session_folder(path, home=str(tmp_path / "home"))
        assert refused.value.code.value == "invalid_cwd"
        assert "/proc" in str(refused.value)


def test_ordinary_folders_and_lookalike_names_are_accepted(tmp_path: Path) -> None:
    project = tmp_path / "proc"
    project.mkdir()
    linked = _link(tmp_path, "link", str(project))
    for path in (str(project), linked, str(tmp_path / "procfile"), "/procfoo/x"):
        assert not resolves_through_proc(path), path
    assert check_session_folder(linked, home=str(tmp_path / "home")) == linked
