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
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from runtime.ledger.checkpoint_ports import CheckpointError
from storage.checkpoints.checkpoint_git import GitRunner

_log = logging.getLogger(__name__)
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
