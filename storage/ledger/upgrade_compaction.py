"""Giving back the space an upgrade freed: the one-time ``VACUUM`` after schema 4's rebuild.

The upgrade to schema 4 (``storage/ledger/schema_v4.py``) copies the four largest tables into new
ones
and drops the old ones, so the file ends about twice its size, half of it free pages that only
later writes reuse. Right after that upgrade has committed, ``compact_after_upgrade`` rebuilds
the file at its live size, within the same step of opening the store (the desktop's status bar
already says the saved data is being upgraded).

- ``VACUUM`` runs outside any transaction, on the writer connection, after the upgrade's
  ``COMMIT``: the upgrade is durable before the compaction starts, and nothing the compaction does
  can undo it.
- In WAL mode ``VACUUM`` builds the compacted copy in a temporary database (SQLite's temporary
  directory), then writes it into the WAL as one transaction: a process killed while it runs
  leaves the upgraded database as it was committed (the WAL's uncommitted frames are ignored);
  killed after it, the next connection reads the compacted database from the WAL. The
  checkpoint that follows writes the WAL back into the file and truncates both; a kill during it
  is redone from the intact WAL by the next connection.
- The space it needs is SQLite's own: the temporary copy and its WAL, each the size of the live
  data. The upgrade's WAL is checkpointed and truncated first so that its frames are not on disk
  at the same time. When the disk (or the temporary directory) is too full, ``VACUUM`` fails with
  nothing changed: the compaction is skipped, the WAL truncated again, a warning logged, and the
  upgraded store opens as usual (its free pages are reused by later writes).

Crash points (``docs/crash-contract.md``): ``migration_compacting`` (inside ``VACUUM``, while it
builds its copy under the write lock, before it writes anything it could commit) and
``migration_after_compaction`` (``VACUUM`` committed into the WAL, the file not yet rewritten
from it). Between the two, ``VACUUM`` writes its copy's frames into the WAL and then its commit
frame: a kill there leaves frames no reader uses (SQLite counts only frames up to a commit
frame), so the database is the one either point leaves.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from runtime.ledger.crash_points import CrashPoint, armed_crash_point, failpoint

_log = logging.getLogger(f"maka.{__name__}")  # the host logs "maka" to its log file

# ``migration_compacting`` fires after this many of VACUUM's virtual-machine steps.
_KILL_AFTER_STEPS = 10_000


@dataclass(frozen=True, slots=True)
class Compaction:
    """What the compaction did: the database's bytes on disk (file + WAL) before and after, and
    why it was skipped (empty when it ran)."""

    bytes_before: int
    bytes_after: int
    skipped: str = ""


def compact_after_upgrade(conn: sqlite3.Connection, path: Path) -> Compaction:
    """``VACUUM`` the upgraded database at ``path`` (``conn`` is its writer, outside any
    transaction), then write the result back into the file. Never raises ``sqlite3.Error``: a
    compaction that cannot run is skipped and logged; the upgrade already committed."""
    before = _bytes_on_disk(path)
    try:
        _truncate_wal(conn)
        with _killed_while_vacuuming(conn):
            conn.execute("VACUUM")
    except sqlite3.Error as error:
        _give_back_wal(conn)
        reason = f"{type(error).__name__}: {error}"
        _log.warning(
            "the upgraded database %s was not compacted (%s); it keeps %d bytes, whose free "
            "pages later writes reuse",
            path,
            reason,
            _bytes_on_disk(path),
        )
        return Compaction(before, _bytes_on_disk(path), skipped=reason)
    failpoint(CrashPoint.MIGRATION_AFTER_COMPACTION)
    _give_back_wal(conn)
    after = _bytes_on_disk(path)
    _log.info("the upgraded database %s was compacted from %d to %d bytes", path, before, after)
    return Compaction(before, after)


def _truncate_wal(conn: sqlite3.Connection) -> None:
    """Write the WAL back into the file and truncate it to zero bytes. Best effort: a reader in
    another process may hold it (``busy`` in the result), which only costs its space a while
    longer."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _give_back_wal(conn: sqlite3.Connection) -> None:
    try:
        _truncate_wal(conn)
    except sqlite3.Error as error:
        _log.warning("the WAL could not be truncated after the upgrade: %s", error)


def _bytes_on_disk(path: Path) -> int:
    total = 0
    for name in (path, path.with_name(path.name + "-wal")):
        with suppress(OSError):
            total += name.stat().st_size
    return total


@contextmanager
def _killed_while_vacuuming(conn: sqlite3.Connection) -> Iterator[None]:
    """With ``migration_compacting`` armed: SIGKILL the process from inside ``VACUUM``, once it
    has run ``_KILL_AFTER_STEPS`` virtual-machine steps (building its compacted copy, which
    holds the write lock and commits nothing yet). Otherwise nothing."""
    if armed_crash_point() is not CrashPoint.MIGRATION_COMPACTING:
        yield
        return

    def kill() -> int:
        failpoint(CrashPoint.MIGRATION_COMPACTING)
        return 0

    conn.set_progress_handler(kill, _KILL_AFTER_STEPS)
    try:
        yield
    finally:
        conn.set_progress_handler(None, 0)
