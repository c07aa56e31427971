"""A file the user's Git tracks is never ignored (docs/design/workspace.md section 1,
"Ignored, unless tracked").

Git counts a path as ignored only while it does not track it: a file committed before its folder
went into ``.gitignore``, or added with ``git add -f``, shows in ``git status`` when it changes,
and a clone holds it. Snapshots follow Git: an entry of the private index that the ignore rules
match leaves the snapshot only when the user's Git does not track it. Otherwise a restored copy
(a clone at the user's HEAD with the snapshot's files on top) would lack the file, and ``git
status`` there would show it deleted.

The user's index is read, never written: the index of the folder's own repository, or, for a
folder inside a repository (a package of a monorepo), that repository's entries under it. An
index that cannot be read (a split index, say) tracks nothing here, and the rules apply as they
did. The entries kept that way are noted beside the private index (``<index>.tracked``), with
the user's index's size, time and inode when it was read: when that changes (the user's Git
wrote its index), each is looked up again, and one the user no longer tracks leaves the
snapshot as any ignored path does, while a file the ignore rules match that the user has since
added (``git add -f`` after the first capture) joins it. The note is kept with no entries too,
so that the user's index is looked at again only when it changes.

Maka's own folder at the top (``.maka``) and the older marker stay out whatever the user's Git
tracks: the policy leaves them out of every capture (a committed marker would otherwise make
every restored copy disagree with its snapshot).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from runtime.ledger.checkpoint_ports import CheckpointError
from storage.checkpoints.checkpoint_borrow import enclosing_repository, user_repository
from storage.checkpoints.checkpoint_git import GitRunner
from storage.checkpoints.checkpoint_permissions import RECORD_DIR
from storage.checkpoints.checkpoint_subindex import read_entries, sub_index
from storage.private_files import private_opener
from storage.sessions.workspace_identity import LEGACY_MARKER_NAME

_SUFFIX = ".tracked"
_OWN_DIR = os.fsencode(RECORD_DIR) + b"/"
_OWN_MARKER = os.fsencode(LEGACY_MARKER_NAME)


def own_path(name: bytes) -> bool:
    """Whether a path is Maka's own (its folder at the top, or the older marker): never in a
    snapshot, whatever the user's Git tracks."""
    return name.startswith(_OWN_DIR) or name == _OWN_MARKER


def _user_index(folder: Path) -> tuple[Path, bytes] | None:
    """The user's index file for ``folder`` and the prefix of the folder's entries in it
    (``b""``, or ``b"pkg/"`` for a folder inside a repository); None when there is none."""
    user = user_repository(folder)
    if user is not None:
        return user.git_dir / "index", b""
    enclosing = enclosing_repository(folder)
    if enclosing is None:
        return None
    user, top = enclosing
    inside = Path(os.path.abspath(folder)).relative_to(top).as_posix()
    return user.git_dir / "index", os.fsencode(inside) + b"/"


def _signature(path: Path) -> str:
    try:
        info = os.stat(path)
    except OSError:
        return ""
    return f"{info.st_size} {info.st_mtime_ns} {info.st_ino}"


def tracked(folder: Path, names: Iterable[bytes]) -> tuple[set[bytes], str]:
    """Which of ``names`` (paths relative to ``folder``) the user's Git tracks, and the
    signature of the index that says so ("" when there is no index to read)."""
    wanted = {name for name in names if not own_path(name)}
    found = _user_index(folder)
    if found is None:
        return set(), ""
    path, prefix = found
    signature = _signature(path)
    if not wanted:
        return set(), signature
    try:
        data = path.read_bytes()
    except OSError:
        return set(), ""
    entries = read_entries(data)
    if entries is None:
        return set(), ""
    size = len(prefix)
    held = {
        entry.name[size:]
        for entry in entries
        if entry.name.startswith(prefix) and entry.name[size:] in wanted
    }
    return held, signature


def tracked_and_ignored(
    runner: GitRunner, folder: Path, git_dir: Path, scratch: Path
) -> tuple[list[bytes], str]:
    """The files the user's Git tracks that the ignore rules match, relative to ``folder``
    (for an index that starts empty: its listing of new files leaves them out), and the
    signature of the user's index; read from a copy of that index (``scratch``, in the
    private repository's folder), never from the user's own file."""
    found = _user_index(folder)
    if found is None:
        return [], ""
    path, prefix = found
    signature = _signature(path)
    try:
        data = path.read_bytes()
        part = sub_index(data, prefix) if prefix else data
        if part is None:
            return [], ""
        with open(scratch, "wb", opener=private_opener) as out:
            out.write(part)
        listed = runner.run(
            ["ls-files", "-z", "--cached", "--ignored", "--exclude-standard"],
            git_dir=git_dir,
            work_tree=folder,
            index=scratch,
        )
    except (OSError, CheckpointError):
        return [], ""  # not to be read: the rules apply as they did
    finally:
        scratch.unlink(missing_ok=True)
    return [raw for raw in listed.split(b"\0") if raw and not own_path(raw)], signature


def _notes(index: Path) -> Path:
    return index.with_name(index.name + _SUFFIX)


def note_kept(index: Path, kept: set[bytes], signature: str) -> None:
    """Note the ignored entries kept because the user's Git tracks them, and the signature of
    the user's index they were read from ("" when it has none: looked at again once it has)."""
    notes = _notes(index)
    scratch = notes.with_name(notes.name + ".new")
    with open(scratch, "wb", opener=private_opener) as out:
        out.write(signature.encode() + b"\n" + b"\0".join(sorted(kept)))
    os.replace(scratch, notes)


def forget_kept(index: Path) -> None:
    _notes(index).unlink(missing_ok=True)


def share_kept(index: Path, copy: Path) -> None:
    """Give ``copy`` (an index made from ``index``: an observation's) the note ``index`` has,
    or none when it has none: a note left from an earlier copy would say the user's index was
    already looked at, and a file added with ``git add -f`` since the last capture would be in
    one observation and not in the next."""
    notes = _notes(copy)
    try:
        body = _notes(index).read_bytes()
    except OSError:
        notes.unlink(missing_ok=True)
        return
    with open(notes, "wb", opener=private_opener) as out:
        out.write(body)


def noted(index: Path) -> tuple[str, set[bytes]] | None:
    """The signature of the user's index when last looked at and the entries kept then; None
    without a note (never looked at, or no user index)."""
    try:
        head, _, body = _notes(index).read_bytes().partition(b"\n")
    except OSError:
        return None
    return head.decode("ascii", "replace"), {name for name in body.split(b"\0") if name}


def index_moved(folder: Path, before: tuple[str, set[bytes]] | None) -> bool:
    """Whether the user's index may have been written since ``before`` was noted (always,
    with no note: a store written before the note was kept for every look)."""
    found = _user_index(folder)
    if found is None:
        return False
    return before is None or _signature(found[0]) != before[0]


def newly_tracked(
    runner: GitRunner, folder: Path, git_dir: Path, scratch: Path, kept: set[bytes]
) -> tuple[list[bytes], str]:
    """The files the user's Git tracks that the ignore rules match and that are not among
    ``kept`` (the ones the snapshots already hold that way): added since, with ``git add -f``;
    and the signature of the user's index."""
    names, signature = tracked_and_ignored(runner, folder, git_dir, scratch)
    return [name for name in names if name not in kept], signature


def no_longer_tracked(
    index: Path, folder: Path, before: tuple[str, set[bytes]] | None
) -> list[bytes]:
    """The entries kept because the user's Git tracked them (``before``, as noted) that it
    tracks no more, looked up only when its index changed since; the note is brought up to
    date."""
    if before is None or not before[1]:
        return []
    found = _user_index(folder)
    if found is not None and _signature(found[0]) == before[0]:
        return []
    kept = before[1]
    still, signature = tracked(folder, kept)
    with contextlib.suppress(OSError):
        note_kept(index, still, signature)
    return sorted(kept - still)
