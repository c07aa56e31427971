"""The ``branchStart`` fact: a new session that continues from a committed boundary of another
session's history, with a restored copy of the folder as it was there.

The fact is stored once, in the transaction that creates the new session
(``storage/ledger/schema_v5.py``), as canonical JSON bytes; ``BranchRecord`` is its parsed form.
The codec is imported where it is used: ``maka sessions`` reads branches and stays small.
The history it refers to is never copied: ``source`` names the run, the high-water mark of the
boundary event and the digest of that run's committed prefix (the same digest a continuation
records), and ``boundaryDigest`` / ``providerReplayDigest`` pin what the model is shown.

Body (``protocol: "branch_start_v1"``)::

    {sessionId, source: {sessionId, invocationId, runId, turnId, highWater, prefixDigest,
     boundaryEventId}, boundaryDigest, providerReplayDigest,
     snapshot: {checkpointRef, commitId, treeId, workspaceIdentity} | absent,
     currentFiles: bool, workspacePath, workspaceIdentity, workspaceEpoch,
     decidedBy: "local_user", decidedAt}
"""

# No ``from __future__ import annotations`` here: the named tuples below must read real types
# (see ``runtime/ledger/run_records.py``; ``maka sessions`` start-up).

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

BRANCH_START_V1 = "branch_start_v1"


class BranchRecord(NamedTuple):
    """A branched session's ``branchStart`` fact and where it points (a named tuple: listing
    sessions reads these and imports no dataclass machinery)."""

    session_id: str
    source_session_id: str
    source_run_id: str
    source_high_water: int
    boundary_event_id: str
    source_prefix_digest: str
    fact: Mapping[str, Any]
    created_at: int

    @property
    def fact_bytes(self) -> bytes:
        from runtime.ledger.canonical_codec import canonical_json_bytes

        return canonical_json_bytes(dict(self.fact))

    @property
    def fact_digest(self) -> str:
        from runtime.ledger.canonical_codec import sha256_digest

        return sha256_digest(b"maka.branch-start.v1\x00" + self.fact_bytes)

    @property
    def current_files(self) -> bool:
        return bool(self.fact.get("currentFiles"))

    @property
    def snapshot_ref(self) -> tuple[str, str] | None:
        """The snapshot the branch's folder was copied from, as (its workspace's identity, its
        checkpoint ref), or None when the fact names none: retention keeps it and the doctor
        counts it as named."""
        snapshot = self.fact.get("snapshot")
        if not isinstance(snapshot, Mapping) or not snapshot.get("checkpointRef"):
            return None
        return str(snapshot.get("workspaceIdentity") or ""), str(snapshot["checkpointRef"])

    @property
    def workspace_path(self) -> str:
        return str(self.fact.get("workspacePath", ""))

    def to_json(self) -> dict[str, Any]:
        """What a surface shows of the branch (``maka sessions --json``, the desktop)."""
        body: dict[str, Any] = {
            "sourceSessionId": self.source_session_id,
            "sourceRunId": self.source_run_id,
            "boundaryEventId": self.boundary_event_id,
            "highWater": self.source_high_water,
            "prefixDigest": self.source_prefix_digest,
            "currentFiles": self.current_files,
            "workspacePath": self.workspace_path,
            "createdAt": self.created_at,
        }
        snapshot = self.fact.get("snapshot")
        if isinstance(snapshot, Mapping):
            body["checkpointRef"] = str(snapshot.get("checkpointRef", ""))
        return body


def branch_record(fact: Mapping[str, Any], created_at: int) -> BranchRecord:
    """The record of a well-formed fact body; raises ``ValueError`` otherwise."""
    if fact.get("protocol") != BRANCH_START_V1:
        raise ValueError("not a branch_start_v1 fact")
    source = fact.get("source")
    if not isinstance(source, Mapping):
        raise ValueError("a branchStart fact names its source")
    high_water = source.get("highWater")
    fields = (
        fact.get("sessionId"),
        source.get("sessionId"),
        source.get("runId"),
        source.get("boundaryEventId"),
        source.get("prefixDigest"),
    )
    if not all(isinstance(f, str) and f for f in fields) or not isinstance(high_water, int):
        raise ValueError("a branchStart fact names its session, source run, boundary and digest")
    if high_water <= 0 or fact.get("sessionId") == source.get("sessionId"):
        raise ValueError("a branchStart fact's boundary is an event of another session")
    return BranchRecord(
        session_id=str(fact["sessionId"]),
        source_session_id=str(source["sessionId"]),
        source_run_id=str(source["runId"]),
        source_high_water=high_water,
        boundary_event_id=str(source["boundaryEventId"]),
        source_prefix_digest=str(source["prefixDigest"]),
        fact=dict(fact),
        created_at=created_at,
    )


def record_from_bytes(payload: bytes, created_at: int) -> BranchRecord:
    """The record of stored fact bytes; raises ``ValueError`` when they are not canonical."""
    import json

    from runtime.ledger.canonical_codec import canonical_json_bytes

    body = json.loads(payload)
    if not isinstance(body, dict) or canonical_json_bytes(body) != payload:
        raise ValueError("a stored branchStart fact is not canonical JSON")
    return branch_record(body, created_at)


@runtime_checkable
class BranchListing(Protocol):
    """A reader that knows the branched sessions (a store of schema version 5 or later)."""

    def list_branches(self) -> Sequence[BranchRecord]: ...
