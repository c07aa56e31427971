"""The evidence the workspace gate needs about the boundary checkpoint (docs/design/workspace.md
section 3), gathered from the checkpoint carrier by the resume service before the (pure) planner
runs: whether the checkpoint's Git objects still exist, and how the safety inspector's capture of
the folder differs from it."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from runtime.continuation.admission_basis import AdmissionBasis
from runtime.continuation.branch_prefix import BranchReader
from runtime.continuation.continuation_planner import SafetyObservation
from runtime.continuation.expected_tree import ExpectedFile, expected_tree
from runtime.continuation.restore_point import RestorePoint, find_restore_point
from runtime.continuation.workspace_gate import CheckpointEvidence
from runtime.ledger.checkpoint_ports import (
    CheckpointCarrier,
    CheckpointError,
    PathChange,
    TreeChange,
)
from runtime.ledger.command_words import maka_command
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunHeader, StoredEvent
from runtime.ledger.workspace_facts import FOLDER_HOLDS_CODES, boundary_checkpoint
from runtime.recovery.file_observation import observe_in_folder


def checkpoint_evidence(
    carrier: CheckpointCarrier | None,
    events: Sequence[RuntimeEvent],
    observation: SafetyObservation,
    basis: AdmissionBasis | None = None,
) -> CheckpointEvidence | None:
    """What the planner's workspace gate needs about the boundary checkpoint: whether its Git
    objects still exist and how the observed tree differs from the expected tree (the checkpoint
    rolled forward over the writes the ledger proves, ``expected_tree``). None when the run has
    no checkpoint the gate would compare (no mode, a failed or stale one). A continuation that
    stopped before its first snapshot with nothing run is compared with ``basis`` (the snapshot
    its admission was based on), when that is intact."""
    boundary = expected_tree(events)
    checkpoint = boundary.checkpoint
    if checkpoint is None and boundary.failed is None and boundary.stale_after is None:
        return _basis_evidence(carrier, basis, observation) if basis is not None else None
    if checkpoint is not None and boundary.failed is None and boundary.stale_after is not None:
        # Stale: the park stands whatever the folder holds, but it names what differs from
        # that snapshot, so the user knows which files to check.
        since = changes_since_snapshot(carrier, events, observation)
        return None if since is None else _compared(since, observation, stale_compared=True)
    if checkpoint is None or boundary.failed is not None or boundary.stale_after is not None:
        return None
    if carrier is None:
        return CheckpointEvidence(False)
    workspace = str(checkpoint["workspaceIdentity"])
    tree_id = str(checkpoint["treeId"])
    tree = observation.workspace_tree
    holds = tree is not None and tree.tree_id is None and tree.code in FOLDER_HOLDS_CODES
    if tree is not None and tree.tree_id is None and not holds:
        # The store is there but Git could not run (no git on PATH any more, a Git error): the
        # snapshot cannot be looked up either, which does not make it missing.
        problem = tree.problem or "the folder could not be captured"
        return CheckpointEvidence(
            False, problem=f"the folder could not be compared with the snapshot ({problem})"
        )
    try:
        present = carrier.has_snapshot(workspace, str(checkpoint["commitId"]), tree_id)
    except CheckpointError as error:
        # Git could not look it up (a timeout, a lock): that does not make it missing.
        return CheckpointEvidence(
            False, problem=f"the snapshot could not be looked up ({error.code}: {error.message})"
        )
    note = getattr(carrier, "missing_note", None)
    if not present:
        # The snapshot was taken elsewhere (another host's data folder on a shared ledger; an
        # import without it; a store deleted or pruned). When the tree the folder has now is the
        # very tree the ledger recorded, nothing changed: Git names a tree by its content. The
        # tree must be whole here too: a store that lost objects may have an index naming
        # objects it no longer has, which would make the same tree id without the files.
        if not boundary.files and workspace == observation.workspace_identity:
            seen = tree.tree_id if tree is not None else _observed(carrier, observation)
            if seen == tree_id and carrier.has_tree(workspace, tree_id):
                damaged, moved = _damage(carrier, workspace, tree_id)
                return CheckpointEvidence(
                    True,
                    (),
                    missing_note=note,
                    damaged_note=damaged,
                    damaged_moved=moved,
                    by_tree_id=True,
                )
        damaged, moved = _damage(carrier, workspace, tree_id)
        return CheckpointEvidence(
            False, missing_note=note, damaged_note=damaged, damaged_moved=moved
        )
    if workspace != observation.workspace_identity:
        # The identity gate parks (a marker deleted and made anew, another folder): the folder
        # has no store of its own to capture it with, which is no failure to say beside it.
        return CheckpointEvidence(True, compared=False)
    if tree is not None and holds:
        # Refused for what the folder holds now (a repository made inside it while Maka was
        # stopped): a change since the snapshot, whose files cannot be listed. Both ways
        # forward stay: the rebaseline (going on without a snapshot until that is removed) and
        # a restored copy of the snapshot, which is whole.
        problem = tree.problem or str(tree.code)
        return CheckpointEvidence(
            True, folder_holds=(str(tree.code), problem.removeprefix(f"{tree.code}: "))
        )
    if tree is None or tree.tree_id is None:
        return CheckpointEvidence(True, problem="the folder could not be captured")
    try:
        changes = carrier.changes(workspace, tree_id, tree.tree_id)
    except CheckpointError as error:
        return CheckpointEvidence(True, problem=f"{error.code}: {error.message}")
    bits = expected_bits(carrier, workspace, tree_id, boundary.files)
    return _compared(rolled_forward(changes, boundary.files, observation, bits), observation)


def _compared(
    differ: tuple[TreeChange, ...],
    observation: SafetyObservation,
    *,
    stale_compared: bool = False,
    basis: bool = False,
) -> CheckpointEvidence:
    """Evidence of a snapshot that is here and was compared: how the folder differs, and
    which of the paths called deleted are still there (``still_there``)."""
    left = still_there(differ, observation.workspace_path)
    return CheckpointEvidence(
        True, differ, stale_compared=stale_compared, basis=basis, left_out=left
    )


def still_there(changes: Sequence[TreeChange], folder: str) -> tuple[str, ...]:
    """The paths ``changes`` calls deleted that are still in ``folder``: the snapshot of it
    now leaves them out (an ignore rule came in since, or the file grew over the size limit),
    so they are not gone, whatever the comparison of the two snapshots says. A folder there
    now (a file replaced by a folder of its name) is not the file left out: the file is gone,
    and the folder's files are listed as added."""
    return tuple(
        change.path
        for change in changes
        if change.change is PathChange.DELETED
        and not change.path.endswith("/")
        and _a_file_named(folder, change.path)
    )


_STRAY_BYTE = re.compile(rb"\\x([0-9a-f]{2})")


def _a_file_named(folder: str, shown: str) -> bool:
    """A file is in ``folder`` under the name a change shows as ``shown``: as it reads, or, for
    a name that is not UTF-8, with its stray bytes (shown as ``\\xNN``) put back."""
    if _a_file_at(os.fsencode(folder), os.fsencode(shown)):
        return True
    if "\\x" not in shown:
        return False
    raw = _STRAY_BYTE.sub(lambda found: bytes([int(found.group(1), 16)]), shown.encode())
    return _a_file_at(os.fsencode(folder), raw)


def _a_file_at(folder: bytes, relative: bytes) -> bool:
    """Something other than a folder is at ``relative`` in ``folder`` (a link to one counts:
    it is a link), reached through real folders only: behind a folder replaced by a link (or
    a file), the path is not the snapshot's file but something elsewhere, and the file is
    gone from the folder."""
    parts = [part for part in relative.split(b"/") if part]
    if not parts:
        return False
    current = folder
    try:
        for part in parts[:-1]:
            current = os.path.join(current, part)
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return False  # a link or a file where the snapshot had a folder
        return not stat.S_ISDIR(os.lstat(os.path.join(current, parts[-1])).st_mode)
    except OSError:
        return False


def _observed(carrier: CheckpointCarrier, observation: SafetyObservation) -> str | None:
    """The folder's tree under the checkpoint policy, captured into a store this data folder
    makes for the workspace now (it had none: every snapshot of it was taken elsewhere), or
    None when it cannot be captured."""
    try:
        snapshot = carrier.observe(Path(observation.workspace_path), observation.workspace_identity)
    except CheckpointError:
        return None
    return snapshot.tree_id


NEW_FILE_BITS = 0o644
"""The bits the write tools give a file they create (runtime/tools/file_tools.py), less the
umask; a file they overwrite keeps its own, less the umask too (the new content is written to a
file created with them, then renamed over the old)."""


@dataclass(frozen=True, slots=True)
class ExpectedBits:
    """What the permission bits of the paths proven writes left are compared with:
    ``recorded``, the checkpoint's permission record (None: it has none, a snapshot taken
    before they were kept, or it could not be read), and ``umask``, this process's (the one
    the writes ran under, as far as can be known: a resume runs as the run did)."""

    recorded: Mapping[str, int] | None
    umask: int

    def of(self, want: ExpectedFile) -> int | None:
        """The bits ``want``'s path should have, or None when they are not known: a deletion,
        a file that was there before the writes but is not in the record (none kept, an
        ignored file, one the user made after the snapshot), evidence that does not say."""
        if not want.exists or want.created is None:
            return None
        if want.created:
            base: int | None = NEW_FILE_BITS
        else:
            base = None if self.recorded is None else self.recorded.get(want.path)
        return None if base is None else base & ~self.umask


def expected_bits(
    carrier: CheckpointCarrier | None,
    store: str,
    tree_id: str,
    files: Mapping[str, ExpectedFile],
) -> ExpectedBits | None:
    """What ``rolled_forward`` compares the bits of ``files`` with, the checkpoint being
    ``tree_id`` in ``store``'s repository: one read of its permission record, only when a file
    there before the writes needs it (a carrier without ``recorded_bits`` has none). None on
    Windows (no POSIX bits) or with no file to compare."""
    if os.name == "nt" or not any(want.exists for want in files.values()):
        return None
    recorded: Mapping[str, int] | None = None
    read = _record_reader(carrier)
    if read is not None and any(want.created is False for want in files.values()):
        try:
            recorded = read(store, tree_id)
        except CheckpointError:
            recorded = None  # the files there before are compared by content alone
    return ExpectedBits(recorded, process_umask())


def _record_reader(carrier: CheckpointCarrier | None) -> Any:
    """The carrier's ``recorded_bits`` (the Git store and the plan's ``PresenceMemo`` have it;
    other carriers need not), or None."""
    read = getattr(carrier, "recorded_bits", None)
    return read if callable(read) else None


def process_umask() -> int:
    """This process's umask, read without changing it where the system says it
    (``/proc/self/status``); elsewhere set for a moment to a stricter one and back (a file
    another thread makes meanwhile is at worst more private)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8) & 0o777
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o077)
    os.umask(old)
    return old & 0o777


def rolled_forward(
    changes: Sequence[TreeChange],
    files: Mapping[str, ExpectedFile],
    observation: SafetyObservation,
    bits: ExpectedBits | None = None,
) -> tuple[TreeChange, ...]:
    """How the folder differs from the expected tree: every path a proven write changed is
    compared with the content hash its T1 evidence recorded and, with ``bits``, with the
    permission bits the write left (a chmod since is a change, as of any other file); every
    other path with the checkpoint (``changes``, the checkpoint's tree against the
    folder's)."""
    if not files:
        return tuple(changes)
    differ = [change for change in changes if change.path not in files]
    for path, want in files.items():
        seen = observe_in_folder(observation.workspace_path, path, observation.workspace_identity)
        same = not want.exists or (seen.sha256, seen.size) == (want.sha256, want.size)
        if seen.problem is None and seen.exists == want.exists and same:
            wanted = None if bits is None else bits.of(want)
            if wanted is None or _bits_at(observation.workspace_path, path) in (wanted, None):
                continue
        if seen.problem is None and not seen.exists:
            change = PathChange.DELETED
        elif not want.exists:
            change = PathChange.ADDED
        else:
            change = PathChange.MODIFIED
        differ.append(TreeChange(path, change))
    return tuple(sorted(differ, key=lambda change: change.path))


def _bits_at(folder: str, path: str) -> int | None:
    """The permission bits of the file at ``path`` in ``folder`` (None: it is gone since)."""
    try:
        return stat.S_IMODE(os.lstat(os.path.join(folder, path)).st_mode)
    except OSError:
        return None


def _intact(carrier: CheckpointCarrier, checkpoint: Mapping[str, Any]) -> bool:
    try:
        return carrier.has_snapshot(
            str(checkpoint["workspaceIdentity"]),
            str(checkpoint["commitId"]),
            str(checkpoint["treeId"]),
        )
    except (CheckpointError, KeyError):
        return False


def _basis_evidence(
    carrier: CheckpointCarrier | None, basis: AdmissionBasis, observation: SafetyObservation
) -> CheckpointEvidence | None:
    """The evidence about the admission basis, or None (the run's own facts decide: stale)
    when it is not intact or the folder could not be captured."""
    tree = observation.workspace_tree
    if carrier is None or tree is None or tree.tree_id is None:
        return None
    if not _intact(carrier, basis.checkpoint):
        return None
    if basis.folder_identity != observation.workspace_identity:
        return CheckpointEvidence(True, compared=False, basis=True)  # the identity gate parks
    try:
        changes = carrier.changes(
            observation.workspace_identity,
            str(basis.checkpoint["treeId"]),
            tree.tree_id,
            old_workspace=str(basis.checkpoint["workspaceIdentity"]),
        )
    except CheckpointError as error:
        return CheckpointEvidence(True, problem=f"{error.code}: {error.message}", basis=True)
    store, tree_id = str(basis.checkpoint["workspaceIdentity"]), str(basis.checkpoint["treeId"])
    bits = expected_bits(carrier, store, tree_id, basis.files)
    differ = rolled_forward(changes, basis.files, observation, bits)
    return _compared(differ, observation, basis=True)


def changes_since_snapshot(
    carrier: CheckpointCarrier | None,
    events: Sequence[RuntimeEvent],
    observation: SafetyObservation,
    basis: AdmissionBasis | None = None,
) -> tuple[TreeChange, ...] | None:
    """How the observed folder differs from the run's newest snapshot, stale or not (what a
    rebaseline tells the model); None when there is nothing to compare with (no snapshot, its
    objects gone, another workspace)."""
    checkpoint = comparable_snapshot(carrier, events, observation, basis)
    tree = observation.workspace_tree
    if carrier is None or checkpoint is None or tree is None or tree.tree_id is None:
        return None
    try:
        changes = tuple(
            carrier.changes(
                observation.workspace_identity,
                str(checkpoint["treeId"]),
                tree.tree_id,
                old_workspace=str(checkpoint["workspaceIdentity"]),
            )
        )
    except CheckpointError:
        return None
    boundary = expected_tree(events)
    if boundary.checkpoint == checkpoint and boundary.stale_after is None:
        # The writes the ledger proves after that snapshot are the run's own: rolled forward
        # over them, as the plan's drift is, a file a proven write left as it wrote it is not
        # among the changes the model is told of (and the counts agree with the plan's).
        store, tree_id = str(checkpoint["workspaceIdentity"]), str(checkpoint["treeId"])
        bits = expected_bits(carrier, store, tree_id, boundary.files)
        return rolled_forward(changes, boundary.files, observation, bits)
    return changes


def comparable_snapshot(
    carrier: CheckpointCarrier | None,
    events: Sequence[RuntimeEvent],
    observation: SafetyObservation,
    basis: AdmissionBasis | None = None,
) -> Mapping[str, Any] | None:
    """The snapshot a rebaseline would compare the current files with (the run's newest one,
    stale or not, of this workspace, its objects present; for a continuation stopped before its
    first one with nothing run, ``basis``, the snapshot its admission was based on), or None:
    the model is then told only that files may have changed."""
    checkpoint = boundary_checkpoint(events).checkpoint
    tree = observation.workspace_tree
    if carrier is None or tree is None or tree.tree_id is None:
        return None
    if checkpoint is None and basis is not None:
        if basis.folder_identity != observation.workspace_identity:
            return None
        return basis.checkpoint if _intact(carrier, basis.checkpoint) else None
    if checkpoint is None:
        return None
    workspace = str(checkpoint["workspaceIdentity"])
    if workspace != observation.workspace_identity:
        return None
    try:
        present = carrier.has_snapshot(
            workspace, str(checkpoint["commitId"]), str(checkpoint["treeId"])
        )
    except CheckpointError:
        return None
    return checkpoint if present else None


def restore_point(
    carrier: CheckpointCarrier | None, generations: Sequence[Sequence[RuntimeEvent]]
) -> RestorePoint | None:
    """The snapshot a restored copy would be made from: the newest one of the lineage whose
    Git objects still exist (the boundary one, else the latest earlier one), or None."""
    if carrier is None:
        return None
    return find_restore_point(generations, partial(_intact, carrier))


class SessionRunsReader(Protocol):
    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...

    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]: ...


def abandoned_restores(
    store: SessionRunsReader, carrier: CheckpointCarrier | None, session_id: str
) -> list[str]:
    """The restored copies of a session a resume made but no continuation ever moved to (in
    any lineage: a new message starts a new one in the copy the session lives in; a crash or
    a refusal after the copy was made leaves it in place, never reused), for ``maka plan``,
    ``maka doctor`` and the desktop's banner; none when the store cannot be read. The copy a
    branched session was made in (``maka branch``: its ``branchStart`` fact names it) is its
    home, not an abandoned copy."""
    attempts = carrier.restore_attempts(session_id) if carrier is not None else []
    if not attempts:
        return []
    try:
        starts = [
            rows[0].event
            for run in store.list_session_runs(session_id)
            if run.continuation_source is not None and (rows := store.read_run_events(run.run_id))
        ]
        branch = store.read_branch(session_id) if isinstance(store, BranchReader) else None
    except LedgerError:
        return []
    used = {
        str(event["actions"]["workspaceTransition"]["toPath"])
        for event in starts
        if "workspaceTransition" in (event.get("actions") or {})
    }
    home = branch.workspace_path if branch is not None else None
    kept = {os.path.realpath(home)} if home else set()
    return [
        path
        for path in attempts
        if path not in used and os.path.realpath(path) not in kept and os.path.isdir(path)
    ]


def uncompared_damage(
    carrier: CheckpointCarrier | None, events: Sequence[RuntimeEvent]
) -> tuple[str | None, bool]:
    """Why the run's newest snapshot cannot be compared with, when a check found it damaged
    and moved its objects aside, or Git cannot read some, and whether objects were moved
    (``_damage``); ``(None, False)`` otherwise."""
    checkpoint = boundary_checkpoint(events).checkpoint
    if carrier is None or checkpoint is None:
        return None, False
    return _damage(carrier, str(checkpoint["workspaceIdentity"]), str(checkpoint["treeId"]))


def _damage(carrier: CheckpointCarrier, workspace: str, tree_id: str) -> tuple[str | None, bool]:
    """When the snapshot is damaged rather than lost, that in words, and whether a check moved
    some of its objects aside: a check found objects of it damaged and moved them aside (kept;
    a capture writes them again only from a folder that still holds those bytes), or Git cannot
    read the stored bytes of some (a damaged file or pack entry of the store). ``(None,
    False)`` when neither, or it cannot be told."""
    find = getattr(carrier, "damaged_aside", None)
    if find is None:
        return None, False
    try:
        found = find(workspace, [tree_id]).get(tree_id)
    except CheckpointError:
        return None, False
    if not found:
        return None, False
    moved = [item for item in found if item.moved_to]
    told = []
    if moved:
        folder = os.path.dirname(str(moved[0].moved_to))
        told.append(
            f"a check found it damaged and moved {len(moved)} of its objects aside, kept, to "
            f"{folder} ({maka_command('doctor --verify-snapshots')} lists them); a capture "
            "writes them again only from a folder that still holds those bytes"
        )
    unreadable = len(found) - len(moved)
    if unreadable:
        told.append(
            f"damaged, not lost: Git cannot read the stored bytes of {unreadable} of its "
            f"objects, which {maka_command('doctor')} names"
        )
    return "; ".join(told), bool(moved)
