"""A full disk and a data folder (or lock file) that cannot be written get their own codes.

Neither is ``store_locked``: nobody else holds the data folder, and the user has to do something
else about it (free space; fix the permissions). The full disk is a real, tiny ``tmpfs`` filled to
the last byte; the read-only cases are a read-only mount and a lock file the user cannot write
(immutable for root, mode 0444 otherwise). The tests need ``mount`` (root); elsewhere the
``tmpfs`` cases are skipped.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from storage.instance_lock import LOCK_FILE_NAME
from tests.helpers.maka_process import run_maka

pytestmark = pytest.mark.e2e


def _refused(result: subprocess.CompletedProcess[str], code: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert f"maka: error [{code}]:" in result.stderr, result.stderr
    assert "store_locked" not in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(disk: Path) -> None:
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)


def _run(data_dir: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    return run_maka(data_dir, "run", "--cwd", str(folder), "--permission-mode", "auto", "hi")


def test_a_full_disk_is_disk_full(small_disk: Path, tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    used = small_disk / "used"
    assert _run(used, folder).returncode == 0
    _fill(small_disk)
    _refused(_run(used, folder), "disk_full")
    _refused(_run(small_disk / "new", folder), "disk_full")
    _refused(run_maka(used, extra_env={"MAKA_NO_RENDERER": "0"}), "disk_full")


def test_a_read_only_data_folder_is_data_dir_read_only(small_disk: Path, tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    data_dir = small_disk / "data"
    assert _run(data_dir, folder).returncode == 0
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    refused = _run(data_dir, folder)
    _refused(refused, "data_dir_read_only")
    # No access right can help on a read-only disk: the advice is another data folder.
    assert "read-only file system" in refused.stderr, refused.stderr
    assert "write access" not in refused.stderr, refused.stderr
    _refused(_run(small_disk / "new", folder), "data_dir_read_only")
    _refused(run_maka(data_dir, extra_env={"MAKA_NO_RENDERER": "0"}), "data_dir_read_only")


def test_a_read_only_lock_file_is_data_dir_read_only(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    data_dir = tmp_path / "data"
    assert _run(data_dir, folder).returncode == 0
    lock = data_dir / LOCK_FILE_NAME
    lock.write_text("")
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "+i", str(lock)], capture_output=True, check=False)
        if made.returncode != 0:
            pytest.skip("root ignores file modes and chattr +i is not available here")
    else:
        lock.chmod(0o444)
    try:
        _refused(_run(data_dir, folder), "data_dir_read_only")
        _refused(run_maka(data_dir, extra_env={"MAKA_NO_RENDERER": "0"}), "data_dir_read_only")
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(lock)], check=False)
