"""Which paths a drift calls deleted are still in the folder, so listed as left out by the
snapshots (an ignore rule came in, or the file grew over the size limit) rather than deleted
(runtime/continuation/checkpoint_evidence.py). A file replaced by a folder of its name is not
one of them: the file is gone (``maka plan`` said "left out ... an ignore rule came in since"
of it, with no rule)."""

from __future__ import annotations

import os
from pathlib import Path

from runtime.continuation.checkpoint_evidence import still_there
from runtime.ledger.checkpoint_ports import PathChange, TreeChange


def test_only_what_is_not_a_folder_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "ignored.env").write_text("kept, now ignored\n")
    (tmp_path / "report").mkdir()  # was a file
    (tmp_path / "report" / "p.txt").write_text("x\n")
    (tmp_path / "target").mkdir()
    os.symlink("target", tmp_path / "link")  # a link to a folder is a link
    changes = [
        TreeChange("ignored.env", PathChange.DELETED),
        TreeChange("report", PathChange.DELETED),
        TreeChange("report/p.txt", PathChange.ADDED),
        TreeChange("link", PathChange.DELETED),
        TreeChange("gone.txt", PathChange.DELETED),
        TreeChange("edited.txt", PathChange.MODIFIED),
    ]
    assert still_there(changes, str(tmp_path)) == ("ignored.env", "link")


def test_a_name_that_is_not_utf8_is_found_by_its_bytes(tmp_path: Path) -> None:
    """Changes name a file whose name is not UTF-8 with its stray bytes as ``\\xNN`` (as
    ``list_dir`` writes it): that shown name is not the file's, and the file was not found."""
    Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9.env")).write_text("still here\n")
    changes = [
        TreeChange("caf\\xe9.env", PathChange.DELETED),
        TreeChange("gone\\xff.txt", PathChange.DELETED),
    ]
    assert still_there(changes, str(tmp_path)) == ("caf\\xe9.env",)
