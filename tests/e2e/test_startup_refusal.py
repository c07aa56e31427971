"""The refusal screens: a store the program must not open stops ``maka`` with a clear message,
exit 1, and nothing modified (the database bytes are unchanged, the lock is released)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from storage.instance_lock import LOCK_FILE_NAME
from tests.helpers.maka_process import run_maka, start_main

pytestmark = pytest.mark.e2e


def _newer_database(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE future (x)")
    conn.execute("PRAGMA user_version = 999")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda p: p.write_bytes(b"this is not a database at all" * 100), "store_corrupt"),
        (_newer_database, "schema_newer_than_program"),
    ],
    ids=["corrupt", "newer"],
)
def test_a_refused_store_exits_1_with_its_code_and_changes_nothing(
    data_dir: Path, make: object, code: str
) -> None:
    database = data_dir / "runtime.sqlite"
    make(database)  # type: ignore[operator]
    before = database.read_bytes()
    # With a renderer allowed but no display (offscreen), the message goes to stderr only.
    result = run_maka(data_dir, extra_env={"MAKA_NO_RENDERER": "0"})
    assert result.returncode == 1, result.stderr
    assert f"maka: error [{code}]:" in result.stderr
    assert "Traceback" not in result.stderr
    assert database.read_bytes() == before
    assert not (data_dir / "runtime.sqlite-wal").exists()
    assert not (data_dir / LOCK_FILE_NAME).exists()


def test_a_refused_store_is_never_announced_ready(data_dir: Path) -> None:
    """The main process listens before its store opens (a window can show "Opening…"), but it
    says it is ready only once the store is open: a damaged store is refused, never ready."""
    (data_dir / "runtime.sqlite").write_bytes(b"this is not a database at all" * 100)
    refused = run_maka(data_dir)
    assert refused.returncode == 1, refused.stderr
    assert "maka: error [store_corrupt]:" in refused.stderr
    assert refused.stdout.startswith("MAKA_MAIN_LISTENING socket=")
    assert "MAKA_MAIN_READY" not in refused.stdout


def test_a_healthy_store_is_announced_ready_after_it_listens(data_dir: Path) -> None:
    main = start_main(data_dir).wait_ready()
    try:
        deadline = time.monotonic() + 60
        while not any(line.startswith("MAKA_MAIN_READY") for line in main.stdout_lines):
            assert time.monotonic() < deadline, main.stderr()
            assert main.process.stdout is not None
            main.stdout_lines.append(main.process.stdout.readline())
        ready = next(line for line in main.stdout_lines if line.startswith("MAKA_MAIN_READY"))
        assert main.stdout_lines[0].startswith("MAKA_MAIN_LISTENING")
        assert f"socket={main.socket_name} token={main.token} " in ready
    finally:
        main.stop()
