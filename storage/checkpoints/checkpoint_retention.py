"""Retention of workspace checkpoints (docs/design/workspace.md section 5).

Keep every checkpoint of a session's two latest runs, the boundary checkpoint (the newest) of every
earlier run and the snapshot every branched session was copied from; delete the other refs and the
orphans (refs no fact names: a capture killed before its fact), but never a ref a capture made
while it ran (by another process, or a turn or settle of its own): the ledger is read again
after the refs are listed, and a ref written just before that second reading stays (its fact
may come a moment after it); then prune unreachable Git objects
older than a day (a resume-time observation leaves a tree nothing names). The refs of a run that
has not ended are never touched (a capture may be committing its fact right now), and nothing
younger than a day is pruned, so a capture that runs meanwhile loses nothing. Refs whose commits
are gone (objects pruned or removed by hand) are deleted first: they keep nothing, and Git will not
prune while they exist. The desktop runs this in the background after its window shows.

A restored or branched copy's store names the snapshot it was made from (``START_REF``) until
it keeps a checkpoint of its own (or for a week, for a copy nobody continues in), so the
objects it was given stay packed, not loosened by a gc and pruned a day later (to be written
again by the copy's first snapshot).

Only refs of sessions this ledger holds, or that this data folder removed (the ``session.removed``
records of its lifecycle log), are ever deleted: a data folder whose ledger does not know a
session (switched from PostgreSQL to SQLite in Settings, or pointed at another or an empty
database) keeps that session's snapshots; it deleted every one of them as orphans. What
retention deletes is recorded (``REMOVED_LOG``), so that a snapshot it removed is told from one
that is gone, also on a shared ledger, where another host's snapshots are never here.

Checkpoint commits have no parent, so a deleted ref frees every object only it reached: the
store stays bounded by what the kept snapshots hold. Stores from before kept a tip ref naming the
newest checkpoint and chained each commit to the previous one; retention deletes that tip, and
a chain still hanging from a kept older commit is freed when that commit's ref goes.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from runtime.ledger.branch_facts import BranchListing
from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.quarantined_runs import Quarantined, read_unless_quarantined
from runtime.ledger.store_ports import TERMINAL_RUN_STATUSES, RunHeader, SessionRecord, StoredEvent
from runtime.ledger.workspace_facts import snapshot_fact
from storage.checkpoints.checkpoint_store import START_REF, TIP_REF, GitCheckpointStore
from storage.private_files import private_opener

_log = logging.getLogger(f"maka.{__name__}")  # the host logs "maka" to its log file
KEEP_LATEST_RUNS = 2
PRUNE_EXPIRE = "1.day.ago"
# A ref this young at retention's second reading of the ledger is left alone: its fact may be
# committed after that reading (a capture writes its ref, then its fact, a moment later).
RECENT_KEPT_S = 2.0
# How long a copy's store keeps the snapshot it was made from while the copy takes none.
START_KEPT_S = 7 * 24 * 3600
# The refs retention deleted, one JSON line each (``{"repository": "<name>.git", "ref": ...}``),
# in the checkpoints folder.
REMOVED_LOG = "retention-removed.jsonl"
# Where the data folder's lifecycle log is (``runtime.continuation.lifecycle_log``, which this
# layer does not import; a test holds the two equal).
LIFECYCLE_LOG = Path("logs") / "lifecycle.jsonl"


class _Reader(Protocol):
    def list_sessions(self) -> Sequence[SessionRecord]: ...

    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...

    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]: ...


@dataclass(slots=True)
class RetentionResult:
    deleted: list[str] = field(default_factory=list)
    kept: int = 0
    pruned: list[str] = field(default_factory=list)
    named_again: list[str] = field(default_factory=list)
    """Kept snapshots whose ref was gone, named again before the prune."""
    errors: list[str] = field(default_factory=list)


def _ref_parts(ref: str) -> tuple[str, str] | None:
    """(sessionId, runId) of a run's checkpoint ref ``refs/maka/<sessionId>/<runId>/<n>``."""
    parts = ref.split("/")
    return (parts[2], parts[3]) if len(parts) == 5 and parts[:2] == ["refs", "maka"] else None


def ref_session(ref: str) -> str:
    """The session a checkpoint ref belongs to (``refs/maka/<sessionId>/...``), "" if none."""
    parts = ref.split("/")
    return parts[2] if len(parts) >= 4 and parts[:2] == ["refs", "maka"] else ""


def trimmable_sessions(reader: _Reader, carrier: GitCheckpointStore) -> set[str]:
    """The sessions whose refs retention may delete: the ledger's, and those this data folder
    removed (its lifecycle log); never a session of a ledger this folder is not reading now."""
    sessions = {session.session_id for session in reader.list_sessions()}
    try:
        with open(carrier.root.parent / LIFECYCLE_LOG, "rb") as handle:
            for line in handle:
                if b'"session.removed"' not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and record.get("kind") == "session.removed":
                    sessions.add(str(record.get("sessionId")))
    except OSError:
        pass
    return sessions


def read_removals(carrier: GitCheckpointStore) -> tuple[int | None, set[tuple[str, str]]]:
    """What ``REMOVED_LOG`` says: since when (ms) it holds every ref retention deleted here
    (its first line; None: no log yet, a store from before it or retention never ran), and
    (repository name, ref) of each ref it records."""
    since: int | None = None
    found: set[tuple[str, str]] = set()
    try:
        with open(carrier.root / REMOVED_LOG, "rb") as handle:
            for number, line in enumerate(handle):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(record, dict):
                    continue
                if "ref" in record:
                    found.add((str(record.get("repository")), str(record.get("ref"))))
                elif number == 0 and isinstance(record.get("since"), int):
                    since = record["since"]
    except OSError:
        pass
    return since, found


def _start_removal_log(carrier: GitCheckpointStore, now: float) -> None:
    """Begin ``REMOVED_LOG`` with the time from which it holds every removal (best effort)."""
    path = carrier.root / REMOVED_LOG
    if path.exists():
        return
    try:
        with open(path, "x", encoding="utf-8", opener=private_opener) as handle:
            handle.write(json.dumps({"since": int(now * 1000)}) + "\n")
    except FileExistsError:
        pass
    except OSError as error:
        _log.warning("cannot record the refs retention removes: %s", error)


def _note_removed(carrier: GitCheckpointStore, repository: Path, refs: Sequence[str]) -> None:
    """Append the deleted refs to ``REMOVED_LOG`` (best effort: without it, a removed snapshot
    is only told by the ledger's rule of what retention keeps)."""
    lines = "".join(json.dumps({"repository": repository.name, "ref": ref}) + "\n" for ref in refs)
    try:
        with open(
            carrier.root / REMOVED_LOG, "a", encoding="utf-8", opener=private_opener
        ) as handle:
            handle.write(lines)
    except OSError as error:
        _log.warning("cannot record the refs retention removed: %s", error)


def refs_to_keep(reader: _Reader) -> tuple[set[str], set[tuple[str, str]]]:
    """The refs retention keeps, and the (session, run) pairs whose refs it must not touch
    (runs that have not ended)."""
    keep, open_runs, _ = _kept(reader)
    return keep, open_runs


def _kept(
    reader: _Reader,
) -> tuple[set[str], set[tuple[str, str]], dict[str, tuple[str, str]]]:
    """``refs_to_keep``, and for each kept snapshot fact's ref its workspace and commit (to
    name it again when its ref is gone but its objects are not)."""
    keep: set[str] = set()
    open_runs: set[tuple[str, str]] = set()
    anchors: dict[str, tuple[str, str]] = {}
    for session in reader.list_sessions():
        runs = sorted(
            reader.list_session_runs(session.session_id), key=lambda r: (r.created_at, r.run_id)
        )
        latest = {run.run_id for run in runs[-KEEP_LATEST_RUNS:]}
        for run in runs:
            if run.status not in TERMINAL_RUN_STATUSES:
                open_runs.add((session.session_id, run.run_id))
            rows = read_unless_quarantined(reader, run.run_id)
            if isinstance(rows, Quarantined):
                # A run whose record no longer decodes (quarantined): which snapshots it names
                # cannot be read, so none of its refs is touched; the other runs are trimmed.
                open_runs.add((session.session_id, run.run_id))
                continue
            facts = [
                fact
                for fact in (snapshot_fact(row.event.get("actions")) for row in rows)
                if fact is not None
            ]
            for fact in facts if run.run_id in latest else facts[-1:]:  # else its boundary one
                ref = str(fact["checkpointRef"])
                keep.add(ref)
                anchors[ref] = (
                    str(fact.get("workspaceIdentity", "")),
                    str(fact.get("commitId", "")),
                )
    # The snapshot each branched session was copied from (its ``branchStart`` fact names it):
    # kept while the branch exists, so the branch point can be copied again and checked.
    if isinstance(reader, BranchListing):
        for record in reader.list_branches():
            copied_from = record.snapshot_ref
            if copied_from is not None:
                keep.add(copied_from[1])
    return keep, open_runs, anchors


def _by_repository(
    carrier: GitCheckpointStore, anchors: Mapping[str, tuple[str, str]]
) -> dict[str, list[tuple[str, str, str]]]:
    """The kept snapshots' ``(ref, workspace, commit)`` by the name of their repository."""
    found: dict[str, list[tuple[str, str, str]]] = {}
    for ref, (workspace, commit) in sorted(anchors.items()):
        if workspace and commit:
            found.setdefault(carrier.git_dir(workspace).name, []).append((ref, workspace, commit))
    return found


def _name_kept_again(
    carrier: GitCheckpointStore, refs: dict[str, str], kept: Sequence[tuple[str, str, str]]
) -> list[str]:
    """A kept snapshot of one repository whose ref is gone from ``refs`` (its listing: deleted
    by hand, a damaged ref file) while its objects are still there is named again before the
    prune, which would remove it with nothing said; ``refs`` gains it. The refs named again."""
    again: list[str] = []
    for ref, workspace, commit in kept:
        if ref not in refs and carrier.name_again(workspace, ref, commit):
            refs[ref] = commit
            again.append(ref)
    return again


def run_retention(
    reader: _Reader, carrier: GitCheckpointStore, *, prune: bool = True, now: float | None = None
) -> RetentionResult:
    """Trim every private repository (see the module). Captures may go on meanwhile, in this
    process (a turn or a settle of the host) or another: a ref goes only when neither of two
    readings of the ledger names it, one before its repository's refs were listed and one
    after, and it was written more than ``RECENT_KEPT_S`` before the second (a capture writes
    its ref, then its fact: one whose fact came after the second reading was listed at most
    that long before it)."""
    result = RetentionResult()

    def clock() -> float:
        return now if now is not None else time.time()

    if carrier.git is None or not carrier.root.is_dir():
        return result
    _start_removal_log(carrier, clock())
    keep, open_runs, anchors = _kept(reader)
    anchored = _by_repository(carrier, anchors)
    sessions = trimmable_sessions(reader, carrier)
    listed: list[tuple[Path, dict[str, str], dict[str, int]]] = []
    for repository in sorted(carrier.root.glob("*.git")):
        try:
            broken = carrier.broken_refs(repository)
            if broken:
                carrier.delete_refs(repository, broken)
                result.deleted.extend(f"{repository.name} {ref}" for ref in broken)
            carrier.delete_refs(repository, [TIP_REF])  # no capture reads or writes it now
            refs = carrier.refs_in(repository)
            again = _name_kept_again(carrier, refs, anchored.get(repository.name, ()))
            result.named_again.extend(f"{repository.name} {ref}" for ref in again)
            listed.append((repository, refs, carrier.ref_times(repository)))
        except CheckpointError as error:
            result.errors.append(f"{repository.name}: {error.code}: {error.message}")
            _log.warning("checkpoint retention of %s failed: %s", repository, error.message)
    checked_at = clock()
    keep_now, open_now = refs_to_keep(reader)
    keep |= keep_now
    open_runs |= open_now
    # A session both readings know (one removed between them is removed here: the log says so).
    sessions &= trimmable_sessions(reader, carrier)
    for repository, refs, times in listed:
        try:
            doomed = [
                ref
                for ref in sorted(refs)
                if ref not in keep
                and ref_session(ref) in sessions
                and not _open(ref, open_runs)
                and times.get(ref, checked_at) < checked_at - RECENT_KEPT_S
            ]
            result.kept += len(refs) - len(doomed)
            if doomed:
                _note_removed(carrier, repository, doomed)
                carrier.delete_refs(repository, doomed)
                result.deleted.extend(f"{repository.name} {ref}" for ref in doomed)
            if carrier.has_start(repository) and (
                len(refs) > len(doomed) or _start_expired(carrier, repository, clock())
            ):
                # A copy's store keeps a checkpoint of its own (what it started from may go),
                # or the copy was never used for a week (an abandoned copy keeps nothing).
                carrier.delete_refs(repository, [START_REF])
            if prune:
                carrier.prune(repository, PRUNE_EXPIRE)
                result.pruned.append(repository.name)
        except CheckpointError as error:
            result.errors.append(f"{repository.name}: {error.code}: {error.message}")
            _log.warning("checkpoint retention of %s failed: %s", repository, error.message)
    return result


def _start_expired(carrier: GitCheckpointStore, repository: Path, now: float) -> bool:
    made = carrier.start_made_at(repository)
    return made is not None and now - made > START_KEPT_S


def _open(ref: str, open_runs: set[tuple[str, str]]) -> bool:
    return _ref_parts(ref) in open_runs
