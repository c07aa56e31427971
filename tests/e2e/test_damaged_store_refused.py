"""A database with one overwritten page is refused before its first write, byte for byte intact.

The data directory is made by the real ``maka run`` (so Maka itself closed it last and vouched
for it). Then one page is overwritten, as a failing disk or a stray program would: the page
holding the run headers' root, one from the middle of the file, or the last one. Every command
that would write (the desktop, ``maka run``, ``maka plan`` as the owner) refuses with
``store_corrupt`` and a message naming ``maka doctor`` and ``maka import``, and the file is
byte-identical afterwards.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from runtime.ledger.command_words import shell_quoted
from storage.ledger.sqlite_connection import DATABASE_NAME
from tests.helpers.maka_process import run_maka
from tests.helpers.maka_run import committed_runs, maka

pytestmark = pytest.mark.e2e


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _populated(tmp_path: Path) -> tuple[Path, str, Path]:
    data_dir = tmp_path / "data"
    folder = tmp_path / "work"
    folder.mkdir()
    for index in range(12):  # enough runs that the file spans many pages
        result = maka(
            ["run", "--cwd", str(folder), "--permission-mode", "auto", f"note {index} " * 200],
            data_dir,
        )
        assert result.returncode == 0, result.stderr
    [*_, (header, _)] = committed_runs(data_dir)
    wal = data_dir / f"{DATABASE_NAME}-wal"
    assert not wal.exists() or wal.stat().st_size == 0  # closed cleanly: all in the file
    return data_dir, header.session_id, folder


def _overwrite_page(database: Path, where: str) -> None:
    conn = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()
    (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    pages = database.stat().st_size // page_size
    assert pages > 8
    page = {"runs_root": root, "middle": pages // 2, "last": pages}[where]
    noise = random.Random(page).randbytes(page_size)
    with database.open("r+b") as file:
        file.seek((page - 1) * page_size)
        file.write(noise)


@pytest.mark.parametrize("where", ["runs_root", "middle", "last"])
def test_one_overwritten_page_is_refused_before_any_write(tmp_path: Path, where: str) -> None:
    data_dir, session_id, folder = _populated(tmp_path)
    database = data_dir / DATABASE_NAME
    _overwrite_page(database, where)
    before = _digest(database)
    attempts = {
        "desktop": run_maka(data_dir, extra_env={"MAKA_NO_RENDERER": "0"}),
        "run": run_maka(data_dir, "run", "--cwd", str(folder), "--permission-mode", "auto", "hi"),
        "run_session": run_maka(data_dir, "run", "--session", session_id, "hi"),
        "plan": run_maka(data_dir, "plan", session_id),
    }
    for name, result in attempts.items():
        assert result.returncode == 1, (name, result.stdout, result.stderr)
        assert "[store_corrupt]" in result.stderr, (name, result.stderr)
        # The desktop names the data folder even when it came from MAKA_DATA_DIR (a window
        # started from a launcher has no shell to inherit it); a command does not.
        advice = (
            f"maka --data-dir {shell_quoted(str(data_dir))} doctor"
            if name == "desktop"
            else "maka doctor"
        )
        assert advice in result.stderr and "maka import" in result.stderr, (name, result.stderr)
        assert "Traceback" not in result.stderr, name
        assert _digest(database) == before, f"{name} changed the damaged database"
    doctor = run_maka(data_dir, "doctor")
    assert doctor.returncode == 1
    # The commands send the user to doctor: it says what to do, never "run maka doctor" again.
    said = " ".join(doctor.stdout.split())
    assert "[store_corrupt]" in said, said
    assert "Restore the data folder from a backup" in said and "maka import" in said, said
    assert "Run maka doctor" not in said, said
    assert _digest(database) == before


def test_a_clean_close_lets_the_next_start_skip_the_whole_file_check(tmp_path: Path) -> None:
    """The stamp of a clean close is what makes the next start cheap; a file changed behind
    Maka's back (even with its modification time put back) no longer matches it."""
    import os

    from storage.ledger.store_verification import _current_stamp, _read_stamp

    data_dir, _, _ = _populated(tmp_path)
    database = data_dir / DATABASE_NAME
    assert _read_stamp(database) == _current_stamp(database)
    info = database.stat()
    with database.open("r+b") as file:
        file.seek(info.st_size - 10)
        file.write(b"\0" * 10)
    os.utime(database, ns=(info.st_atime_ns, info.st_mtime_ns))  # hide the modification time
    assert _read_stamp(database) != _current_stamp(database)


def test_a_refused_database_with_a_wal_is_left_as_it_was(tmp_path: Path) -> None:
    """A crash leaves committed pages in the WAL; the database file is then damaged (cut
    short). Every writer refused it with "Nothing was changed", yet closing its connection
    copied the WAL into the file (SQLite's checkpoint on close): the file grew back and the WAL
    was emptied, so the state to restore from was no longer the one the user had."""
    data_dir, folder = tmp_path / "data", tmp_path / "work"
    folder.mkdir()
    crashed = maka(
        ["run", "--cwd", str(folder), "--permission-mode", "auto", "run echo hi"],
        data_dir,
        env={"MAKA_FAILPOINT": "P3"},
    )
    assert crashed.returncode == -9, crashed.stderr
    database = data_dir / DATABASE_NAME
    wal = data_dir / f"{DATABASE_NAME}-wal"
    assert wal.stat().st_size > 0  # the crash left pages there
    scratch = tmp_path / "scratch"  # read from a copy: reading the folder could checkpoint
    scratch.mkdir()
    for path in (database, wal):
        shutil.copy(path, scratch / path.name)
    [(header, _)] = committed_runs(scratch)
    with database.open("r+b") as file:
        file.truncate(database.stat().st_size - 100)  # no longer whole pages
    before = (_digest(database), _digest(wal))
    session = header.session_id
    for args in (["plan", session], ["run", "--session", session, "hello"]):
        refused = maka(args, data_dir)
        assert refused.returncode != 0 and "[store_corrupt]" in refused.stderr, refused.stderr
        assert (_digest(database), _digest(wal)) == before, args
