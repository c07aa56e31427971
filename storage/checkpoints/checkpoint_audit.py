"""Workspace checkpoints held against the ledger's facts (docs/design/workspace.md section 5): what
``maka checkpoints`` lists and ``maka doctor`` checks.

- a **missing artifact**: a ``workspaceCheckpoint`` fact whose commit or tree is gone from the
  workspace's repository (resume at that boundary fails closed: ``workspace_checkpoint_missing``);
- an **orphan**: a checkpoint ref no fact names (a capture killed between its artifact and its
  fact, ``after_checkpoint_artifact``); harmless, removed by retention;
- a **damaged** snapshot: one whose stored bytes a re-hash found not to be what it recorded
  (``verify_snapshots``, ``maka doctor --verify-snapshots``), or one missing objects a check
  moved aside as damaged (``damaged_aside``): damaged, not lost, whole again once a capture of
  a folder still holding those bytes has written them again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime.ledger.branch_facts import BranchListing
from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.quarantined_runs import Quarantined, read_unless_quarantined
from runtime.ledger.store_ports import RunHeader, SessionRecord, StoredEvent
from runtime.ledger.workspace_facts import declared_mode, is_settled_baseline, snapshot_fact
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.checkpoints.checkpoint_verify import DamagedObject


class _Reader(Protocol):
    def list_sessions(self) -> Sequence[SessionRecord]: ...

    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...

    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]: ...


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    session_id: str
    run_id: str
    event_id: str
    ts: int
    kind: str  # "checkpoint" | "failed"
    body: Mapping[str, Any]
    present: bool | None = None  # the Git objects exist (None for a failed capture)
    # A snapshot of the files the user chose to go on with: "rebaseline" (a continuation with
    # the current files) or "settle" (the folder taken with an answer about a call); "" else.
    decision: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runId": self.run_id,
            "eventId": self.event_id,
            "ts": self.ts,
            "kind": self.kind,
        }
        if self.kind == "checkpoint":
            out.update(
                checkpointRef=self.body.get("checkpointRef"),
                commitId=self.body.get("commitId"),
                treeId=self.body.get("treeId"),
                runtimeHighWater=self.body.get("runtimeHighWater"),
                present=self.present,
            )
            if self.body.get("skippedPaths"):
                out["skippedPaths"] = list(self.body["skippedPaths"])
            if self.decision:
                out["decision"] = self.decision
        else:
            out.update(reasonCode=self.body.get("reasonCode"), message=self.body.get("message"))
            if self.body.get("decidedBy"):  # the choice to go on with files it could not take
                out["decision"] = "rebaseline"
        return out


@dataclass(slots=True)
class SessionCheckpoints:
    session_id: str
    modes: dict[str, Mapping[str, Any] | None] = field(default_factory=dict)
    rows: list[CheckpointRow] = field(default_factory=list)
    # Each run's header, by run id: the folder it worked in (its snapshots are of that folder)
    # and the workspace identity its snapshots are kept under.
    headers: dict[str, RunHeader] = field(default_factory=dict)
    # The runs whose record no longer decodes: their snapshots are not listed.
    unreadable: list[str] = field(default_factory=list)


def session_checkpoints(
    reader: _Reader, carrier: GitCheckpointStore, session_id: str
) -> SessionCheckpoints:
    """Every run's declared mode and checkpoint facts, oldest run first, each checkpoint
    checked against the repository."""
    found = SessionCheckpoints(session_id)
    runs = sorted(reader.list_session_runs(session_id), key=lambda r: (r.created_at, r.run_id))
    pending: list[tuple[str, str, str, int, Mapping[str, Any], str]] = []
    for header in runs:
        rows = read_unless_quarantined(reader, header.run_id)
        if isinstance(rows, Quarantined):
            # A run whose record no longer decodes (quarantined; ``maka doctor`` names the
            # event): its snapshots cannot be listed, the session's other runs' can.
            found.unreadable.append(header.run_id)
            continue
        events = [row.event for row in rows]
        found.modes[header.run_id] = declared_mode(events)
        found.headers[header.run_id] = header
        for event in events:
            actions = event.get("actions") or {}
            snapshot = snapshot_fact(actions)
            if snapshot is not None:
                body: Mapping[str, Any] = snapshot
                decision = (
                    ""
                    if "workspaceBaseline" not in actions
                    else "settle"
                    if is_settled_baseline(event)
                    else "rebaseline"
                )
                row = (header.run_id, event["id"], "checkpoint", event["ts"], body, decision)
                pending.append(row)
            elif "workspaceCheckpointFailed" in actions:
                failed: Mapping[str, Any] = actions["workspaceCheckpointFailed"]
                pending.append((header.run_id, event["id"], "failed", event["ts"], failed, ""))
    present: set[tuple[str, str, str]] = set()
    by_workspace: dict[str, list[tuple[str, str]]] = {}
    for _, _, kind, _, body, _ in pending:
        if kind == "checkpoint":
            pair = (str(body["commitId"]), str(body["treeId"]))
            by_workspace.setdefault(str(body["workspaceIdentity"]), []).append(pair)
    for workspace, pairs in by_workspace.items():
        present.update((workspace, *pair) for pair in carrier.present_snapshots(workspace, pairs))
    for run_id, event_id, kind, ts, body, decision in pending:
        exists = None
        if kind == "checkpoint" and carrier.usable:  # without Git, presence is unknown
            key = (str(body["workspaceIdentity"]), str(body["commitId"]), str(body["treeId"]))
            exists = key in present
        row_of = CheckpointRow(session_id, run_id, event_id, ts, kind, body, exists, decision)
        found.rows.append(row_of)
    return found


@dataclass(slots=True)
class CheckpointAudit:
    facts: int = 0
    refs: int = 0
    missing: list[CheckpointRow] = field(default_factory=list)
    # Snapshots retention removed by design (their ref gone, and retention keeps no such ref
    # now): no longer needed by any resume, branch or restore, so not a problem.
    trimmed: list[CheckpointRow] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    # Refs of sessions this ledger does not hold and this data folder did not remove (another
    # database's, or the other engine's): retention keeps them.
    foreign: list[str] = field(default_factory=list)
    unchecked: int = 0  # facts whose objects could not be looked up (no usable git)
    # Snapshots not whole because a check moved damaged objects of theirs aside (not among
    # ``missing``): each with those objects.
    damaged_aside: list[tuple[CheckpointRow, list[DamagedObject]]] = field(default_factory=list)
    # Snapshots retention keeps whose ref is gone (deleted by hand, a damaged ref file) while
    # their objects are still there: retention names each again before it prunes.
    unnamed: list[CheckpointRow] = field(default_factory=list)
    # Those of ``missing`` that a later snapshot of the same session, whole, has superseded
    # (taken after a ``--rebaseline``, a settle or simply a later turn): no resume depends on
    # them any more; only a branch from their own point would, with the current files instead.
    superseded: list[CheckpointRow] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "facts": self.facts,
            "refs": self.refs,
            "unnamed": [{"sessionId": row.session_id, **row.to_json()} for row in self.unnamed],
            "missing": [{"sessionId": row.session_id, **row.to_json()} for row in self.missing],
            "superseded": [row.event_id for row in self.superseded],
            "damagedAside": [
                {"sessionId": row.session_id, **row.to_json(), "objects": objects_json(objects)}
                for row, objects in self.damaged_aside
            ],
            "trimmed": len(self.trimmed),
            "orphans": list(self.orphans),
            "foreignRefs": len(self.foreign),
            "unchecked": self.unchecked,
        }


def audit_checkpoints(reader: _Reader, carrier: GitCheckpointStore) -> CheckpointAudit:
    """Every checkpoint fact against the refs of its workspace's repository."""
    audit = CheckpointAudit()
    named: dict[str, set[str]] = {}
    checked: list[CheckpointRow] = []
    unreadable: set[str] = set()  # runs whose record no longer decodes: their refs are kept
    for session in reader.list_sessions():
        listed_session = session_checkpoints(reader, carrier, session.session_id)
        unreadable.update(listed_session.unreadable)
        for row in listed_session.rows:
            if row.kind != "checkpoint":
                continue
            checked.append(row)
            audit.facts += 1
            workspace = str(row.body["workspaceIdentity"])
            named.setdefault(carrier.git_dir(workspace).name, set()).add(
                str(row.body["checkpointRef"])
            )
            if row.present is None:
                audit.unchecked += 1
            elif not row.present:
                audit.missing.append(row)
    if isinstance(reader, BranchListing):
        # A branch made with the current files names the capture it was copied from (a ref of
        # the source's workspace no snapshot fact names): kept by retention, not an orphan.
        for record in reader.list_branches():
            branch_ref = record.snapshot_ref
            if branch_ref is not None and branch_ref[0]:
                workspace, ref = branch_ref
                named.setdefault(carrier.git_dir(workspace).name, set()).add(ref)
    listed: dict[str, set[str]] = {}
    if carrier.root.is_dir() and carrier.git is not None:
        from storage.checkpoints.checkpoint_retention import ref_session, trimmable_sessions

        sessions = trimmable_sessions(reader, carrier)
        for repository in sorted(carrier.root.glob("*.git")):
            refs = carrier.refs_in(repository)
            listed[repository.name] = set(refs)
            audit.refs += len(refs)
            known = named.get(repository.name, set())
            for ref in sorted(refs):
                if ref in known or _ref_run(ref) in unreadable:
                    continue  # (a quarantined run's: retention keeps it, no orphan)
                kind = audit.orphans if ref_session(ref) in sessions else audit.foreign
                kind.append(f"{repository.name} {ref}")
    trimmed = removed_by_retention(reader, carrier, checked)
    audit.trimmed = [row for row in checked if row.event_id in trimmed]
    audit.missing = [row for row in audit.missing if row.event_id not in trimmed]
    audit.damaged_aside = damaged_aside(carrier, audit.missing)
    aside = {row.event_id for row, _ in audit.damaged_aside}
    audit.missing = [row for row in audit.missing if row.event_id not in aside]
    audit.unnamed = _unnamed(reader, carrier, checked, listed, trimmed)
    latest: dict[str, int] = {}
    for row in checked:
        if row.present:
            latest[row.session_id] = max(latest.get(row.session_id, row.ts), row.ts)
    audit.superseded = [row for row in audit.missing if latest.get(row.session_id, -1) > row.ts]
    return audit


def _ref_run(ref: str) -> str:
    """The run a checkpoint ref names (``refs/maka/<session>/<run>/<n>``), or ""."""
    parts = ref.split("/")
    return parts[3] if len(parts) == 5 and parts[:2] == ["refs", "maka"] else ""


def _unnamed(
    reader: _Reader,
    carrier: GitCheckpointStore,
    rows: Sequence[CheckpointRow],
    listed: Mapping[str, set[str]],
    trimmed: set[str],
) -> list[CheckpointRow]:
    """The present snapshots among ``rows`` whose ref is gone from their repository's
    ``listed`` refs, that retention did not remove and keeps: their objects are whole and
    retention names each again (``checkpoint_retention``) before it prunes."""

    def ref_gone(row: CheckpointRow) -> bool:
        refs = listed.get(carrier.git_dir(str(row.body["workspaceIdentity"])).name)
        return refs is not None and str(row.body.get("checkpointRef")) not in refs

    candidates = [
        row for row in rows if row.present and row.event_id not in trimmed and ref_gone(row)
    ]
    if not candidates:
        return []
    from storage.checkpoints.checkpoint_retention import refs_to_keep

    kept = refs_to_keep(reader)[0]
    return [row for row in candidates if str(row.body.get("checkpointRef")) in kept]


def damaged_aside(
    carrier: GitCheckpointStore, rows: Sequence[CheckpointRow]
) -> list[tuple[CheckpointRow, list[DamagedObject]]]:
    """Those of the snapshots ``rows`` (not whole) that lack objects a check moved aside as
    damaged, each with those objects: damaged, not lost (the next capture of a folder still
    holding those bytes writes them again). Nothing is looked up in a store that never moved
    an object aside; a store Git cannot read leaves its rows missing."""
    by_workspace: dict[str, list[CheckpointRow]] = {}
    for row in rows:
        by_workspace.setdefault(str(row.body["workspaceIdentity"]), []).append(row)
    found: list[tuple[CheckpointRow, list[DamagedObject]]] = []
    for workspace, listed in by_workspace.items():
        try:
            aside = carrier.damaged_aside(workspace, [str(row.body["treeId"]) for row in listed])
        except CheckpointError:
            continue
        found.extend(
            (row, aside[str(row.body["treeId"])])
            for row in listed
            if aside.get(str(row.body["treeId"]))
        )
    return found


def objects_json(objects: Sequence[DamagedObject]) -> list[dict[str, Any]]:
    """Damaged objects as ``maka doctor --json`` lists them."""
    return [
        {
            "objectId": damaged.object_id,
            "path": damaged.path,
            "missing": damaged.missing,
            **({"movedTo": damaged.moved_to} if damaged.moved_to else {}),
            **({"packed": True} if damaged.packed else {}),
        }
        for damaged in objects
    ]


def removed_by_retention(
    reader: _Reader, carrier: GitCheckpointStore, rows: Sequence[CheckpointRow]
) -> set[str]:
    """The events of the snapshots among ``rows`` that retention removed on purpose: their
    ref is gone, and retention here recorded removing it, or (for an absent one taken before
    it kept that record) keeps no such ref now (``checkpoint_retention``); not lost, no longer
    needed. One whose objects wait for the next prune is removed as well."""
    checked = [row for row in rows if row.kind == "checkpoint" and row.present is not None]
    if not checked:
        return set()
    from storage.checkpoints.checkpoint_retention import read_removals, refs_to_keep

    since, logged = read_removals(carrier)
    # On a ledger several hosts share, another host's snapshot is never in this data folder:
    # only what retention here recorded removing is said to be removed. Elsewhere, what it
    # removed before it kept that record is told by its rule of what it keeps.
    shared = carrier.missing_note is not None
    kept: set[str] | None = None
    refs: dict[str, set[str]] = {}
    found: set[str] = set()
    for row in checked:
        workspace = str(row.body["workspaceIdentity"])
        if workspace not in refs:
            refs[workspace] = set(carrier.refs_in(carrier.git_dir(workspace)))
        ref = str(row.body.get("checkpointRef"))
        if ref in refs[workspace]:
            continue
        if (carrier.git_dir(workspace).name, ref) in logged:
            found.add(row.event_id)
            continue
        recorded = since is not None and row.ts >= since  # taken since removals are recorded
        if row.present or shared or recorded:
            continue
        if kept is None:
            kept = refs_to_keep(reader)[0]
        if ref not in kept:
            found.add(row.event_id)
    return found


def snapshot_removed_by_retention(
    reader: _Reader, carrier: GitCheckpointStore, snapshot: Mapping[str, Any], ts: int
) -> bool:
    """Whether retention removed on purpose the snapshot a fact written at ``ts`` names
    (``removed_by_retention`` for one snapshot, such as a branch point's); False when that
    cannot be told."""
    workspace, ref = snapshot.get("workspaceIdentity"), snapshot.get("checkpointRef")
    if not isinstance(workspace, str) or not workspace or not isinstance(ref, str) or not ref:
        return False
    row = CheckpointRow("", "", "snapshot", ts, "checkpoint", snapshot, present=False)
    try:
        return bool(removed_by_retention(reader, carrier, [row]))
    except Exception:  # a wording only: never fail the refusal it words
        return False


@dataclass(slots=True)
class SnapshotVerification:
    verified: int = 0
    # Each damaged snapshot with the objects found damaged under it (as they now stand:
    # moved aside, or packed and left).
    damaged: list[tuple[CheckpointRow, list[DamagedObject]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # The objects this check moved aside, each once, with the store they were moved out of.
    moved: list[tuple[str, DamagedObject]] = field(default_factory=list)


def verify_snapshots(
    reader: _Reader, carrier: GitCheckpointStore, also: Sequence[CheckpointRow] = ()
) -> SnapshotVerification:
    """Every present snapshot's stored bytes re-hashed against its recorded tree, the check a
    restore makes before it writes (``maka doctor --verify-snapshots``), and the snapshots
    ``also`` (not whole because Git cannot read some of their stored bytes). What it finds
    damaged is moved aside and the next capture of the folder writes it again from the
    folder's files (``GitCheckpointStore.verify_snapshots``)."""
    found = SnapshotVerification()
    by_workspace: dict[str, list[CheckpointRow]] = {}
    for session in reader.list_sessions():
        for row in session_checkpoints(reader, carrier, session.session_id).rows:
            if row.kind == "checkpoint" and row.present:
                by_workspace.setdefault(str(row.body["workspaceIdentity"]), []).append(row)
    for row in also:
        by_workspace.setdefault(str(row.body["workspaceIdentity"]), []).append(row)
    for workspace, rows in by_workspace.items():
        try:
            damage = carrier.verify_snapshots(workspace, [str(row.body["treeId"]) for row in rows])
        except CheckpointError as error:
            found.errors.append(f"{error.code}: {error.message}")
            continue
        moved: dict[str, DamagedObject] = {}
        for row in rows:
            objects = damage.get(str(row.body["treeId"]), [])
            found.verified += 1
            if objects:
                found.damaged.append((row, objects))
                for damaged in objects:
                    if damaged.moved_to:  # (a present snapshot's: moved by this check)
                        moved.setdefault(damaged.object_id, damaged)
        store = carrier.git_dir(workspace).name
        found.moved.extend((store, damaged) for damaged in moved.values())
    return found


def damaged_names(objects: Sequence[DamagedObject]) -> str:
    """The paths of damaged objects in words (the first five, then how many more)."""
    names = ", ".join(damaged.path or "its top folder" for damaged in objects[:5])
    return names + (f" and {len(objects) - 5} more" if len(objects) > 5 else "")
