"""A snapshot store that borrows from the folder's Git repository, its absorption killed with a
real SIGKILL at each of its three crash points (``absorb_after_copy``, ``absorb_alternate_aside``,
``absorb_alternate_removed``; storage/checkpoints/checkpoint_borrow.py). The real ``maka run``
waits at its end for the absorption, so the failpoint fires there. The next ``maka run`` in the
same folder finds the store as a killed absorption left it and finishes the job: the store
ends self-contained, with nothing left behind, the copy already made is not made again, and
every snapshot stays whole (``maka doctor``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.maka_run import RunResult, maka
from tests.helpers.user_git import user_git

pytestmark = [
    pytest.mark.crash,
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git"),
]


def _repository(work: Path) -> None:
    for n in range(300):
        folder = work / f"pkg{n % 6}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"file {n}\n" * 300)
    user_git(work, "init", "-q")
    user_git(work, "add", "-A")
    user_git(work, "commit", "-qm", "first")
    user_git(work, "gc", "-q")  # packed, as a user's repository mostly is
    (work / "pkg1" / "f1.txt").write_text("uncommitted work\n")


def _run(data: Path, work: Path, failpoint: str | None) -> RunResult:
    env = {"MAKA_FAILPOINT": failpoint} if failpoint else None
    return maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "list files"], data, env=env
    )


def _packs(store: Path) -> list[Path]:
    return sorted((store / "objects" / "pack").glob("*.pack"))


@pytest.mark.parametrize(
    "point", ["absorb_after_copy", "absorb_alternate_aside", "absorb_alternate_removed"]
)
def test_a_killed_absorption_is_finished_by_the_next_run(tmp_path: Path, point: str) -> None:
    work, data = tmp_path / "work", tmp_path / "data"
    _repository(work)
    killed = _run(data, work, point)
    assert killed.returncode == -9, killed.stderr
    [store] = (data / "checkpoints").glob("*.git")
    alternates = store / "objects" / "info" / "alternates"
    aside = alternates.with_name("alternates.absorbing")
    scratch = store / "trees.scratch"
    # What the kill left, as the point's description says.
    left = (alternates.exists(), aside.exists(), scratch.exists(), len(_packs(store)))
    assert (
        left
        == {
            "absorb_after_copy": (True, False, True, 1),
            "absorb_alternate_aside": (False, True, True, 1),
            "absorb_alternate_removed": (False, False, True, 1),
        }[point]
    )
    copied = _packs(store)

    again = _run(data, work, None)
    assert again.returncode == 0, again.stderr
    assert not alternates.exists(), "the store still borrows"
    assert not aside.exists() and not scratch.exists(), "left behind by the killed absorption"
    # The copy the killed process made is the store's; nothing borrowed was packed twice.
    assert _packs(store) == copied
    # Every snapshot of both runs is whole without the user's repository.
    doctor = maka(["doctor"], data)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    refs = user_git(store, "--git-dir", str(store), "for-each-ref", "--format=%(objectname)")
    assert len(refs.split()) == 2
    hidden = tmp_path / "hidden.git"
    (work / ".git").rename(hidden)
    try:
        assert user_git(store, "--git-dir", str(store), "fsck", "--connectivity-only") == ""
        # The second run's snapshot holds the uncommitted work.
        shown = user_git(store, "--git-dir", str(store), "show", f"{refs.split()[-1]}:pkg1/f1.txt")
        assert shown == "uncommitted work\n"
    finally:
        hidden.rename(work / ".git")


def test_a_store_a_killed_run_left_borrowing_is_copied_in_by_the_next_command(
    tmp_path: Path,
) -> None:
    """A run killed soon after its first capture left its store reading the user's objects (a
    staged file's among them) with nobody to copy them in until the next capture: a ``git
    reset --hard`` and a ``git gc --prune=now`` in between made the snapshot of the crash
    read MISSING. ``maka doctor`` says the store still borrows, and the next command that
    owns the data folder (here a ``maka tui`` opened and left at once) copies them in."""
    work, data = tmp_path / "work", tmp_path / "data"
    _repository(work)
    (work / "staged.txt").write_text("staged, never committed\n")
    user_git(work, "add", "staged.txt")
    killed = maka(
        ["run", "--cwd", str(work), "--permission-mode", "auto", "write hello.txt saying hi"],
        data,
        env={"MAKA_FAILPOINT": "P2"},
    )
    assert killed.returncode == -9, killed.stderr
    [store] = (data / "checkpoints").glob("*.git")
    alternates = store / "objects" / "info" / "alternates"
    assert alternates.exists(), "the kill came after the copy-in: nothing to show"
    doctor = maka(["doctor", "--json"], data)
    notes = [note["code"] for note in json.loads(doctor.stdout)["notes"]]
    assert "workspace_store_borrowing" in notes, doctor.stdout

    [session] = [line.split()[0] for line in maka(["sessions"], data).stdout.splitlines()[:1]]
    opened = maka(["tui", "--session", session], data, stdin="/quit\n")
    assert opened.returncode == 0, opened.stderr
    assert not alternates.exists(), "the store still borrows"

    user_git(work, "reset", "-q", "--hard")
    user_git(work, "gc", "-q", "--prune=now")
    listed = maka(["checkpoints", session], data)
    assert "present" in listed.stdout and "MISSING" not in listed.stdout, listed.stdout
    assert maka(["doctor"], data).returncode == 0
