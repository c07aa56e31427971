"""A restored or branched copy of a Git repository names the user's remotes, not the user's
folder (docs/design/workspace.md section 4).

The copy is a local clone of the user's repository, so Git makes the user's folder its
``origin`` and the user's branches its remote-tracking branches: ``git status`` in the copy
said "up to date with 'origin/main'" (the user's local branch) where the user's own said what
their real upstream says, and ``git push`` there went to the user's folder. Here the clone's
``origin`` goes, the user's remotes come in as they are configured (their URLs, push URLs and
fetch refspecs; a path relative to the folder made absolute), where each branch pulls from and
pushes to (``remote.pushDefault``, ``branch.<b>.pushRemote``; read with the files the
configuration includes), and the user's remote-tracking branches are
fetched from the user's folder (read, never written): ``git status`` and ``git log
origin/main`` in the copy read as they do in the folder, and a push from the copy goes where
one from the folder goes: to the user's real remote, no longer into the user's folder (which
refused a push to its checked-out branch anyway).

Only those keys are carried: a remote's other settings (its upload or receive programs, say)
stay the user's own. Best effort: whatever cannot be read leaves the clone as Git made it.

The user's local branches are carried too (``carry_local_refs``): a clone has only the branch
checked out, the user's other branches becoming ``origin/*``, which go with ``origin``; so every
branch of the user's (``refs/heads/*``), their tags and their stash are fetched from the folder
into the copy's own, and its HEAD is the user's: the same branch, or detached at the same commit.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from runtime.ledger.checkpoint_ports import CheckpointError
from storage.checkpoints.checkpoint_enclosing import git_dirs
from storage.checkpoints.checkpoint_git import GitRunner

_log = logging.getLogger(f"maka.{__name__}")  # the host logs "maka" to its log file
# The settings carried, as ``git config --get-regexp`` names them (lower-cased section and
# key; a remote's or a branch's own name as written).
_CARRIED = re.compile(
    r"^(remote\.pushdefault|remote\..+\.(url|pushurl|fetch)|branch\..+\.(remote|merge|pushremote))$"
)


def mirror_remotes(runner: GitRunner, config: Path, source: Path, target: Path) -> None:
    """Give the clone at ``target`` the remotes of the user's repository at ``source`` (its
    configuration ``config``) in place of the clone's own ``origin``."""
    try:
        listed = runner.run_outside(
            [
                "config",
                "--file",
                str(config),
                "--includes",
                "--null",
                "--get-regexp",
                r"^(remote|branch)\.",
            ],
            cwd=target,
        )
    except CheckpointError:
        listed = b""  # no remote and no upstream: none in the copy either
    settings: list[tuple[str, str]] = []
    for entry in listed.split(b"\0"):
        if not entry:
            continue
        key, _, value = entry.decode("utf-8", "surrogateescape").partition("\n")
        if _CARRIED.match(key):
            if key.endswith(("url", "pushurl")) and value.startswith(("./", "../")):
                # A remote named by a path relative to the folder: the copy is elsewhere.
                value = os.path.normpath(os.path.join(os.path.abspath(source), value))
            settings.append((key, value))
    try:
        runner.run_outside(["remote", "remove", "origin"], cwd=target)
        for key, value in settings:
            runner.run_outside(["config", "--add", key, value], cwd=target)
        if any(key.startswith("remote.") for key, _ in settings):
            runner.run_outside(
                [
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    str(source),
                    "+refs/remotes/*:refs/remotes/*",
                ],
                cwd=target,
            )
    except CheckpointError as error:
        _log.warning("the copy at %s may not name %s's remotes: %s", target, source, error)


def carry_local_refs(runner: GitRunner, source: Path, target: Path) -> None:
    """Give the clone at ``target`` (at the user's HEAD commit) the local refs of the user's
    repository at ``source``: every branch at its commit, their tags, the stash, and HEAD as the
    user has it (on the same branch, or detached at the commit cloned; ``git clone`` of a
    detached HEAD checks out a branch at that commit if one is). Everything is fetched from the
    folder, which is only read (``upload-pack`` there, as for the clone itself); nothing of an
    operation in progress (``MERGE_HEAD``, a rebase's state) is, as no clone has it. Run before
    the clone's index is made from its HEAD. Best effort: what fails leaves the clone as Git
    made it, on the user's HEAD commit."""
    try:
        cloned = runner.run_outside(["rev-parse", "--verify", "HEAD^{commit}"], cwd=target)
        # The user's HEAD (a symbolic one named: ``--symref``) and stash, whatever the
        # repository's ref storage.
        listed = runner.run_outside(
            ["ls-remote", "--symref", str(source), "HEAD", "refs/stash"], cwd=target
        )
    except CheckpointError as error:
        _log.warning("the copy at %s may lack %s's branches: %s", target, source, error)
        return
    head: str | None = None  # the branch the user is on; None: detached
    stash: str | None = None
    for line in listed.decode("utf-8", "surrogateescape").splitlines():
        value, _, name = line.partition("\t")
        if name == "HEAD" and value.startswith("ref: "):
            head = value[len("ref: ") :]
        elif name == "refs/stash":
            stash = value
    try:
        runner.run_outside(
            [
                "fetch",
                "--quiet",
                "--no-tags",
                "--update-head-ok",  # the branch checked out is one of them, at that commit
                str(source),
                "+refs/heads/*:refs/heads/*",
                "+refs/tags/*:refs/tags/*",
                *(["+refs/stash:refs/stash"] if stash else []),
            ],
            cwd=target,
        )
        if head is None:
            commit = cloned.decode().strip()
            runner.run_outside(
                [
                    "update-ref",
                    "--no-deref",
                    "-m",
                    _detached_how(source) or f"checkout: moving from HEAD to {commit}",
                    "HEAD",
                    commit,
                ],
                cwd=target,
            )
        elif head.startswith("refs/heads/"):
            # The branch exists: a HEAD on a branch with no commit yet is not cloned at all.
            runner.run_outside(["rev-parse", "--verify", "--quiet", head], cwd=target)
            runner.run_outside(["symbolic-ref", "HEAD", head], cwd=target)
    except CheckpointError as error:
        _log.warning("the copy at %s may lack %s's branches: %s", target, source, error)
        return
    if stash:
        _carry_stash_log(runner, source, target, stash)


def _detached_how(source: Path) -> str | None:
    """The message of the user's last HEAD reflog entry when it is a checkout's (``checkout:
    moving from main to v1``): Git reads it to say what a detached HEAD is "detached at", so
    the copy's ``git status`` and ``git branch`` say it as the folder's do."""
    found = git_dirs(source)
    if found is None:
        return None
    try:
        with open(found[0] / "logs" / "HEAD", "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4096))
            last = handle.read().rstrip(b"\n").rpartition(b"\n")[2]
    except OSError:
        return None
    message = last.partition(b"\t")[2].decode("utf-8", "surrogateescape")
    return message if message.startswith("checkout: moving from ") else None


def _carry_stash_log(runner: GitRunner, source: Path, target: Path, stash: str) -> None:
    """The stash's older entries (``stash@{1}`` on), which only its reflog names, so no fetch
    carries them: the user's reflog, read as a file, written as the copy's, keeping the
    entries whose commits the copy has (a local clone copies the user's whole object store, so
    normally every one). Where either repository keeps its refs in a reftable (no reflog file
    to read or write), or the reflog does not end at the stash just fetched (changed in
    between), only the newest entry (``refs/stash`` itself) is carried."""
    found = git_dirs(source)
    if found is None or (target / ".git" / "reftable").exists():
        return
    try:
        text = (found[1] / "logs" / "refs" / "stash").read_bytes()
    except OSError:
        return
    lines = [line for line in text.split(b"\n") if line]
    news = [line.split(b" ", 2)[1] if line.count(b" ") >= 2 else b"" for line in lines]
    if not news or news[-1].decode("ascii", "replace") != stash:
        return
    try:
        checked = runner.run(  # read only, in the copy's repository
            ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
            git_dir=target / ".git",
            stdin=b"".join(new + b"\n" for new in news),
        )
    except CheckpointError as error:
        _log.warning("the copy at %s has only the newest stash entry: %s", target, error)
        return
    present = {row.split(b" ")[0] for row in checked.splitlines() if row.endswith(b" commit")}
    kept = b"".join(line + b"\n" for line, new in zip(lines, news, strict=True) if new in present)
    log = target / ".git" / "logs" / "refs" / "stash"
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_bytes(kept)
    except OSError as error:
        _log.warning("the copy at %s has only the newest stash entry: %s", target, error)
