"""The refusal screen does not repeat the advice the store's message carries for the terminal."""

from __future__ import annotations

import errno

from app.commands.gui_cmd import refusal_detail
from storage.ledger.store_creation import os_refusal
from storage.ledger.store_verification import damaged


def test_the_screen_shows_the_finding_without_repeating_the_advice() -> None:
    corrupt = damaged("table meta: page 3 is not a b-tree page")
    assert "maka doctor" in corrupt.message and "maka import" in corrupt.message
    assert refusal_detail(corrupt.message) == (
        "the database is damaged (table meta: page 3 is not a b-tree page)."
    )
    full = os_refusal(OSError(errno.ENOSPC, "No space left on device"), "creating the database")
    assert str(full.code) == "disk_full" and "Free some space" in full.message
    assert refusal_detail(full.message) == "the disk is full: creating the database failed."
    read_only = os_refusal(OSError(errno.EROFS, "Read-only file system"), "opening the lock file")
    assert str(read_only.code) == "data_dir_read_only"
    assert "write access" not in refusal_detail(read_only.message)
