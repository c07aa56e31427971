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


def test_a_file_behind_a_folder_replaced_by_a_link_is_deleted_not_left_out(
    tmp_path: Path,
) -> None:
    """``src`` moved elsewhere and replaced by a link to it: ``src/m.py`` is gone from the
    folder (``git status`` says deleted), though ``src/m.py`` still opens through the link.
    The plan said "left out ... still in the folder" of it, while the model was told deleted."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere" / "src"
    elsewhere.mkdir(parents=True)
    (elsewhere / "m.py").write_text("print(1)\n")
    work.mkdir()
    os.symlink(elsewhere, work / "src")
    (work / "file").write_text("a file where a folder was\n")
    (work / "lib").mkdir()
    (work / "lib" / "kept.env").write_text("now ignored\n")
    changes = [
        TreeChange("src/m.py", PathChange.DELETED),
        TreeChange("src", PathChange.ADDED),
        TreeChange("file/inner.txt", PathChange.DELETED),
        TreeChange("lib/kept.env", PathChange.DELETED),
    ]
    assert still_there(changes, str(work)) == ("lib/kept.env",)
