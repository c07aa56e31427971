"""Retention of workspace checkpoints (docs/design/workspace.md section 5).

Keep every checkpoint of a session's two latest runs, the boundary checkpoint (the newest) of every
earlier run and the snapshot every branched session was copied from; delete the other refs and the
orphans (refs no fact names: a capture killed before its fact) of runs that had ended when it
read the ledger (a ref of a run it did not see, started since by another process or a turn of
its own, is left alone, unless older than a day); then prune unreachable Git objects
older than a day (a resume-time observation leaves a tree nothing names). The refs of a run that
has not ended are never touched (a capture may be committing its fact right now), and nothing
younger than a day is pruned, so a capture that runs meanwhile loses nothing. Refs whose commits
are gone (objects pruned or removed by hand) are deleted first: they keep nothing, and Git will not
prune while they exist. The desktop runs this in the background after its window shows.

A restored or branched copy's store names the snapshot it was made from (``START_REF``) until
it keeps a checkpoint of its own (or for a week, for a copy nobody continues in), so the
objects it was given stay packed, not loosened by a gc and pruned a day later (to be written
again by the copy's first snapshot).

Checkpoint commits have no parent, so a deleted ref frees every object only it reached: the
store stays bounded by what the kept snapshots hold. Stores from before kept a tip ref naming the
newest checkpoint and chained each commit to the previous one; retention deletes that tip, and
a chain still hanging from a kept older commit is freed when that commit's ref goes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from runtime.ledger.branch_facts import BranchListing
from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.store_ports import TERMINAL_RUN_STATUSES, RunHeader, SessionRecord, StoredEvent
from runtime.ledger.workspace_facts import snapshot_fact
from storage.checkpoints.checkpoint_store import START_REF, TIP_REF, GitCheckpointStore

_log = logging.getLogger(__name__)
KEEP_LATEST_RUNS = 2
PRUNE_EXPIRE = "1.day.ago"
# How long a ref of no run the ledger held when retention read it is left alone.
ORPHAN_KEPT_S = 24 * 3600
# How long a copy's store keeps the snapshot it was made from while the copy takes none.
START_KEPT_S = 7 * 24 * 3600


class _Reader(Protocol):
    def list_sessions(self) -> Sequence[SessionRecord]: ...

    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...

    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]: ...


@dataclass(slots=True)
class RetentionResult:
    deleted: list[str] = field(default_factory=list)
    kept: int = 0
    pruned: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def refs_to_keep(reader: _Reader) -> tuple[set[str], set[tuple[str, str]]]:
    """The refs retention keeps, and the (session, run) pairs whose refs it must not touch
    (runs that have not ended)."""
    keep: set[str] = set()
    open_runs: set[tuple[str, str]] = set()
    for session in reader.list_sessions():
        runs = sorted(
            reader.list_session_runs(session.session_id), key=lambda r: (r.created_at, r.run_id)
        )
        latest = {run.run_id for run in runs[-KEEP_LATEST_RUNS:]}
        for run in runs:
            if run.status not in TERMINAL_RUN_STATUSES:
                open_runs.add((session.session_id, run.run_id))
            facts = (
                snapshot_fact(row.event.get("actions"))
                for row in reader.read_run_events(run.run_id)
            )
            named = [str(fact["checkpointRef"]) for fact in facts if fact is not None]
            if run.run_id in latest:
                keep.update(named)
            elif named:
                keep.add(named[-1])  # the run's boundary checkpoint
    # The snapshot each branched session was copied from (its ``branchStart`` fact names it):
    # kept while the branch exists, so the branch point can be copied again and checked.
    if isinstance(reader, BranchListing):
        for record in reader.list_branches():
            copied_from = record.snapshot_ref
            if copied_from is not None:
                keep.add(copied_from[1])
    return keep, open_runs


def run_retention(
    reader: _Reader, carrier: GitCheckpointStore, *, prune: bool = True, now: float | None = None
) -> RetentionResult:
    result = RetentionResult()
    now = time.time() if now is None else now
    if carrier.git is None or not carrier.root.is_dir():
        return result
    # The runs that had ended before the refs to keep were read: only their refs may go. A
    # run that started since (another process, or a turn of this host, captured meanwhile) is
    # not in what was read, and its refs would look like no fact's; they stay, unless older
    # than a day (a ref of no run at all: a branch refused or killed before it was recorded).
    ended = _ended_runs(reader)
    keep, open_runs = refs_to_keep(reader)
    for repository in sorted(carrier.root.glob("*.git")):
        try:
            broken = carrier.broken_refs(repository)
            if broken:
                carrier.delete_refs(repository, broken)
                result.deleted.extend(f"{repository.name} {ref}" for ref in broken)
            carrier.delete_refs(repository, [TIP_REF])  # no capture reads or writes it now
            refs = carrier.refs_in(repository)
            times = carrier.ref_times(repository)
            doomed = [
                ref
                for ref in sorted(refs)
                if ref not in keep
                and not _open(ref, open_runs)
                and (_run_of(ref) in ended or times.get(ref, now) < now - ORPHAN_KEPT_S)
            ]
            result.kept += len(refs) - len(doomed)
            if doomed:
                carrier.delete_refs(repository, doomed)
                result.deleted.extend(f"{repository.name} {ref}" for ref in doomed)
            if carrier.has_start(repository) and (
                len(refs) > len(doomed) or _start_expired(carrier, repository, now)
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


def _ended_runs(reader: _Reader) -> set[tuple[str, str]]:
    """(session, run) of every run the ledger holds as ended now (headers only)."""
    return {
        (session.session_id, run.run_id)
        for session in reader.list_sessions()
        for run in reader.list_session_runs(session.session_id)
        if run.status in TERMINAL_RUN_STATUSES
    }


def _run_of(ref: str) -> tuple[str, str] | None:
    parts = ref.split("/")  # refs/maka/<sessionId>/<runId>/<n>
    return (parts[2], parts[3]) if len(parts) == 5 else None


def _open(ref: str, open_runs: set[tuple[str, str]]) -> bool:
    parts = ref.split("/")  # refs/maka/<sessionId>/<runId>/<n>
    return len(parts) == 5 and (parts[2], parts[3]) in open_runs
