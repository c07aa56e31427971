"""The workspace checkpoint store: Git object storage driven through the user's ``git``
(docs/design/workspace.md sections 1 to 3).

One private bare repository per workspace identity, ``<data>/checkpoints/<workspaceId>.git``,
with the session folder as work tree and a private persistent index beside it
(``<workspaceId>.index``): the index keeps Git's stat cache, so a capture after a small change
costs little more than a ``stat`` of every file. The folder's own ``.git`` is never touched
(``checkpoint_git``).

Policy (its canonical JSON's sha256 is the ``policyHash``): everything under the folder except
``.git`` directories, paths the folder's own ``.gitignore`` files or its repository's
``info/exclude`` ignore, paths the rules of a repository enclosing the folder ignore, paths
the user's excludes file ignores in a folder that is in a Git repository
(``checkpoint_enclosing``), the legacy workspace marker
``.maka-workspace.json``, the app's own ``.maka`` folder at the top (where the workspace marker
``.maka/workspace.json`` and its ``.gitignore`` live, and the name under which each snapshot
carries its permission record: a folder's own ``.maka`` is never captured, so a restore never
writes one) and files over 50 MiB (listed as skipped in the commit
message). Symbolic links are stored as links, never followed; empty folders are recorded too
(``checkpoint_empty_dirs``), and every entry's permission bits (``checkpoint_permissions``).
Content is stored byte for byte (no line-ending conversion, no filters).

A capture: list what changed since the index last saw the folder (``ls-files --others`` and
``diff-files``, side by side: every entry whose stat data moved is listed, a touch or a chmod
too), stage it (``update-index``: a touched file's stat data is refreshed on the way, so it is
compared once, not at every capture), update the permission record (only for the paths staged,
when the index is still the one the previous capture left: ``checkpoint_permissions``),
``write-tree``, then the commit (no parent: retention frees whatever only a deleted ref
reached) and the run's ref, written as Git writes them (``checkpoint_objects``). An
entry that changed type (a folder now a file or a link, a file now a folder) is an ordinary
change: the old entries leave the index, the new one comes in. An
observation does the same on a second name of the index and stops at the tree: no commit, no
ref.
A per-workspace lock file serialises captures across processes; an ``index.lock`` left by a
capture that was killed is removed under that lock.

The first capture of a folder that is a Git repository starts from a copy of the user's index
and borrows their object store, read-only, until the store has copied in what it needs
(``checkpoint_borrow``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from runtime.ledger.canonical_codec import canonical_json_bytes
from runtime.ledger.checkpoint_ports import (
    CheckpointError,
    CheckpointMode,
    ModeDecision,
    Snapshot,
    TreeChange,
)
from runtime.ledger.codes import CheckpointFailureCode, CheckpointUnavailableCode, RestoreCode
from storage.checkpoints.checkpoint_borrow import (
    absorb,
    borrowed_from,
    follow_the_folder,
    seed,
    settle_interrupted_absorption,
    stage_held,
    start_tree_copy,
)
from storage.checkpoints.checkpoint_borrow import write_tree as borrowing_write_tree
from storage.checkpoints.checkpoint_empty_dirs import (
    COMPARE_OPTIONS,
    create_empty_dirs,
    empty_dirs_under,
    graft_empty_dirs,
    shown_path,
    tree_changes,
)
from storage.checkpoints.checkpoint_enclosing import (
    INHERITED_RULES,
    enclosing_rules,
    inherited_rules,
    own_rules,
    rules_to_inherit,
    user_rules,
)
from storage.checkpoints.checkpoint_git import (
    MIN_GIT_VERSION,
    GitCommand,
    GitRunner,
    Started,
    find_git,
)
from storage.checkpoints.checkpoint_index import (
    MissingObject,
    index_here,
    record_and_tree,
    stage_paths,
)
from storage.checkpoints.checkpoint_objects import (
    DAMAGED_DIR,
    STANDS_FOR,
    blob_id,
    plain_repository,
    set_ref,
    write_commit,
    write_object,
)
from storage.checkpoints.checkpoint_permissions import (
    RECORD_DIR,
    RECORD_PATH,
    CachedBits,
    FoundBits,
    LookAhead,
    add_folders,
    apply_record,
    apply_root,
    permission_changes,
    permission_record,
    read_cached,
    read_record,
    stage_record,
    updated_record,
    write_cached,
)
from storage.checkpoints.checkpoint_presence import (
    EarlyAnswers,
    read_last,
    remember_last,
    snapshots_whole,
    tree_whole,
)
from storage.checkpoints.checkpoint_remotes import carry_local_refs, mirror_remotes
from storage.checkpoints.checkpoint_share import share_objects
from storage.checkpoints.checkpoint_subindex import holds_skipped_entries
from storage.checkpoints.checkpoint_tracked import (
    forget_kept,
    index_moved,
    newly_tracked,
    no_longer_tracked,
    note_kept,
    noted,
    own_path,
    share_kept,
    tracked,
)
from storage.checkpoints.checkpoint_verify import (
    DamagedObject,
    TreeCheck,
    check_trees,
    damage_told,
    known_damaged_objects,
    set_damaged_aside,
)
from storage.private_files import ensure_private_dir, private_opener
from storage.sessions.workspace_identity import LEGACY_MARKER_NAME

CHECKPOINTS_DIR = "checkpoints"
CHECKPOINTS_ENV = "MAKA_WORKSPACE_CHECKPOINTS"


# What Maka keeps at the top of its data folder (the ledger and its companions, the snapshot
# store, logs, the desktop's endpoint, settings, verdicts, the lock, the background shells).
_DATA_FOLDER_ENTRIES = "".join(
    f"/{name}\n"
    for name in (
        "runtime.sqlite",
        "runtime.sqlite-*",
        "runtime.sqlite.*",
        "checkpoints/",
        "logs/",
        "ipc/",
        "settings.json",
        "resume-verdicts.json",
        "maka-main.lock",
        "background-shells.jsonl",
    )
)


def data_folder_rule(folder: Path, data_dir: Path) -> str:
    """The exclude rule that keeps Maka's own data folder out of the snapshots of a folder
    holding it (``MAKA_DATA_DIR=data`` in the project, a session in the home folder with the
    default data folder): every capture copied the ledger and the snapshot store into the
    store itself, which grew without bound, and every drift check found them changed. The data
    folder's own entries when it is ``folder`` itself (``MAKA_DATA_DIR=.``); "" when it is not
    inside ``folder`` (or its name cannot be written as a rule: a newline in it)."""
    inner, outer = os.path.realpath(data_dir), os.path.realpath(folder)
    if inner == outer:
        return _DATA_FOLDER_ENTRIES
    if not inner.startswith(outer.rstrip(os.sep) + os.sep):
        return ""
    relative = os.path.relpath(inner, outer)
    if "\n" in relative or "\r" in relative:
        return ""
    escaped = re.sub(r"([\\*?\[])", r"\\\1", relative.replace(os.sep, "/"))
    stripped = escaped.rstrip(" ")
    escaped = stripped + "\\ " * (len(escaped) - len(stripped))  # trailing spaces count
    return f"/{escaped}/\n"


_OFF_WORDS = ("off", "0", "false", "no")
_ON_WORDS = ("", "on", "1", "true", "yes")
_told_unknown: set[str] = set()


def checkpoints_turned_off(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``MAKA_WORKSPACE_CHECKPOINTS`` turns workspace checkpoints off (``off``, ``0``,
    ``false``, ``no``) in ``environ`` (this process's by default). Any other word leaves them
    on, said once (a typo such as ``of`` silently kept them on)."""
    env = os.environ if environ is None else environ
    value = env.get(CHECKPOINTS_ENV, "").strip().lower()
    if value not in _OFF_WORDS and value not in _ON_WORDS and value not in _told_unknown:
        _told_unknown.add(value)
        _log.warning(
            "%s=%r is neither on nor off (on, 1, true, yes / off, 0, false, no): workspace "
            "snapshots stay on",
            CHECKPOINTS_ENV,
            value[:40],
        )
    return value in _OFF_WORDS


TIP_REF = "refs/maka-tip"  # the newest checkpoint, in stores from before commits had no parent
# A restored or branched copy's store: the snapshot the copy was made from, so that the objects
# it was given stay packed and kept until the copy has a checkpoint of its own (retention).
START_REF = "refs/maka-start"
RESTORES_LOG = "restores.jsonl"
# The legacy marker at the top of the folder; the current one is in ``RECORD_DIR`` (``.maka``),
# which the exclude rules leave out as a whole. The policy's wording is unchanged, so its hash
# (and every checkpoint taken before) stays valid.
MARKER_NAME = LEGACY_MARKER_NAME
MAX_FILE_BYTES = 50 * 1024 * 1024
DEFAULT_SIZE_BUDGET = 2 * 1024 * 1024 * 1024
# Highest-precedence attributes: store every file as it is on disk.
_ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding -crlf\n"
# ``.maka`` at the top whatever it is: a file or a link of that name would meet the permission
# record's entry (``.maka/permissions``), and no capture of the folder could be written.
_EXCLUDE = f"/{MARKER_NAME}\n/{RECORD_DIR}\n"
POLICY: dict[str, object] = {
    "version": 2,
    "excluded": [
        ".git directories",
        "paths ignored by the folder's .gitignore files",
        "paths ignored by the rules of a repository enclosing the folder",
        "paths ignored by the info/exclude of the folder's own repository",
        "paths ignored by the user's excludes file (core.excludesFile) in a Git repository",
        MARKER_NAME,
        f"{RECORD_DIR} at the top of the folder",
    ],
    "maxFileBytes": MAX_FILE_BYTES,
    "symlinks": "stored_as_links",
    "emptyDirectories": "recorded",
    "permissions": "recorded",
    "content": "byte_for_byte",
}
POLICY_HASH = hashlib.sha256(canonical_json_bytes(POLICY)).hexdigest()
# The commit message's heading over the paths a new ignore rule took out of the snapshot.
NOW_IGNORED = "left out (now ignored):"
# The exclude rules the persistent index was last swept with (a change sweeps it again).
SWEPT_RULES = "exclude.swept"
_log = logging.getLogger(f"maka.{__name__}")  # the host logs "maka" to its log file
_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_LFS = re.compile(rb"filter\s*=\s*lfs")
_RECENT_NS = 3 * 10**9


def workspace_key(workspace_identity: str) -> str:
    """The file name stem of a workspace's repository: the marker's UUID when the identity is
    ``workspace:v1:<uuid>``, else a digest of the identity."""
    tail = workspace_identity.rsplit(":", 1)[-1]
    if _SAFE_ID.match(tail) and not tail.startswith("."):
        return tail
    return hashlib.sha256(workspace_identity.encode("utf-8")).hexdigest()[:32]


class GitCheckpointStore:
    """``CheckpointCarrier`` over private bare repositories under ``<data_dir>/checkpoints``."""

    def __init__(
        self,
        data_dir: Path,
        *,
        git: GitCommand | Literal["find"] | None = "find",
        size_budget: int = DEFAULT_SIZE_BUDGET,
        max_file_bytes: int = MAX_FILE_BYTES,
        turned_off: bool = False,
        look_only: bool = False,
    ) -> None:
        self._turned_off = turned_off
        self.root = Path(data_dir) / CHECKPOINTS_DIR
        # A store that only looks (``maka plan``, ``maka timeline``): nothing is written under
        # ``root`` (``_Overlay``), so it reads a data folder it cannot write, or on a full disk.
        self._overlay = _Overlay(self.root, self) if look_only else None
        # "find": the ``git`` on PATH; None: run as if there were none.
        self._git = find_git() if isinstance(git, str) else git
        self._size_budget = size_budget
        self._max_file = max_file_bytes
        self._runner: GitRunner | None = None
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._claim_guard = threading.Lock()  # a restore claims its folder (``_claiming``)
        self._grafts: dict[tuple[str, str, tuple[str, ...], tuple[int, int] | None], str] = {}
        self._left_out: list[str] = []  # the capture in progress: paths now ignored
        self._absorbing: dict[str, threading.Thread] = {}
        self._early = EarlyAnswers()  # presence decisions an observation started
        self._compared = _Comparisons()  # comparisons an observation made ahead of need

    @classmethod
    def from_environment(
        cls, data_dir: Path, environ: Mapping[str, str] | None = None, *, look_only: bool = False
    ) -> GitCheckpointStore:
        """The store the app uses: ``MAKA_WORKSPACE_CHECKPOINTS=off`` turns checkpoints off
        (runs then declare ``unavailable`` / ``checkpoint_turned_off`` and resume works as in
        Phase 1). ``look_only``: for the commands that only read (``maka plan``, ``maka
        timeline``), which must write nothing in the data folder (``_Overlay``)."""
        store = cls(data_dir, turned_off=checkpoints_turned_off(environ), look_only=look_only)
        from storage.ledger.database_choice import uses_postgres

        if uses_postgres(data_dir, environ):
            store.missing_note = (
                "the ledger is on a PostgreSQL server shared by several hosts, and each host keeps"
                " its snapshots in its own data folder: a snapshot another host took is in that"
                " host's data folder, not in this one"
            )
        return store

    missing_note: str | None = None
    """Said with a missing snapshot's park: where it may be instead (a shared ledger)."""

    @property
    def turned_off(self) -> bool:
        """``MAKA_WORKSPACE_CHECKPOINTS=off`` in this process: its runs take no snapshots."""
        return self._turned_off

    @property
    def git(self) -> GitCommand | None:
        return self._git

    @property
    def usable(self) -> bool:
        """Whether a git command new enough to read and write checkpoints was found."""
        return self._git is not None and self._git.version >= MIN_GIT_VERSION

    # ---- paths ---------------------------------------------------------------------------------
    def git_dir(self, workspace_identity: str) -> Path:
        real = self.root / f"{workspace_key(workspace_identity)}.git"
        return real if self._overlay is None else self._overlay.git_dir(real)

    def index_path(self, workspace_identity: str) -> Path:
        return self.root / f"{workspace_key(workspace_identity)}.index"

    def _git_runner(self) -> GitRunner:
        if self._git is None or self._git.version < MIN_GIT_VERSION:
            raise CheckpointError(
                CheckpointFailureCode.CHECKPOINT_GIT_FAILED, "git is not available"
            )
        if self._runner is None:
            home = ensure_private_dir(
                self.root / ".home" if self._overlay is None else self._overlay.place / ".home"
            )
            self._runner = GitRunner(self._git, home)
        return self._runner

    def git_runner(self) -> GitRunner:
        """The runner for the private repositories; raises ``CheckpointError`` without git."""
        return self._git_runner()

    def ensure_repo(self, workspace_identity: str) -> Path:
        """The workspace's private repository, created when missing (call under ``locked``)."""
        return self._ensure_repo(workspace_identity)

    def locked(self, workspace_identity: str) -> contextlib.AbstractContextManager[None]:
        """The per-workspace lock every capture holds."""
        return self._locked(workspace_identity)

    def _ensure_repo(self, workspace_identity: str, folder: Path | None = None) -> Path:
        """The workspace's private repository, its attributes and its exclude rules (the
        marker, the app's own folder and, with ``folder``, the rules of a repository enclosing
        it, read afresh each time)."""
        git_dir = self.git_dir(workspace_identity)
        if not (git_dir / "HEAD").is_file():
            ensure_private_dir(git_dir.parent)
            self._git_runner().init_bare(git_dir)
        info = git_dir / "info"
        ensure_private_dir(info)
        exclude = _EXCLUDE
        if folder is not None:
            # The user's rules first, the app's own last: no negation of theirs undoes them.
            where = Path(os.path.abspath(folder))
            exclude = user_rules(where) + enclosing_rules(where) + inherited_rules(where)
            exclude += own_rules(where) + _EXCLUDE + data_folder_rule(where, self.root.parent)
        elif (info / "exclude").is_file():
            exclude = (info / "exclude").read_text("utf-8", "surrogateescape")
        for name, text in (("attributes", _ATTRIBUTES), ("exclude", exclude)):
            path = info / name
            if not path.is_file() or path.read_text("utf-8", "surrogateescape") != text:
                with open(
                    path, "w", encoding="utf-8", errors="surrogateescape", opener=private_opener
                ) as handle:
                    handle.write(text)
        return git_dir

    def _locked(self, workspace_identity: str) -> contextlib.AbstractContextManager[None]:
        return self._locked_key(workspace_key(workspace_identity))

    @contextlib.contextmanager
    def _locked_key(self, key: str) -> Iterator[None]:
        with self._locks_guard:
            lock = self._locks.setdefault(key, threading.Lock())
        if self._overlay is not None:
            # Only looking: no lock file, nothing of a killed capture's settled (a writer does
            # that); what this store writes goes to its own overlay.
            with lock:
                yield
            return
        with self._holding(lock, f"{key}.lock"):
            # Under the lock no capture runs, so an index.lock is a killed capture's.
            for stale in (
                self.root / f"{key}.index.lock",
                self.root / f"{key}.observe.index.lock",
            ):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
            # Likewise what a process killed inside an absorption left.
            settle_interrupted_absorption(self.root / f"{key}.git")
            yield

    @contextlib.contextmanager
    def _holding(self, lock: threading.Lock, name: str) -> Iterator[None]:
        """``lock`` (this process's threads), then the lock file ``name`` in the store's
        folder (other processes of this data folder)."""
        with lock:
            ensure_private_dir(self.root)
            with open(self.root / name, "a+b", opener=private_opener) as handle:
                _lock_file(handle)
                try:
                    yield
                finally:
                    _unlock_file(handle)

    # ---- the mode ------------------------------------------------------------------------------
    def decide_mode(self, folder: Path, workspace_identity: str) -> ModeDecision:
        """``git_v1`` when this folder can be captured faithfully, else ``unavailable`` + why."""
        if self._turned_off:
            return _unavailable(
                CheckpointUnavailableCode.CHECKPOINT_TURNED_OFF,
                f"{CHECKPOINTS_ENV} turns workspace checkpoints off",
            )
        git = self._git
        if git is None:
            return _unavailable(
                CheckpointUnavailableCode.CHECKPOINT_GIT_MISSING, "no git command on PATH"
            )
        if git.version < MIN_GIT_VERSION:
            need = ".".join(map(str, MIN_GIT_VERSION))
            return _unavailable(
                CheckpointUnavailableCode.CHECKPOINT_GIT_MISSING,
                f"{git.version_text} is older than {need}",
            )
        with self._locked(workspace_identity):
            git_dir = self._ensure_repo(workspace_identity, folder)
            listed = self._git_runner().run(
                ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                git_dir=git_dir,
                work_tree=folder,
                index=self.index_path(workspace_identity),
            )
        # Every file of the folder is looked at here, before each run's first event: paths
        # as bytes, as Git lists them (a ``Path`` per file cost more than the look itself).
        total = 0
        root = os.fsencode(folder) + b"/"
        lstat, is_reg, largest = os.lstat, stat.S_ISREG, self._max_file
        for raw in listed.split(b"\0"):
            if not raw:
                continue
            if raw.endswith(b"/") or raw == b".gitmodules" or raw.endswith(b"/.gitmodules"):
                name = os.fsdecode(raw).rstrip("/")
                return _unavailable(
                    CheckpointUnavailableCode.CHECKPOINT_NESTED_REPOSITORY,
                    f"{name} declares submodules"
                    if raw.endswith(b".gitmodules")
                    else f"{name} is a nested repository or submodule",
                )
            try:
                info = lstat(root + raw)
            except OSError:
                continue
            if is_reg(info.st_mode) and info.st_size <= largest:
                total += info.st_size
            if (raw == b".gitattributes" or raw.endswith(b"/.gitattributes")) and _uses_lfs(
                folder / os.fsdecode(raw)
            ):
                return _unavailable(
                    CheckpointUnavailableCode.CHECKPOINT_LFS_UNSUPPORTED,
                    f"{os.fsdecode(raw)} uses Git LFS filters",
                )
        if total > self._size_budget:
            return _unavailable(
                CheckpointUnavailableCode.CHECKPOINT_TOO_LARGE,
                f"the folder holds {total:,} bytes, over the {self._size_budget:,}-byte budget",
            )
        return ModeDecision(CheckpointMode.GIT_V1)

    # ---- capture and observe -------------------------------------------------------------------
    def capture(
        self,
        folder: Path,
        workspace_identity: str,
        ref: str,
        message: str,
        *,
        rebuild_index: bool = False,
    ) -> Snapshot:
        with self._locked(workspace_identity):
            git_dir = self._ensure_repo(workspace_identity, folder)
            index = self.index_path(workspace_identity)
            if follow_the_folder(self._git_runner(), git_dir, index, folder):
                rebuild_index = True
            if rebuild_index or holds_skipped_entries(index):
                # Every file hashed again, every tree written (also an index seeded from a
                # sparse one before such a seed was refused: entries the staging never looks
                # at, holding files the folder does not have).
                index.unlink(missing_ok=True)
            self._left_out = []
            ahead, copying = (None, None) if rebuild_index else self._seed(folder, git_dir, index)
            try:
                tree, skipped = self._stage_and_write_tree(
                    folder,
                    git_dir,
                    index,
                    cache=_bits_cache(index),
                    looked=ahead,
                    copying=copying,
                )
            finally:
                if copying is not None:
                    copying.cancel()  # waited for (nothing when the tree's writing did)
            rules = _read_bytes(git_dir / "info" / "exclude")
            if _read_bytes(git_dir / "info" / SWEPT_RULES) != rules:
                # The index holds nothing these rules exclude now (it was swept with them).
                with open(git_dir / "info" / SWEPT_RULES, "wb", opener=private_opener) as out:
                    out.write(rules)
            runner = self._git_runner()
            body = message.rstrip("\n") + "\n"
            # A name that is not UTF-8 is written as it is read back (``now_ignored``): with
            # U+FFFD for its undecodable bytes (a commit message is UTF-8 text).
            if skipped:
                body += "\nskipped (over the size limit):\n" + "".join(
                    f"  {_as_text(p)}\n" for p in skipped
                )
            if self._left_out:
                body += f"\n{NOW_IGNORED}\n" + "".join(
                    f"  {_as_text(p)}\n" for p in self._left_out[:200]
                )
            # No parent: a snapshot needs none to be compared or copied, and a chain would keep
            # every byte ever captured reachable from the newest ref (retention frees nothing).
            # Written as Git writes them, without two more process starts; Git does it when
            # anything is out of the ordinary (``checkpoint_objects``).
            plain = plain_repository(git_dir)
            commit = write_commit(git_dir, tree, body) if plain else None
            if commit is None:
                commit = (
                    runner.run(
                        ["commit-tree", tree, "-F", "-"], git_dir=git_dir, stdin=body.encode()
                    )
                    .decode()
                    .strip()
                )
            if not (plain and set_ref(git_dir, ref, commit)):
                runner.run(["update-ref", ref, commit], git_dir=git_dir)
            remember_last(index, commit, tree)
            if borrowed_from(git_dir) is not None:
                self._absorb_later(workspace_identity)
            return Snapshot(tree, POLICY_HASH, commit, ref, tuple(_as_text(p) for p in skipped))

    def _seed(
        self, folder: Path, git_dir: Path, index: Path
    ) -> tuple[LookAhead | None, Started | None]:
        """The first capture of a folder that is a Git repository starts from a copy of the
        user's index and borrows their objects (``checkpoint_borrow``). The permission
        record's full pass over it, which also finds its files over the size limit, starts at
        once beside the staging (``LookAhead``), and so does the copy of the trees the user's
        index holds valid (``start_tree_copy``)."""
        if index.exists():
            return None, None
        runner = self._git_runner()
        seeded = seed(runner, folder, git_dir, index)
        if seeded is None:
            return None, None
        copying = start_tree_copy(runner, git_dir, seeded.trees)
        if not index.exists():
            return None, copying
        # The copy keeps the time the user's Git last wrote its index (Git's racy-entry rule
        # reads it), which may be long before this look: a file is recent when it changed
        # shortly before the look (the seed), which the capture then takes as its own
        # reckoning (``_stage_and_write_tree_once``). Otherwise every file changed in the few
        # seconds before the user's last ``git`` command (all of a repository cloned or
        # checked out a while ago) would be looked at twice now and again by the next capture.
        since = min(time.time_ns(), seeded.written_ns) - _RECENT_NS
        try:
            look = LookAhead(
                folder, seeded.listing, seeded.left_out, recent_since=since, limit=self._max_file
            )
        except RuntimeError:  # no thread to be had: the full pass looks itself
            look = None
        return look, copying

    # ---- borrowed objects ----------------------------------------------------------------------
    def borrows(self, workspace_identity: str) -> bool:
        """Whether the workspace's repository still reads objects from the folder's own."""
        return borrowed_from(self.git_dir(workspace_identity)) is not None

    def follow_folder(self, workspace_identity: str, folder: Path) -> None:
        """The session was pointed at ``folder``, where its workspace now is: a store that
        still borrows from the folder's repository at its old place borrows from where it is
        now (``checkpoint_borrow.follow_the_folder``), so the snapshots taken before the move
        read whole again before any capture there. Never raises: the next capture does the
        same."""
        if not (self.git_dir(workspace_identity) / "HEAD").is_file():
            return
        with contextlib.suppress(CheckpointError, OSError), self._locked(workspace_identity):
            git_dir = self.git_dir(workspace_identity)
            index = self.index_path(workspace_identity)
            if follow_the_folder(self._git_runner(), git_dir, index, folder):
                index.unlink(missing_ok=True)

    def absorb_borrowed(self, workspace_identity: str) -> bool:
        """Copy in every object the workspace's snapshots borrow from the folder's own
        repository and stop borrowing (``checkpoint_borrow.absorb``); True when it borrows
        nothing any more. Raises ``CheckpointError``."""
        return self._absorb(workspace_key(workspace_identity))

    def _absorb(self, key: str) -> bool:
        git_dir = self.root / f"{key}.git"
        if borrowed_from(git_dir) is None:
            return True
        index = self.root / f"{key}.index"
        try:
            return absorb(
                self._git_runner(),
                git_dir,
                index if index.is_file() else None,
                locked=self._locked_key(key),
            )
        finally:
            self._early.forget(git_dir)  # the borrowed objects may have left with the alternate

    def opened_by_owner(self) -> int:
        """What a command that owns the data folder does with its store as it opens: removes
        the scratch indexes a killed restore left (``_sweep_restores_left_behind``), and starts
        copying in what a killed capture left borrowing (``absorb_all_later``, whose count it
        returns)."""
        if self._overlay is not None or self._turned_off:
            return 0
        _sweep_restores_left_behind(self.root)
        return self.absorb_all_later()

    def absorb_all_later(self) -> int:
        """Start copying in, in the background, what each store of this data folder still
        borrows from its folder's Git repository; how many were started. A capture starts
        that copy, and a command waits for it at its exit; a command killed before (a crash
        soon after a first capture) left its store borrowing, so that a ``git gc`` or a fresh
        clone in the folder made the snapshot of the crash read missing. Every command that
        owns the data folder starts it again when it opens (``wait_absorbing`` at its end)."""
        if self._overlay is not None or self._turned_off:
            return 0
        borrowing = self.borrowing_stores()
        for git_dir, _source in borrowing:
            self._absorb_key_later(git_dir.name[: -len(".git")])
        return len(borrowing)

    def borrowing_stores(self) -> list[tuple[Path, Path]]:
        """Each store of this data folder that still borrows, with where it borrows from."""
        try:
            stores = sorted(self.root.glob("*.git"))
        except OSError:
            return []
        found = []
        for git_dir in stores:
            source = borrowed_from(git_dir)
            if source is not None:
                found.append((git_dir, source))
        return found

    def _absorb_later(self, workspace_identity: str) -> None:
        """Absorb in the background (one at a time per workspace): a capture never waits."""
        self._absorb_key_later(workspace_key(workspace_identity))

    def _absorb_key_later(self, key: str) -> None:
        with self._locks_guard:
            running = self._absorbing.get(key)
            if running is not None and running.is_alive():
                return
            thread = threading.Thread(
                target=self._absorb_quietly, args=(key,), name="maka-absorb", daemon=True
            )
            self._absorbing[key] = thread
        thread.start()

    def _absorb_quietly(self, key: str) -> None:
        try:
            self._absorb(key)
        except (CheckpointError, OSError) as error:  # tried again after the next capture
            _log.warning("checkpoint store %s still borrows objects: %s", key, error)

    def wait_absorbing(self, timeout: float | None = None) -> bool:
        """Wait for the background absorptions in progress (tests, benches, a command's exit),
        at most ``timeout`` seconds in all; whether none is still running."""
        with self._locks_guard:
            threads = list(self._absorbing.values())
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in threads:
            thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))
        return not any(thread.is_alive() for thread in threads)

    def observe(self, folder: Path, workspace_identity: str) -> Snapshot:
        with self._locked(workspace_identity):
            git_dir = self._ensure_repo(workspace_identity, folder)
            index = self.index_path(workspace_identity)
            scratch = (self.root if self._overlay is None else self._overlay.place) / (
                f"{workspace_key(workspace_identity)}.observe.index"
            )
            last = read_last(index)
            runner = self._git_runner()
            diff_ahead: list[Started] = []

            def beside() -> None:
                # A resume asks next whether the boundary snapshot, nearly always the last one
                # taken, is whole, and how the folder differs from it: the walk runs now, and
                # the comparison starts now, beside this observation's Git calls.
                if last is not None:
                    self._early.start(runner, git_dir, last)
                    started = runner.start_ahead(_COMPARE, git_dir=git_dir)
                    if started is not None:
                        diff_ahead.append(started)

            try:
                scratch.unlink(missing_ok=True)
                share_kept(index, scratch)
                if index.is_file():
                    # A second name for the same file: Git never writes an index in place (it
                    # writes a new file and renames it over the name), so the persistent index
                    # stays as it is, and the link keeps its time (Git's racy-entry rule).
                    try:
                        os.link(index, scratch)
                    except OSError:
                        with open(scratch, "wb", opener=private_opener) as copy:
                            copy.write(index.read_bytes())
                tree, skipped = self._stage_and_write_tree(
                    folder,
                    git_dir,
                    scratch,
                    cache=_bits_cache(index),
                    keep_cache=False,
                    beside=_Once(beside),
                )
                if last is not None and diff_ahead and tree != last[1]:
                    self._compared.keep(git_dir, last[1], tree, diff_ahead[0])
            finally:
                for started in diff_ahead:
                    started.cancel()  # not needed (the same tree) or already finished
                scratch.unlink(missing_ok=True)
                forget_kept(scratch)
            return Snapshot(tree, POLICY_HASH, skipped=tuple(_as_text(p) for p in skipped))

    def _stage_and_write_tree(
        self,
        folder: Path,
        git_dir: Path,
        index: Path,
        *,
        cache: Path,
        keep_cache: bool = True,
        beside: _Once | None = None,
        looked: LookAhead | None = None,
        copying: Started | None = None,
    ) -> tuple[str, list[str]]:
        """Stage the folder into ``index`` and write its tree. The index is only a cache of
        what Git last saw: when Git refuses to work from it (it names objects the repository
        no longer holds after a manual ``git gc --prune=now``, or a path it holds can no longer
        be brought in line with the folder), it is rebuilt from the folder (every file hashed
        again), so no state of a readable folder leaves a capture failing for good. ``beside``
        runs once the first listing has started; ``looked``, the full pass over a seeded index,
        started ahead, and ``copying``, the copy of the trees it holds valid."""
        beside = beside or _Once(None)
        try:
            return self._stage_and_write_tree_once(
                folder,
                git_dir,
                index,
                cache,
                keep_cache=keep_cache,
                beside=beside,
                looked=looked,
                copying=copying,
            )
        except CheckpointError as error:
            if error.code is not CheckpointFailureCode.CHECKPOINT_GIT_FAILED:
                raise
            if not index.is_file():
                raise
        index.unlink(missing_ok=True)
        return self._stage_and_write_tree_once(
            folder, git_dir, index, cache, keep_cache=keep_cache, beside=beside, looked=None
        )

    def _stage_and_write_tree_once(
        self,
        folder: Path,
        git_dir: Path,
        index: Path,
        cache: Path,
        *,
        keep_cache: bool,
        beside: _Once,
        looked: LookAhead | None,
        copying: Started | None = None,
    ) -> tuple[str, list[str]]:
        """The tree and the files skipped as too large. The permission record is derived
        from the previous capture's (``cache``) when the index is still the one it left and no
        entry left it, or from the full pass over a seeded index made ahead (``looked``) when
        no entry left it; otherwise every entry is looked at (the full pass). With
        ``keep_cache``, what was found is kept for the next capture."""
        if not folder.is_dir():
            raise CheckpointError(
                CheckpointFailureCode.CHECKPOINT_FOLDER_UNREADABLE, f"{folder} is not a folder"
            )
        runner = self._git_runner()
        recent_since, fresh_index = _recent_since(index)
        if looked is not None:
            recent_since = looked.recent_since  # reckoned at the seed (``_seed``)
        previous = None if fresh_index else read_cached(cache, index)
        passes = self._staged_and_swept(
            runner,
            folder,
            git_dir,
            index,
            beside,
            fresh_index=fresh_index,
            seeded=looked is not None,
        )
        staged_names, empties, skipped = passes.staged, passes.empties, passes.skipped
        removed, rules_changed = passes.removed, passes.rules_changed
        folders = sorted(set(empties))
        found = None
        staged: str | None = None
        if previous is not None and not removed:
            found = updated_record(
                previous, folder, staged_names | set(previous.recent), recent_since=recent_since
            )
            staged = previous.staged
        elif looked is not None and not removed:
            found = self._from_look_ahead(
                runner,
                folder,
                git_dir,
                index,
                looked,
                staged_names=staged_names,
                recent_since=recent_since,
            )
            if found is not None:
                skipped.extend(os.fsdecode(raw) for raw in found.too_large)
        if found is None:
            found = self._full_pass(runner, folder, git_dir, index, recent_since)
            staged = found.staged
            if found.staged is None and not fresh_index and not rules_changed:
                # An index from before permission records: swept once for ignored entries too.
                self._left_out = self._drop_ignored(runner, folder, git_dir, index)
                found = self._full_pass(runner, folder, git_dir, index, recent_since)
                staged = found.staged
            skipped.extend(os.fsdecode(raw) for raw in found.too_large)
        record = add_folders(found.record, folder, folders)
        here = self._tree_here(git_dir, folder, index, record, staged=staged)
        if here is not None:
            tree_text, staged = here
        elif borrowed_from(git_dir) is not None:
            staged = stage_record(runner, git_dir, folder, index, record, staged=staged)
            # Nothing of the user's freshened.
            tree_text = borrowing_write_tree(runner, git_dir, index, copying=copying)
        else:
            staged = stage_record(runner, git_dir, folder, index, record, staged=staged)
            tree_text = (
                runner.run(["write-tree"], git_dir=git_dir, work_tree=folder, index=index)
                .decode()
                .strip()
            )
        if keep_cache:
            write_cached(cache, index, found, staged)
        tree_id = self._grafted(runner, git_dir, tree_text, folders)
        return tree_id, sorted(set(skipped))

    @staticmethod
    def _tree_here(
        git_dir: Path, folder: Path, index: Path, record: bytes, *, staged: str | None
    ) -> tuple[str, str] | None:
        """The permission record put in a small index and its tree written in this process
        (``checkpoint_index``): the tree's id and the record's blob id; None when it is left
        to Git (nothing written to the index)."""
        if borrowed_from(git_dir) is not None or not index_here(git_dir, index):
            return None
        blob = staged if staged is not None and staged == blob_id(record) else None
        if blob is None:
            blob = write_object(git_dir, "blob", record)
            if blob is None:
                return None
        try:
            tree = record_and_tree(
                git_dir, folder, index, None if blob == staged else (RECORD_PATH, blob)
            )
        except MissingObject as error:
            raise CheckpointError(CheckpointFailureCode.CHECKPOINT_GIT_FAILED, str(error)) from None
        return None if tree is None else (tree, blob)

    def _staged_and_swept(
        self,
        runner: GitRunner,
        folder: Path,
        git_dir: Path,
        index: Path,
        beside: _Once,
        *,
        fresh_index: bool,
        seeded: bool = False,
    ) -> _Passes:
        """The staging passes, then the sweep of the entries the ignore rules now exclude
        when a ``.gitignore`` was staged or removed, or the index was not swept with the
        store's current rules (an index seeded from the user's, or rules changed): that
        sweep's listing then starts beside the staging's listings. It reads the index as it
        was before the staging or as some pass left it; either way it names what the staged
        index holds and the rules exclude, plus entries the staging removed (left aside): the
        rules are the same (no ``.gitignore`` was staged or removed), and an entry the staging
        added came from a listing that leaves ignored paths out. When the user's index changed
        since it was last looked at, the files it now tracks that the rules match join the
        index (``git add -f`` since; an index just ``seeded`` from the user's holds them)."""
        empties: list[str] = []
        skipped: list[str] = []
        staged_names: set[bytes] = set()
        gone: set[bytes] = set()
        removed = False
        rules = _read_bytes(git_dir / "info" / "exclude")
        before = noted(index)
        sweep_due = not fresh_index and _read_bytes(git_dir / "info" / SWEPT_RULES) != rules
        early: list[Started] = []

        def start_sweep() -> None:
            if sweep_due:
                ahead = runner.start_ahead(_IGNORED, git_dir=git_dir, work_tree=folder, index=index)
                if ahead is not None:
                    early.append(ahead)
            beside()

        first = _Once(start_sweep)
        try:
            # A file that became a folder hides the folder's files from the listing while the
            # index still names the file, and a folder whose last file was deleted is not
            # listed as empty while the index still names the file: once the entries are
            # dropped, a second pass lists them (a third never finds one more: the index then
            # holds no such entry).
            for _ in range(3):
                listed = self._stage_pass(runner, folder, git_dir, index, first)
                staged_names.update(listed.staged)
                gone.update(listed.gone)
                empties.extend(listed.empties)
                skipped.extend(listed.skipped)
                removed = removed or listed.removed
                if not (listed.became_folders or listed.removed):
                    break
            if fresh_index:
                # The new files' listing leaves out what the rules match, but Git counts a
                # file it tracks as not ignored (``checkpoint_tracked``).
                staged_names.update(
                    self._stage_tracked(runner, folder, git_dir, index, skipped, fresh=True)
                )
            rules_moved = any(
                name == b".gitignore" or name.endswith(b"/.gitignore")
                for name in (*staged_names, *gone)
            )
            if rules_moved or sweep_due:
                # An ignore rule may have come in: what it now excludes leaves the snapshot,
                # unless the user's Git tracks it (``checkpoint_tracked``).
                if early and not rules_moved:
                    listing = early.pop().finish(None)
                else:
                    listing = runner.run(
                        list(_IGNORED), git_dir=git_dir, work_tree=folder, index=index
                    )
                record = RECORD_PATH.encode()
                names = {raw for raw in listing.split(b"\0") if raw and raw != record}
                kept, signature = tracked(folder, names - gone)
                note_kept(index, kept, signature)
                self._left_out = _drop_listed(
                    runner,
                    folder,
                    git_dir,
                    index,
                    listed=b"\0".join(sorted(names - kept)),
                    gone=gone,
                )
                removed = removed or bool(self._left_out)
            else:
                # Kept because the user's Git tracked them; it may track them no more.
                untracked = [
                    raw for raw in no_longer_tracked(index, folder, before) if raw not in gone
                ]
                if untracked:
                    # Only what a snapshot held leaves it (a kept file over the size limit
                    # never was in one, and is never named as left out).
                    held = runner.run(
                        ["ls-files", "-z", "--cached", "--", *map(os.fsdecode, untracked)],
                        git_dir=git_dir,
                        work_tree=folder,
                        index=index,
                    )
                    present = {raw for raw in held.split(b"\0") if raw}
                    untracked = [raw for raw in untracked if raw in present]
                if untracked:
                    self._left_out = _drop_listed(
                        runner, folder, git_dir, index, listed=b"\0".join(untracked), gone=gone
                    )
                    removed = True
            if not (fresh_index or seeded) and index_moved(folder, before):
                staged_names.update(
                    self._stage_tracked(runner, folder, git_dir, index, skipped, fresh=False)
                )
        finally:
            for ahead in early:
                ahead.cancel()
        return _Passes(staged_names, empties, skipped, removed, rules_moved or sweep_due)

    def _stage_tracked(
        self,
        runner: GitRunner,
        folder: Path,
        git_dir: Path,
        index: Path,
        skipped: list[str],
        *,
        fresh: bool,
    ) -> list[bytes]:
        """Stage the files the user's Git tracks that the ignore rules match (into an index
        that started empty: all of them, the listing of new files left them out; else those
        not kept yet), and note them as kept; the names staged. Those over the size limit are
        added to ``skipped``."""
        if fresh:
            forget_kept(index)
        kept = set() if fresh else (noted(index) or ("", set()))[1]
        scratch = index.with_name(index.name + ".tracked-scan")
        names, signature = newly_tracked(runner, folder, git_dir, scratch, kept)
        sorted_out = self._sorted_out(folder, names)
        skipped.extend(sorted_out.skipped)
        if sorted_out.stage:
            self._stage(
                runner, folder, git_dir, index, None, stage=sorted_out.stage, drop=[], gone=[]
            )
        note_kept(index, kept | set(sorted_out.stage), signature)
        return sorted_out.stage

    @staticmethod
    def _from_look_ahead(
        runner: GitRunner,
        folder: Path,
        git_dir: Path,
        index: Path,
        looked: LookAhead,
        *,
        staged_names: set[bytes],
        recent_since: int,
    ) -> FoundBits | None:
        """The permission record of a seeded index whose staging took no entry out: the full
        pass made ahead (``LookAhead``) brought up to date as a later capture brings the
        previous one's (``updated_record``); the files it found over the size limit that the
        staging did not stage again leave the index. None: the full pass is to be made."""
        ahead = looked.result()
        if ahead is None or ahead.folders is None:
            return None
        base = CachedBits(ahead.record, "", ahead.recent or {}, ahead.folders)
        found = updated_record(
            base, folder, staged_names | set(base.recent), recent_since=recent_since
        )
        if found is None:
            return None
        too_large = [raw for raw in ahead.too_large if raw not in staged_names]
        runner.remove_from_index(too_large, git_dir=git_dir, work_tree=folder, index=index)
        return FoundBits(found.record, None, found.recent, found.folders, tuple(too_large))

    def _full_pass(
        self, runner: GitRunner, folder: Path, git_dir: Path, index: Path, recent_since: int
    ) -> FoundBits:
        """The permission record's full pass; the files it finds over the size limit (an
        index seeded from the user's holds every file they track, unchanged ones unlisted by
        the staging) leave the index."""
        found = permission_record(
            runner, git_dir, folder, index, recent_since=recent_since, limit=self._max_file
        )
        if found.too_large:
            runner.remove_from_index(
                list(found.too_large), git_dir=git_dir, work_tree=folder, index=index
            )
        return found

    def _drop_ignored(
        self, runner: GitRunner, folder: Path, git_dir: Path, index: Path
    ) -> list[str]:
        """Remove from the index the entries the folder's ignore rules now exclude (a path
        added to a ``.gitignore`` after its first capture); the paths removed."""
        listed = runner.run(list(_IGNORED), git_dir=git_dir, work_tree=folder, index=index)
        return _drop_listed(runner, folder, git_dir, index, listed=listed, gone=set())

    def _stage_pass(
        self, runner: GitRunner, folder: Path, git_dir: Path, index: Path, beside: _Once
    ) -> _Pass:
        """Stage what changed since the index last saw the folder. The staging command starts
        once the listings have (it reads the index as they do: nothing writes it in between)
        and is given its paths when they are known; a store that borrows stages as before.
        ``beside`` runs after it."""
        started: list[Started] = []

        def start_beside() -> None:
            # A small index is staged in this process (``checkpoint_index``): no Git started.
            if borrowed_from(git_dir) is None and not index_here(git_dir, index):
                ahead = runner.start_ahead(_STAGE, git_dir=git_dir, work_tree=folder, index=index)
                if ahead is not None:
                    started.append(ahead)
            beside()

        try:
            return self._stage_pass_with(
                runner, folder, git_dir, index, start_beside=start_beside, started=started
            )
        finally:
            for ahead in started:
                ahead.cancel()  # not given its paths (a failure): it writes nothing

    def _stage_pass_with(
        self,
        runner: GitRunner,
        folder: Path,
        git_dir: Path,
        index: Path,
        *,
        start_beside: Callable[[], None],
        started: list[Started],
    ) -> _Pass:
        # Two listings side by side: the files the index does not hold (``--directory``: a
        # folder with no staged file is listed once, "new/", so the empty ones are found
        # without a second walk of the whole folder; the files of such folders are listed on
        # their own, and a nested repository there shows as "new/sub/"), and every entry
        # whose stat data differs from the index's (content, a deletion, a type change, and
        # also a touch or a chmod, which moves the ctime: staged again, the entry's stat data
        # is refreshed, and the permission record looks at exactly these).
        others, differing = runner.run_together(
            [
                ["ls-files", "-z", "--others", "--directory", "--exclude-standard"],
                ["diff-files", "-z", "--name-only"],
            ],
            git_dir=git_dir,
            work_tree=folder,
            index=index,
            beside=start_beside,
        )
        ahead = started[0] if started else None
        in_index = {raw for raw in differing.split(b"\0") if raw}
        listed = others + b"\0" + differing
        entries = [raw for raw in listed.split(b"\0") if raw]
        new_dirs = [os.fsdecode(raw) for raw in entries if raw.endswith(b"/")]
        entries = [raw for raw in entries if not raw.endswith(b"/")]
        empties: list[str] = []
        if new_dirs:
            inside = runner.run(
                ["ls-files", "-z", "--others", "--exclude-standard", "--", *new_dirs],
                git_dir=git_dir,
                work_tree=folder,
                index=index,
            )
            entries.extend(raw for raw in inside.split(b"\0") if raw)
            empties = empty_dirs_under(runner, git_dir, folder, index, new_dirs)
        sorted_out = self._sorted_out(folder, entries)
        stage, drop, deleted = sorted_out.stage, sorted_out.drop, sorted_out.deleted
        skipped, became_folders = sorted_out.skipped, sorted_out.became_folders
        self._stage(runner, folder, git_dir, index, ahead, stage=stage, drop=drop, gone=deleted)
        removed = any(raw in in_index for raw in (*drop, *deleted))
        return _Pass(empties, skipped, became_folders, stage, removed, [*drop, *deleted])

    def _sorted_out(self, folder: Path, entries: list[bytes]) -> _Sorted:
        """What the staging does with each listed path: stage it (a file or a link), drop
        its entry whatever is there (too large, a folder or something else now, or beyond a
        folder that became a file or a link) or let ``--remove`` drop it (deleted)."""
        stage: list[bytes] = []
        drop: list[bytes] = []
        deleted: list[bytes] = []
        skipped: list[str] = []
        became_folders = False
        seen: set[bytes] = set()
        folders = _FolderKinds(folder)
        for raw in entries:
            if not raw or raw in seen:
                continue
            seen.add(raw)
            name = os.fsdecode(raw)
            if name == RECORD_PATH:
                continue  # the permission record: staged on its own, never in the folder
            if name.endswith("/"):
                raise CheckpointError(
                    CheckpointFailureCode.CHECKPOINT_NESTED_REPOSITORY,
                    f"{name.rstrip('/')} is a nested repository",
                )
            if not folders.reachable(name):
                # A folder on its path is now a file or a link (``rm -r lib && ln -s x lib``):
                # the entry is gone, and the new ``lib`` is listed on its own.
                drop.append(raw)
                continue
            try:
                info = os.lstat(folder / name)
            except (FileNotFoundError, NotADirectoryError):
                deleted.append(raw)  # the staging's ``--remove`` drops its entry
                continue
            except OSError as error:
                raise CheckpointError(
                    CheckpointFailureCode.CHECKPOINT_FOLDER_UNREADABLE, f"{name}: {error}"
                ) from None
            if stat.S_ISLNK(info.st_mode):
                stage.append(raw)
            elif stat.S_ISREG(info.st_mode):
                if info.st_size > self._max_file:
                    skipped.append(name)
                    drop.append(raw)
                else:
                    stage.append(raw)
            else:
                # A folder where a file was (its files are listed once the entry is gone), a
                # fifo, a socket...
                became_folders = became_folders or stat.S_ISDIR(info.st_mode)
                drop.append(raw)
        return _Sorted(stage, drop, deleted, skipped, became_folders)

    @staticmethod
    def _stage(
        runner: GitRunner,
        folder: Path,
        git_dir: Path,
        index: Path,
        ahead: Started | None,
        *,
        stage: list[bytes],
        drop: list[bytes],
        gone: list[bytes],
    ) -> None:
        """Drop the entries ``drop`` whatever the folder holds there, then stage ``stage``
        (files and links) and ``gone`` (deleted: ``--remove`` drops their entries), through
        the command started ahead when there is one."""
        if drop and ahead is not None:
            # The staging started ahead holds the index's lock: it ends with nothing to do,
            # and the entries are dropped first, as they always were.
            ahead.cancel()
            ahead = None
        runner.remove_from_index(drop, git_dir=git_dir, work_tree=folder, index=index)
        if stage and borrowed_from(git_dir) is not None:
            stage = stage_held(runner, folder, git_dir, index, stage)  # nothing freshened
        names = [*stage, *gone]
        paths = b"\0".join(names) + b"\0" if names else None
        if (
            ahead is None
            and paths is not None
            and borrowed_from(git_dir) is None
            and index_here(git_dir, index)
            and stage_paths(git_dir, folder, index, stage, gone)
        ):
            return
        if ahead is not None:
            ahead.finish(paths)  # no paths: it ends without writing the index
        elif paths is not None:
            runner.run(list(_STAGE), git_dir=git_dir, work_tree=folder, index=index, stdin=paths)

    def _grafted(self, runner: GitRunner, git_dir: Path, tree: str, empties: list[str]) -> str:
        """``tree`` with the folder's empty folders, remembered: they rarely change between
        two captures, and the grafting costs two Git calls per folder on their paths."""
        if not empties:
            return tree
        # A tree the grafting wrote may have been moved aside as damaged since, by this
        # process or another: what was remembered before that is not taken.
        key = (str(git_dir), tree, tuple(empties), _aside_stamp(git_dir))
        found = self._grafts.get(key)
        if found is None:
            found = graft_empty_dirs(runner, git_dir, tree, empties)
            if len(self._grafts) > 256:
                self._grafts.clear()
            self._grafts[key] = found
        return found

    # ---- verify and compare --------------------------------------------------------------------
    def has_repository(self, workspace_identity: str) -> bool:
        return (self.git_dir(workspace_identity) / "HEAD").is_file()

    def has_snapshot(self, workspace_identity: str, commit_id: str, tree_id: str) -> bool:
        """Whether the commit, its tree and every folder and file under it exist (a snapshot
        with a file pruned or removed by hand can be neither compared nor copied); raises
        ``CheckpointError`` when Git cannot tell (a snapshot that cannot be looked up now is
        not a missing one)."""
        pair = (commit_id, tree_id)
        return pair in self._present(workspace_identity, [pair])

    def has_tree(self, workspace_identity: str, tree_id: str) -> bool:
        """Whether the tree and everything under it exist here (a walk that names no missing
        object); False when Git cannot tell."""
        git_dir = self.git_dir(workspace_identity)
        return (git_dir / "HEAD").is_file() and tree_whole(self._git_runner(), git_dir, tree_id)

    def present_snapshots(
        self, workspace_identity: str, snapshots: list[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        """Which (commit, tree) pairs are whole in the workspace's repository, decided as
        ``has_snapshot`` decides it, for all of them in one batch; none when Git cannot tell."""
        try:
            return self._present(workspace_identity, snapshots)
        except CheckpointError:
            return set()

    def _present(
        self, workspace_identity: str, snapshots: list[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        git_dir = self.git_dir(workspace_identity)
        if not snapshots or not (git_dir / "HEAD").is_file():
            return set()
        if len(snapshots) == 1 and self._early.take(git_dir, snapshots[0]):
            return set(snapshots)
        found = snapshots_whole(self._git_runner(), git_dir, snapshots)
        return {pair for pair in snapshots if pair in found}

    def changes(
        self,
        workspace_identity: str,
        old_tree: str,
        new_tree: str,
        *,
        old_workspace: str | None = None,
    ) -> list[TreeChange]:
        if old_tree == new_tree:
            return []
        runner = self._git_runner()
        if old_workspace is not None and old_workspace != workspace_identity:
            runner = runner.with_alternate(self.git_dir(old_workspace) / "objects")
        git_dir = self.git_dir(workspace_identity)
        raw = None
        if old_workspace is None or old_workspace == workspace_identity:
            raw = self._compared.take(git_dir, old_tree, new_tree)
        every = tree_changes(runner, git_dir, old_tree, new_tree, printed=raw)
        found = [
            change
            for change in every
            if change.path != RECORD_DIR + "/" and not change.path.startswith(RECORD_DIR + "/")
        ]
        if not any(change.path == RECORD_PATH for change in every):
            return found  # the same bits everywhere (or no record on one side)
        named = {change.path for change in found}
        old_bits = read_record(runner, git_dir, old_tree)
        new_bits = read_record(runner, git_dir, new_tree)
        for change in permission_changes(old_bits, new_bits):
            if change.path not in named:
                found.append(change)
        return sorted(found, key=lambda change: change.path)

    def recorded_bits(self, workspace_identity: str, tree_id: str) -> dict[str, int] | None:
        """The permission bits a snapshot tree of the workspace's repository recorded
        (``.maka/permissions``), by path (folders end in ``/``); None when it has none (taken
        before they were kept) or there is no repository. Raises ``CheckpointError`` when Git
        cannot read it."""
        git_dir = self.git_dir(workspace_identity)
        if not (git_dir / "HEAD").is_file():
            return None
        return read_record(self._git_runner(), git_dir, tree_id)

    def verify_snapshots(
        self, workspace_identity: str, trees: list[str]
    ) -> dict[str, list[DamagedObject]]:
        """For each snapshot tree, the objects under it whose stored bytes are gone or do not
        hash to their names (empty: it is what it recorded); raises ``CheckpointError`` when
        Git cannot read them. What is damaged is moved aside, and the next capture stages the
        folder from the start (``_set_damaged_aside``): each object tells where it went
        (``moved_to``), or that it cannot be moved (``packed``)."""
        checked = self._check_snapshots(workspace_identity, trees)
        return {tree: check.damaged for tree, check in checked.items()}

    def damaged_aside(
        self, workspace_identity: str, trees: list[str]
    ) -> dict[str, list[DamagedObject]]:
        """For snapshots that are not whole: the objects under each that make it damaged
        rather than lost (``checkpoint_verify.known_damaged_objects``): those a check moved
        aside as damaged, each with where it went (looked for only in a store that ever moved
        one aside), and those whose stored bytes Git cannot read. Raises ``CheckpointError``
        when Git cannot read the trees."""
        git_dir = self.git_dir(workspace_identity)
        if not (git_dir / "HEAD").is_file() or not trees:
            return {}
        return known_damaged_objects(self._git_runner(), git_dir, trees)

    def _check_snapshots(self, workspace_identity: str, trees: list[str]) -> dict[str, TreeCheck]:
        """Every object under each tree re-hashed (``check_trees``: the check every surface
        makes, a restore's, an export's, ``maka doctor --verify-snapshots``), and what it
        found damaged set aside before it is told."""
        git_dir = self.git_dir(workspace_identity)
        if not (git_dir / "HEAD").is_file():
            return {
                tree: TreeCheck([(tree, "")], [DamagedObject(tree, "", True)]) for tree in trees
            }
        checked = check_trees(self._git_runner(), git_dir, trees)
        if any(check.damaged for check in checked.values()):
            checked = self._set_damaged_aside(workspace_identity, checked)
        return checked

    def _set_damaged_aside(
        self, workspace_identity: str, checked: dict[str, TreeCheck]
    ) -> dict[str, TreeCheck]:
        """Move each damaged loose object of the workspace's own store aside and make the next
        capture stage the folder from the start (``checkpoint_verify.set_damaged_aside``).
        Git never writes again an object it believes it has, and the private index names the
        objects of unchanged files (its cached trees even whole folders' trees, which
        ``write-tree`` reuses without looking under them): left as it was, every later
        snapshot would name the damaged object again. Under the workspace lock, which every
        capture holds from its first listing to its ref: no capture is between its staging
        and its tree while the object leaves, and the one after finds no index, so it stages
        every file again, writes each object the store lacks from the folder's bytes, and
        writes every tree, each entry's object looked for (``write-tree`` and the in-process
        writer both fail on one that is gone, which makes the capture start again from the
        folder). The user's ``.git`` and any store this one borrows from are never touched: a
        folder that is a Git repository is seeded again from a copy of the user's index, as
        at its first capture."""
        git_dir = self.git_dir(workspace_identity)
        with self._locked(workspace_identity):
            done = set_damaged_aside(git_dir, checked)
            if done.start_again:
                key = workspace_key(workspace_identity)
                for name in (f"{key}.index", f"{key}.observe.index"):
                    (self.root / name).unlink(missing_ok=True)
        if done.moved or done.start_again:
            self._early.forget(git_dir)  # objects left: no answer started before counts
            self._grafts.clear()  # (another process's tell the moves by ``_aside_stamp``)
        for damaged in done.moved:
            _log.warning(
                "checkpoint store %s: the damaged object %s (%s) was moved aside to %s",
                git_dir.name,
                damaged.object_id,
                damaged.path or "a snapshot's top folder",
                damaged.moved_to,
            )
        return done.checks

    # ---- isolated restore ----------------------------------------------------------------------
    def _refuse_place(self, target: Path) -> None:
        """A copy never goes inside the data folder (the source folder itself is refused by
        the caller, which knows it). Inside another session's folder is the user's choice:
        a session working in the home folder would otherwise leave no place for any copy."""
        real = Path(os.path.realpath(target))
        data = Path(os.path.realpath(self.root.parent))
        if real == data or data in real.parents:
            raise CheckpointError(
                RestoreCode.WORKSPACE_RESTORE_TARGET_INSIDE,
                f"{target} is inside Maka's data folder {data}; choose a folder outside it",
            )

    def materialize(
        self,
        workspace_identity: str,
        tree_id: str,
        target: Path,
        session_id: str,
        *,
        source: Path | None = None,
    ) -> str:
        """Check a snapshot out into ``target`` through a temporary index (``read-tree``,
        ``checkout-index``): the workspace's own folder and its persistent index are not
        touched. ``target`` must be new or an empty folder. When ``source`` (the folder the
        snapshot is of) is a Git repository, the copy is first a local clone of it at the
        user's HEAD (their ``.git`` only read), with the snapshot's files on top: ``git
        status`` and ``git diff`` there show the snapshot's changes against that HEAD.
        Returns the copy's new identity."""

        target = Path(os.path.abspath(target))
        try:
            if target.is_symlink() and target.is_dir():
                # A link to a folder: the copy goes into the folder it leads to, named as it is
                # (its bits, marker and checks are the folder's, never the link's).
                target = Path(os.path.realpath(target))
        except OSError as error:  # a name longer than the file system takes, say
            raise CheckpointError(
                RestoreCode.WORKSPACE_RESTORE_FAILED, f"cannot make {target}: {error.strerror}"
            ) from None
        self._refuse_place(target)
        checked = self._check_snapshots(workspace_identity, [tree_id])[tree_id]
        damaged = checked.damaged
        if damaged:
            # Checked before anything is written: a copy never holds bytes the snapshot did
            # not record.
            first = damaged[0]
            raise CheckpointError(
                RestoreCode.WORKSPACE_RESTORE_SNAPSHOT_DAMAGED,
                f"the snapshot {tree_id[:12]} is damaged in the checkpoint store: "
                f"{len(damaged)} object(s) {'missing' if first.missing else 'changed'}, "
                f"first {first.path or 'its top folder'}" + damage_told(damaged),
            )
        with self._claiming():
            return self._materialize_claimed(
                workspace_identity, tree_id, target, session_id, source=source, checked=checked
            )

    @contextlib.contextmanager
    def _claiming(self) -> Iterator[None]:
        """Held from a restore's claim of its folder to its last write: a new folder, or an
        empty one, is claimed only while no other restore (a thread here, or another process of
        this data folder) is writing, so two restores never fill one folder. The second finds
        the first's files and is refused (``workspace_restore_target_not_empty``)."""
        with self._holding(self._claim_guard, "restores.lock"):
            yield

    def _materialize_claimed(
        self,
        workspace_identity: str,
        tree_id: str,
        target: Path,
        session_id: str,
        *,
        source: Path | None,
        checked: TreeCheck,
    ) -> str:
        from storage.sessions.workspace_identity import (
            WorkspaceMarkerError,
            resolve_workspace_identity,
        )

        try:
            # Missing folders above it are made, as ``git clone`` makes them.
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise CheckpointError(
                RestoreCode.WORKSPACE_RESTORE_FAILED,
                f"cannot make {target}: {_in_the_way(target) or error.strerror}",
            ) from None
        try:
            target.mkdir()  # (two restores never share a folder: ``_claiming``)
        except FileExistsError:
            if not target.is_dir() or any(target.iterdir()):
                what = (
                    "is not an empty folder"
                    if target.is_dir()
                    else "is a link that leads to no folder"
                    if target.is_symlink()
                    else "is a file, not a folder"
                )
                raise CheckpointError(
                    RestoreCode.WORKSPACE_RESTORE_TARGET_NOT_EMPTY,
                    f"{target} {what}; a restored copy needs a new or empty folder",
                ) from None
        except OSError as error:
            raise CheckpointError(
                RestoreCode.WORKSPACE_RESTORE_FAILED, f"cannot create {target}: {error.strerror}"
            ) from None
        self._note_restore(session_id, target)
        git_dir = self.git_dir(workspace_identity)
        _sweep_restores_left_behind(self.root)
        scratch = self.root / (
            f"{workspace_key(workspace_identity)}.restore-{os.getpid()}-{uuid.uuid4().hex[:8]}.index"
        )
        try:
            # Private while it is written; the recorded bits are set once everything is in.
            os.chmod(target, 0o700)
            runner = self._git_runner()
            cloned = source is not None and _clone_into(runner, Path(source), target)
            runner.run(["read-tree", tree_id], git_dir=git_dir, index=scratch)
            record = read_record(runner, git_dir, tree_id)
            if record is not None:
                runner.remove_from_index(
                    [RECORD_PATH.encode()], git_dir=git_dir, work_tree=target, index=scratch
                )
            runner.run(
                # ``-u``: the files' stat data in the scratch index, for the clone's own
                ["checkout-index", "-a", "-f", *(["-u"] if cloned else [])],
                git_dir=git_dir,
                work_tree=target,
                index=scratch,
                umask=0o022,
            )
            if cloned and source is not None:
                _index_at_head(runner, scratch, target)
                _carry_the_users_view(runner, Path(source), target)
            create_empty_dirs(runner, git_dir, checked.objects, target)
            if record is not None:
                apply_record(record, target)
            identity = resolve_workspace_identity(target).identity
            if source is not None:
                _inherit_rules(Path(source), target)
            if record is not None:
                apply_root(record, target)
            self._share_snapshot(workspace_identity, identity, tree_id, checked.objects, target)
            return identity
        except (OSError, WorkspaceMarkerError) as error:
            raise CheckpointError(
                RestoreCode.WORKSPACE_RESTORE_FAILED, f"the copy at {target} failed: {error}"
            ) from None
        finally:
            scratch.unlink(missing_ok=True)

    def _share_snapshot(
        self,
        from_identity: str,
        to_identity: str,
        tree_id: str,
        objects: list[tuple[str, str]],
        folder: Path,
    ) -> None:
        """Give the copy's new private repository the snapshot's ``objects``
        (``checkpoint_share``), so that its first look hashes the files without writing them
        again, and name the snapshot with ``START_REF`` there. Best effort: whatever fails,
        that look writes itself."""
        if workspace_key(to_identity) == workspace_key(from_identity):
            return
        runner = self._git_runner()
        source = self.git_dir(from_identity)
        try:
            with self._locked(to_identity):
                target = self._ensure_repo(to_identity, folder)
                share_objects(runner, source, target, (oid for oid, _ in objects))
                # Named by a ref, they stay packed and kept: with nothing naming them, a gc
                # would turn the pack into one loose object per file, then prune them a day
                # later, and the copy's first snapshot would write them all again.
                commit = runner.run(
                    ["commit-tree", tree_id, "-F", "-"],
                    git_dir=target,
                    stdin=b"the snapshot this copy was made from\n",
                )
                runner.run(["update-ref", START_REF, commit.decode().strip()], git_dir=target)
        except (OSError, CheckpointError) as error:
            _log.warning("the copy at %s will write its snapshot's objects: %s", folder, error)

    def _note_restore(self, session_id: str, target: Path) -> None:
        ensure_private_dir(self.root)
        line = json.dumps({"sessionId": session_id, "path": str(target)}) + "\n"
        with open(self.root / RESTORES_LOG, "a", encoding="utf-8", opener=private_opener) as log:
            log.write(line)
            log.flush()
            os.fsync(log.fileno())

    def restore_attempts(self, session_id: str) -> list[str]:
        return [path for owner, path in self.restore_log() if owner == session_id]

    def restore_log(self) -> list[tuple[str, str]]:
        try:
            text = (self.root / RESTORES_LOG).read_text("utf-8")
        except OSError:
            return []
        found: dict[tuple[str, str], None] = {}  # (in order, each once)
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash
            if not isinstance(entry, dict):
                continue
            owner, path = entry.get("sessionId"), entry.get("path")
            if isinstance(owner, str) and isinstance(path, str):
                found[(owner, path)] = None
        return list(found)

    def now_ignored(self, workspace_identity: str, commits: list[str]) -> dict[str, list[str]]:
        """For each checkpoint commit, the paths it left out because an ignore rule came in
        since the previous capture (from the commit messages, one batch); none when Git
        cannot tell."""
        git_dir = self.git_dir(workspace_identity)
        if not commits or not (git_dir / "HEAD").is_file():
            return {}
        try:
            query = "".join(f"{commit}\n" for commit in commits).encode()
            out = self._git_runner().run(["cat-file", "--batch"], git_dir=git_dir, stdin=query)
        except CheckpointError:
            return {}
        found: dict[str, list[str]] = {}
        at = 0
        for commit in commits:
            end = out.index(b"\n", at)
            header = out[at:end].decode().split(" ")
            at = end + 1
            if len(header) < 3:
                continue  # missing
            size = int(header[2])
            text = out[at : at + size].decode("utf-8", "replace")
            at += size + 1
            _, heading, rest = text.partition(f"\n{NOW_IGNORED}\n")
            if heading:
                found[commit] = [line[2:] for line in rest.splitlines() if line.startswith("  ")]
        return found

    def refs(self, workspace_identity: str) -> dict[str, str]:
        """Every checkpoint ref of the workspace's repository and the commit it names."""
        return self.refs_in(self.git_dir(workspace_identity))

    def name_again(self, workspace_identity: str, ref: str, commit_id: str) -> bool:
        """Name a snapshot again whose checkpoint ref retention deleted while its objects wait
        for the next prune (a branch is made from it, and retention keeps what a branch was
        copied from). Creates the ref only where none is; True when it names the commit now.
        Best effort: False when the commit is gone or Git refuses."""
        git_dir = self.git_dir(workspace_identity)
        if not ref.startswith("refs/maka/") or not (git_dir / "HEAD").is_file():
            return False
        try:
            if self.refs_in(git_dir).get(ref) == commit_id:
                return True
            self._git_runner().run(["update-ref", ref, commit_id, ""], git_dir=git_dir)
        except CheckpointError:
            return False
        return self.refs_in(git_dir).get(ref) == commit_id

    def has_start(self, git_dir: Path) -> bool:
        """Whether a copy's store still names the snapshot it was made from (``START_REF``),
        read from the ref files without a Git process."""
        if (git_dir / START_REF).is_file():
            return True
        try:
            packed = (git_dir / "packed-refs").read_bytes()
        except OSError:
            return False
        return f" {START_REF}\n".encode() in packed

    def start_made_at(self, git_dir: Path) -> int | None:
        """When a copy's store was given its snapshot (``START_REF``'s commit time, seconds
        since the epoch); None without that ref."""
        if not (git_dir / "HEAD").is_file():
            return None
        out = self._git_runner().run(
            ["for-each-ref", "--format=%(committerdate:unix)", START_REF], git_dir=git_dir
        )
        text = out.decode().strip()
        return int(text) if text.isdigit() else None

    def refs_in(self, git_dir: Path) -> dict[str, str]:
        """Every checkpoint ref of one private repository and the commit it names."""
        if not (git_dir / "HEAD").is_file():
            return {}
        out = self._git_runner().run(
            ["for-each-ref", "--format=%(refname) %(objectname)", "refs/maka/"], git_dir=git_dir
        )
        pairs = (line.split(" ", 1) for line in out.decode().splitlines() if line)
        return {name: commit for name, commit in pairs}

    def ref_times(self, git_dir: Path) -> dict[str, int]:
        """Every checkpoint ref of one private repository and its commit's time (seconds)."""
        if not (git_dir / "HEAD").is_file():
            return {}
        out = self._git_runner().run(
            ["for-each-ref", "--format=%(refname) %(committerdate:unix)", "refs/maka/"],
            git_dir=git_dir,
        )
        times: dict[str, int] = {}
        for line in out.decode().splitlines():
            name, _, stamp = line.rpartition(" ")
            if name and stamp.isdigit():
                times[name] = int(stamp)
        return times

    # ---- retention -----------------------------------------------------------------------------
    def broken_refs(self, git_dir: Path) -> list[str]:
        """The refs of one private repository (checkpoints, the tip, a copy's start) whose
        commits are gone (objects pruned or removed by hand): they keep nothing, and Git
        refuses to ``gc`` while they exist."""
        if not (git_dir / "HEAD").is_file():
            return []
        runner = self._git_runner()
        out = runner.run(
            ["for-each-ref", "--format=%(refname) %(objectname)", "refs/maka/", TIP_REF, START_REF],
            git_dir=git_dir,
        )
        pairs = [line.split(" ", 1) for line in out.decode().splitlines() if line]
        missing = _missing_objects(runner, git_dir, sorted({commit for _, commit in pairs}))
        return sorted(name for name, commit in pairs if commit in missing)

    def delete_refs(self, git_dir: Path, refs: list[str]) -> None:
        """Delete checkpoint refs (and the tip, a copy's start) of one repository in one ref
        transaction."""
        lines = "".join(
            f"delete {ref}\n"
            for ref in refs
            if ref.startswith("refs/maka/") or ref in (TIP_REF, START_REF)
        )
        if lines:
            try:
                self._git_runner().run(
                    ["update-ref", "--stdin"], git_dir=git_dir, stdin=lines.encode()
                )
            finally:
                self._early.forget(git_dir)

    def prune(self, git_dir: Path, expire: str) -> None:
        """Remove objects no ref reaches that are older than ``expire`` (a capture running
        meanwhile writes only younger ones), and pack the rest. The workspace's private index
        is named, so what it holds is kept even if no commit names it yet."""
        key = git_dir.name.removesuffix(".git")
        index = git_dir.with_name(key + ".index")
        if borrowed_from(git_dir) is not None:
            # Never prune or pack while borrowing: ``gc`` packs only local objects, so the
            # store is made self-contained first (a failure keeps the alternate and skips gc).
            self._absorb(key)
        try:
            self._git_runner().run(
                ["gc", "--quiet", f"--prune={expire}"],
                git_dir=git_dir,
                index=index if index.is_file() else None,
            )
        finally:
            # Retention runs outside the workspace lock: a walk started while objects were
            # being removed may have seen them, so no answer started before the end counts.
            self._early.forget(git_dir)


@dataclass(frozen=True, slots=True)
class _Sorted:
    """The listed paths sorted out (``GitCheckpointStore._sorted_out``)."""

    stage: list[bytes]
    drop: list[bytes]
    deleted: list[bytes]
    skipped: list[str]
    became_folders: bool


class _Comparisons:
    """Comparisons of two snapshots made ahead of need (an observation compares the folder
    with the last snapshot: a resume asks for exactly that next), each taken once. Two tree
    ids always compare the same way, so an answer never goes stale."""

    _KEPT = 16

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._kept: dict[tuple[Path, str, str], bytes] = {}

    def keep(self, git_dir: Path, old_tree: str, new_tree: str, started: Started) -> None:
        """Give the comparison started ahead (``_COMPARE``) its two trees and keep what it
        prints; a comparison that fails is simply not kept (it is made again when asked)."""
        header = f"{old_tree} {new_tree}\n".encode()
        try:
            out = started.finish(header)
        except CheckpointError:
            return
        if not out.startswith(header):
            return
        with self._guard:
            if len(self._kept) >= self._KEPT:
                self._kept.clear()
            self._kept[(git_dir, old_tree, new_tree)] = out[len(header) :]

    def take(self, git_dir: Path, old_tree: str, new_tree: str) -> bytes | None:
        with self._guard:
            return self._kept.pop((git_dir, old_tree, new_tree), None)


class _Once:
    """A callable run at most once (None: nothing to run)."""

    __slots__ = ("_action",)

    def __init__(self, action: Callable[[], None] | None) -> None:
        self._action = action

    def __call__(self) -> None:
        action, self._action = self._action, None
        if action is not None:
            action()


# The comparison of two snapshots (``tree_changes``), reading "<old> <new>" from its input.
_COMPARE = ("diff-tree", "--stdin", *COMPARE_OPTIONS)
_STAGE = ("update-index", "-z", "--add", "--remove", "--replace", "--stdin")
# The index's entries the folder's ignore rules exclude.
_IGNORED = ("ls-files", "-z", "--cached", "--ignored", "--exclude-standard")


def _drop_listed(
    runner: GitRunner, folder: Path, git_dir: Path, index: Path, *, listed: bytes, gone: set[bytes]
) -> list[str]:
    """Drop the entries an ``_IGNORED`` listing named but ``gone`` (already out of the
    index) and the permission record; the paths dropped, but for Maka's own (an index seeded
    from a user's who committed the marker holds it: left out by the policy, never newly)."""
    record = RECORD_PATH.encode()
    names = [raw for raw in listed.split(b"\0") if raw and raw != record and raw not in gone]
    runner.remove_from_index(names, git_dir=git_dir, work_tree=folder, index=index)
    return sorted(os.fsdecode(raw) for raw in names if not own_path(raw))


@dataclass(frozen=True, slots=True)
class _Passes:
    """The staging passes of a capture (``_staged_and_swept``)."""

    staged: set[bytes]
    empties: list[str]
    skipped: list[str]
    removed: bool
    rules_changed: bool


@dataclass(frozen=True, slots=True)
class _Pass:
    """One staging pass: the empty folders found, the files skipped as too large, whether an
    entry's file became a folder, the names staged, and whether an entry left the index."""

    empties: list[str]
    skipped: list[str]
    became_folders: bool
    staged: list[bytes]
    removed: bool
    gone: list[bytes]  # the entries it dropped or removed (deleted)


def _recent_since(index: Path) -> tuple[int, bool]:
    """Since when a file counts as changed shortly before Git looked at it, and whether
    ``index`` is missing. Such a file may change again within the same tick of the file
    system's clock, its ctime unchanged, so it is looked at again next time. Shortly: since
    the previous capture wrote the index (the file system's own clock, as Git's racy-entry
    rule reads it) or the last few seconds, whichever is earlier."""
    since = time.time_ns()
    try:
        since = min(since, index.stat().st_mtime_ns)
    except OSError:
        return since - _RECENT_NS, True
    return since - _RECENT_NS, False


def _aside_stamp(git_dir: Path) -> tuple[int, int] | None:
    """The state of the store's folder of objects moved aside (its time and how many it
    holds; None when there is none): it changes whenever an object is moved aside."""
    aside = git_dir / DAMAGED_DIR
    try:
        return aside.stat().st_mtime_ns, len(os.listdir(aside))
    except OSError:
        return None


def _bits_cache(index: Path) -> Path:
    """Where the permission record's findings are kept beside the persistent index."""
    return index.with_name(index.name + ".bits")


class _FolderKinds:
    """Whether each folder on an entry's path is still a real folder (not a file, a link or
    gone), each folder looked at once per capture."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._known: dict[str, bool] = {"": True}

    def reachable(self, name: str) -> bool:
        parent = name.rpartition("/")[0]
        found = self._known.get(parent)
        if found is None:
            found = self.reachable(parent)
            if found:
                try:
                    found = stat.S_ISDIR(os.lstat(self._root / parent).st_mode)
                except OSError:
                    found = False
            self._known[parent] = found
        return found


_LOOK_PREFIX = "maka-look-"


def _sweep_looks_left_behind() -> None:
    """Remove the stand-ins of looks whose process is gone (a ``maka plan`` ended by SIGTERM
    or a closed terminal runs no clean-up): each is named with its process id."""
    import tempfile

    for place in Path(tempfile.gettempdir()).glob(f"{_LOOK_PREFIX}*-*"):
        if _process_gone(place.name[len(_LOOK_PREFIX) :].split("-", 1)[0]):
            shutil.rmtree(place, ignore_errors=True)


def _sweep_restores_left_behind(root: Path) -> None:
    """Remove the scratch indexes of restores whose process is gone (a ``maka branch`` or a
    restore killed part way runs no ``finally``): each is named ``<key>.restore-<pid>-<n>``."""
    try:
        left = list(root.glob("*.restore-*-*.index"))
    except OSError:
        return
    for scratch in left:
        if _process_gone(scratch.name.split(".restore-", 1)[1].split("-", 1)[0]):
            scratch.unlink(missing_ok=True)


def _process_gone(pid: str) -> bool:
    """Whether the process id named in a leftover's name is not running (False for this
    process, one that runs, another user's, or a name that is not a process id)."""
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, OSError):
        return False  # (alive, another user's, or not a process id at all)
    return False


class _Overlay:
    """Where a store that only looks writes: a temporary folder outside the data folder (removed
    when the store is dropped, or at exit), holding for each private repository it reads a
    stand-in ``<key>.git``: its ``HEAD``, ``config`` and refs copied, its own empty ``objects``
    reading the private repository's objects as an alternate (``objects/info/alternates``). So
    the trees, blobs and indexes an observation makes (Git's and this process's) land there,
    and the private store, its lock files and its indexes are never written: a look works in a
    data folder on a read-only mount or a full disk, and leaves nothing behind."""

    def __init__(self, root: Path, owner: object) -> None:
        import tempfile
        import weakref

        self.root = root
        _sweep_looks_left_behind()
        self.place = Path(tempfile.mkdtemp(prefix=f"{_LOOK_PREFIX}{os.getpid()}-"))
        self._made: dict[Path, Path] = {}
        self._guard = threading.Lock()
        weakref.finalize(owner, shutil.rmtree, self.place, True)

    def git_dir(self, real: Path) -> Path:
        """The stand-in for the private repository ``real`` (made at the first call; one with
        no ``HEAD`` when ``real`` has none, so the store makes it as a new repository)."""
        with self._guard:
            made = self._made.get(real)
            if made is None:
                made = self.place / real.name
                ensure_private_dir(made)
                if (real / "HEAD").is_file():
                    for name in ("HEAD", "config", "packed-refs"):
                        with contextlib.suppress(FileNotFoundError):
                            shutil.copyfile(real / name, made / name)
                    with contextlib.suppress(FileNotFoundError):
                        shutil.copytree(real / "refs", made / "refs", symlinks=True)
                    ensure_private_dir(made / "refs")
                    info = ensure_private_dir(made / "objects" / "info")
                    (info / "alternates").write_text(
                        os.path.realpath(real / "objects") + "\n", encoding="utf-8"
                    )
                    (made / STANDS_FOR).write_text(str(real) + "\n", encoding="utf-8")
                    if (real / DAMAGED_DIR).is_dir():
                        # (what a check moved aside is told as such: damaged, not lost)
                        os.symlink(os.path.realpath(real / DAMAGED_DIR), made / DAMAGED_DIR)
                self._made[real] = made
            return made


def _missing_objects(runner: GitRunner, git_dir: Path, object_ids: list[str]) -> set[str]:
    """Which of ``object_ids`` the repository does not hold (one ``cat-file --batch-check``)."""
    if not object_ids:
        return set()
    query = "".join(f"{object_id}\n" for object_id in object_ids).encode()
    out = runner.run(["cat-file", "--batch-check"], git_dir=git_dir, stdin=query)
    return {
        line.split(" ", 1)[0] for line in out.decode().splitlines() if line.endswith(" missing")
    }


def _clone_into(runner: GitRunner, source: Path, target: Path) -> bool:
    """A local clone of the user's repository at ``source`` in the (empty) ``target``, no
    file checked out (the snapshot's files come next, then its index: ``_index_at_head``);
    whether one was made. A folder with a ``.git`` (a repository's own folder, or the file a
    linked worktree or a submodule has naming theirs) and a HEAD is cloned; the user's Git
    folder is read, not written (``--no-hardlinks``: not even a link count changes). A clone
    that fails is tried once more (the user's own ``git gc`` removing a loose object while it
    is copied fails it), unless it ran out of time; failing again, or with no ``.git``, the
    copy has no repository. The clone then holds the user's branches, tags and stash, and
    their HEAD as it is (``carry_local_refs``)."""
    if not os.path.lexists(source / ".git"):
        return False
    failure = ""
    for _ in range(2):
        try:
            runner.run_outside(
                [
                    "clone",
                    "--quiet",
                    "--no-checkout",
                    "--no-hardlinks",
                    "--template=",
                    str(source),
                    ".",
                ],
                cwd=target,
            )
        except CheckpointError as error:
            failure = error.message
            shutil.rmtree(target / ".git", ignore_errors=True)
            if error.code is CheckpointFailureCode.CHECKPOINT_GIT_TIMEOUT:
                break  # a repository too big to copy in time is not tried twice
            continue
        try:
            runner.run_outside(["rev-parse", "--verify", "--quiet", "HEAD^{tree}"], cwd=target)
        except CheckpointError:
            failure = "the repository has no commit yet"
            shutil.rmtree(target / ".git", ignore_errors=True)
            break
        # The user's other branches, tags and stash, and their HEAD as it is (before the
        # index is made from it): a clone has only the branch checked out.
        carry_local_refs(runner, source, target)
        return True
    _log.warning(
        "the copy at %s has no Git repository: cloning %s failed: %s", target, source, failure
    )
    return False


def _index_at_head(runner: GitRunner, scratch: Path, target: Path) -> None:
    """The clone's index at the user's HEAD (so ``git status`` and ``git diff`` in the copy
    show the snapshot's changes against it), keeping the stat data of each file just checked
    out whose object is HEAD's: a single-tree ``read-tree -m`` over the snapshot's index
    takes the tree's entries and keeps an entry's stat data where its object matches. So
    neither the user's first ``git status`` there nor the copy's first snapshot (seeded from
    that index) hashes every file again. Failing that, the index is HEAD's without stat data,
    as a plain ``read-tree HEAD`` makes it; failing both, the copy has no repository."""
    index = target / ".git" / "index"
    try:
        shutil.copyfile(scratch, index)
        runner.run_outside(["read-tree", "-m", "HEAD"], cwd=target)
        return
    except (OSError, CheckpointError):
        index.unlink(missing_ok=True)
    try:
        runner.run_outside(["read-tree", "HEAD"], cwd=target)
    except CheckpointError:
        shutil.rmtree(target / ".git", ignore_errors=True)


def _inherit_rules(source: Path, target: Path) -> None:
    """Give the copy the rules its snapshot was taken under that it cannot read where it is
    (``checkpoint_enclosing.rules_to_inherit``), in its ``.maka`` folder (made with the marker
    just before): its snapshots leave out what the source's left out."""
    rules = rules_to_inherit(source)
    if not rules:
        return
    try:
        with open(
            target / INHERITED_RULES,
            "x",
            encoding="utf-8",
            errors="surrogateescape",
            opener=private_opener,
        ) as handle:
            handle.write(rules)
    except OSError as error:  # best effort: the copy is whole without them
        _log.warning("the copy at %s may snapshot what %s ignores: %s", target, source, error)


def _carry_the_users_view(runner: GitRunner, source: Path, target: Path) -> None:
    """What makes ``git status`` in the user's folder read as it does, given to the clone:
    its ``info/exclude`` rules; the ignored files the user added and has not committed
    (``_add_tracked_ignored``); the entries a sparse checkout leaves out of the folder
    (skip-worktree in the user's index, or under a folder a sparse index holds as one entry;
    the snapshot has no file there) keep that bit, or the copy would show each as deleted and
    ``git commit -a`` there would delete it, and the clone is made sparse as the folder is (its
    patterns and settings); ``core.fileMode false``, or every file whose execute bit
    differs from its commit would show as modified; the repository's line-ending settings
    (``core.autocrlf``, ``core.eol``, ``core.safecrlf``), or a file Git converts would; the
    identity it commits with (``user.name``, ``user.email``), when it has its own; and its
    own ``core.excludesFile``; and its remotes in place of the clone's ``origin`` (the
    user's folder: ``checkpoint_remotes``). Best effort: whatever cannot be read leaves the
    clone as it is."""
    from storage.checkpoints.checkpoint_borrow import user_repository
    from storage.checkpoints.checkpoint_subindex import SKIP_WORKTREE, read_entries

    try:
        user = user_repository(source)
        if user is not None and (user.common / "info" / "exclude").is_file():
            # The user's own ignore rules, as in the folder (the clone's template has none).
            (target / ".git" / "info").mkdir(exist_ok=True)
            shutil.copyfile(user.common / "info" / "exclude", target / ".git" / "info" / "exclude")
        _add_tracked_ignored(runner, source, target)
        if user is None:
            return
        mirror_remotes(runner, user.common / "config", source, target)
        entries = read_entries((user.git_dir / "index").read_bytes(), sparse=True) or []
        skipped = {os.fsdecode(e.name) for e in entries if e.extended & SKIP_WORKTREE}
        if skipped:
            _sparse_like(runner, user.git_dir, user.common, target, skipped)
        mode = _user_setting(runner, user.common / "config", "core.filemode", target)
        if mode == "false":
            runner.run_outside(["config", "core.fileMode", "false"], cwd=target)
        for key in (*_LINE_ENDING_SETTINGS, *_IDENTITY_SETTINGS):
            value = _user_setting(runner, user.common / "config", key, target, kind=None)
            if value is not None:
                runner.run_outside(["config", key, value], cwd=target)
        excludes = _user_setting(
            runner, user.common / "config", "core.excludesFile", target, kind="path"
        )
        if excludes:
            # The repository's own excludes file, named where it is (a relative one is the
            # folder's): the copy ignores what the folder ignores, and its snapshot matches.
            named = Path(excludes)
            where = named if named.is_absolute() else Path(os.path.abspath(source)) / named
            runner.run_outside(["config", "core.excludesFile", str(where)], cwd=target)
    except (OSError, CheckpointError) as error:
        _log.warning("the copy at %s may not read as %s does: %s", target, source, error)


def _sparse_like(
    runner: GitRunner, git_dir: Path, common: Path, target: Path, skipped: set[str]
) -> None:
    """The clone's entries left out as in the user's sparse checkout, and its settings."""
    folders = tuple(name for name in skipped if name.endswith("/"))
    listed = runner.run_outside(["ls-files", "-z"], cwd=target)
    # Every entry the user's index skips (a file hidden with ``update-index --skip-worktree``
    # is in the folder, changed, and not shown), and those under a sparse index's folder
    # entries that the copy does not have.
    left_out = [
        name
        for name in (os.fsdecode(raw) for raw in listed.split(b"\0") if raw)
        if name in skipped or (name.startswith(folders) and not os.path.lexists(target / name))
    ]
    for start in range(0, len(left_out), 200):
        runner.run_outside(
            ["update-index", "--skip-worktree", "--", *left_out[start : start + 200]], cwd=target
        )
    patterns = git_dir / "info" / "sparse-checkout"
    if not patterns.is_file():
        return
    (target / ".git" / "info").mkdir(exist_ok=True)
    shutil.copyfile(patterns, target / ".git" / "info" / "sparse-checkout")
    configs = [common / "config", git_dir / "config.worktree"]
    cone = next(
        (
            found
            for found in (
                _user_setting(runner, path, "core.sparsecheckoutcone", target)
                for path in reversed(configs)
            )
            if found is not None
        ),
        None,
    )
    runner.run_outside(["config", "core.sparseCheckout", "true"], cwd=target)
    if cone is not None:
        runner.run_outside(["config", "core.sparseCheckoutCone", cone], cwd=target)


# How the user's Git reads line endings in their repository (its own configuration): the clone
# reads the snapshot's files as the folder does, or a CRLF file Git stores as LF shows modified.
# (Filters are not carried: their commands are the user's to run, never the copy's making.)
_LINE_ENDING_SETTINGS = ("core.autocrlf", "core.eol", "core.safecrlf")
# Who commits in the repository when it says so itself (``git config user.name`` there, not
# in the user's global file, which the copy reads anyway): a commit in the copy is theirs too.
_IDENTITY_SETTINGS = ("user.name", "user.email")


def _user_setting(
    runner: GitRunner, config: Path, key: str, cwd: Path, *, kind: str | None = "bool"
) -> str | None:
    """A setting of one of the user's configuration files, read as Git reads it (that file
    alone: no include followed; ``kind`` its type, None: as written); None when it is not set
    there."""
    if not config.is_file():
        return None
    typed = ["--type", kind] if kind is not None else []
    try:
        found = runner.run_outside(["config", "--file", str(config), *typed, "--get", key], cwd=cwd)
    except CheckpointError:
        return None  # not set (exit 1), or not a boolean
    return found.decode("utf-8", "replace").strip() or None


def _in_the_way(target: Path) -> str | None:
    """What stands where a folder above ``target`` should be: the nearest one that exists,
    when it is a file or a link that leads to no folder."""
    for above in target.parents:
        if not os.path.lexists(above):
            continue
        if above.is_dir():
            return None
        if above.is_symlink():
            return f"{above} is a link that leads to no folder"
        return f"{above} is a file, not a folder"
    return None


def _add_tracked_ignored(runner: GitRunner, source: Path, target: Path) -> None:
    """The snapshot's files the clone's rules ignore that HEAD lacks, shown in the copy as the
    folder showed them. A snapshot holds an ignored file when the user's Git tracked it
    (``checkpoint_tracked``): one added with ``git add -f`` and not committed yet, added to the
    clone's index (``git status`` there shows it added, as the folder did). A file the rules
    came to ignore after the snapshot (a line added to ``.git/info/exclude``, which the copy
    takes as it is now), which the user never added, is not staged: the copy's own exclude
    file names it again (``_unignore``), so it shows untracked there, as it did in the folder.
    Left ignored, it was invisible in the copy and the copy's own snapshot dropped it (a
    branch's check then refused the copy). One that no rule can name again (under an ignored
    folder) is added, as when the user's index cannot be read. Only the snapshot's files are
    in the copy at this point (its marker comes later)."""
    from storage.checkpoints.checkpoint_tracked import tracked

    found = _ignored_others(runner, target)
    held, signature = tracked(source, found)
    if signature:
        _unignore(target, [raw for raw in found if raw not in held])
        still = set(_ignored_others(runner, target))
        found = [raw for raw in found if raw in still]
    names = [os.fsdecode(raw) for raw in found]
    for start in range(0, len(names), 200):
        runner.run_outside(["update-index", "--add", "--", *names[start : start + 200]], cwd=target)


def _ignored_others(runner: GitRunner, target: Path) -> list[bytes]:
    listed = runner.run_outside(
        ["ls-files", "-z", "--others", "--ignored", "--exclude-standard"], cwd=target
    )
    return [raw for raw in listed.split(b"\0") if raw]


_PATTERN_SPECIAL = re.compile(rb"([\\*?\[\]!# ])")


def _unignore(target: Path, names: list[bytes]) -> None:
    """Append to the clone's ``info/exclude`` a rule naming each of ``names`` again (``!/name``,
    its special characters escaped; a line break, which a rule cannot hold, matched by ``?``)."""
    rules = [
        b"!/" + _PATTERN_SPECIAL.sub(rb"\\\1", raw).replace(b"\n", b"?").replace(b"\r", b"?")
        for raw in names
    ]
    if not rules:
        return
    exclude = target / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    with open(exclude, "ab") as handle:
        handle.write(
            b"\n# Maka: files the snapshot held, untracked, that these rules came to ignore "
            b"after it\n" + b"\n".join(rules) + b"\n"
        )


def _as_text(name: str) -> str:
    """``name`` as UTF-8 text: a byte that does not decode (a name read with Python's
    surrogate escapes) is written ``\\xNN``, as in the snapshots' changes and tools' results."""
    return shown_path(os.fsencode(name))


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _unavailable(code: CheckpointUnavailableCode, detail: str) -> ModeDecision:
    return ModeDecision(CheckpointMode.UNAVAILABLE, code, detail)


def _uses_lfs(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return _LFS.search(handle.read(1024 * 1024)) is not None
    except OSError:
        return False


def _lock_file(handle: IO[bytes]) -> None:
    if sys.platform == "win32":  # pragma: no cover - Windows only
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
    else:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)


def _unlock_file(handle: IO[bytes]) -> None:
    if sys.platform == "win32":  # pragma: no cover - Windows only
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
    else:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
