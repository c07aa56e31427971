"""A restored copy's snapshot objects, given to the copy's own private repository
(docs/design/workspace.md section 4, "A copy's objects are shared, not written again").

A restored or branched copy is a new workspace with a private repository of its own. Its first
look (the branch's check that the copy holds the snapshot, or the first capture of a run
continued there) hashes every file, and Git writes each blob its repository does not hold: in
a 10,000-file, 200 MB folder that compressed and wrote every byte of the snapshot a second
time. The copy holds exactly the snapshot's files, whose objects the source's repository holds
and the restore has just checked against their names, so the new repository is given them
first:

- each object the source holds loose gets a second name in the new repository (a hard link:
  Git never changes an object file once written, and removes one only by unlinking its name,
  so either repository can prune its own name without touching the other's), its time set to
  now as Git sets an object's it finds already written;
- the rest (packed, or still borrowed from the user's repository) is copied as one pack
  (``pack-objects``: packed data reused as it is, loose objects compressed fast).

The copy's look still hashes every file (that is its check); it finds each object there and
writes nothing. Objects are only ever added, each whole (a link, or a pack Git renames into
place), so a failure part way leaves the new repository to write the others itself, as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from storage.checkpoints.checkpoint_git import GitRunner

_link = os.link  # a name of its own: a test takes links away from this module alone


def share_objects(runner: GitRunner, source: Path, target: Path, object_ids: Iterable[str]) -> int:
    """Give the repository ``target`` every object of ``object_ids`` that the repository
    ``source`` can read; returns how many were linked (the rest were packed). Both are private
    repositories of the same data folder. Raises ``OSError`` or ``CheckpointError``."""
    source_objects = os.fspath(source / "objects")
    target_objects = os.fspath(target / "objects")
    wanted = list(dict.fromkeys(object_ids))
    # What the source holds loose, read per folder: one listing each instead of a failed
    # link per packed object.
    loose: set[str] = set()
    for fan in {object_id[:2] for object_id in wanted}:
        try:
            loose.update(fan + name for name in os.listdir(os.path.join(source_objects, fan)))
        except OSError:
            continue  # none loose there
    fans: set[str] = set()
    rest: list[str] = []
    linked = 0
    for object_id in wanted:
        if object_id not in loose:
            rest.append(object_id)  # packed, or borrowed from the user's repository
            continue
        fan, name = object_id[:2], object_id[2:]
        if fan not in fans:
            os.makedirs(os.path.join(target_objects, fan), exist_ok=True)
            fans.add(fan)
        named = os.path.join(target_objects, fan, name)
        try:
            _link(os.path.join(source_objects, fan, name), named)
            # Young, as an object just written is: a retention pass prunes only unreachable
            # objects older than a day, and nothing reaches these until the copy's first
            # snapshot (Git "freshens" an object it finds the same way).
            os.utime(named)
            linked += 1
        except FileExistsError:
            continue  # already held
        except OSError:
            # Gone meanwhile (packed by a gc), or no link to be had on this file system.
            rest.append(object_id)
    if rest:
        pack = Path(target_objects) / "pack"
        pack.mkdir(exist_ok=True)
        runner.run(
            ["-c", "pack.compression=1", "pack-objects", "-q", "--window=0", str(pack / "pack")],
            git_dir=source,
            stdin="".join(f"{object_id}\n" for object_id in rest).encode(),
        )
    return linked
