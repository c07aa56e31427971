"""Durable continuation claims and the admission transaction (docs/design/recovery.md
section 6, step 2).

``continuation_claims`` (schema version 2) holds one row per admitted continuation, unique per
boundary digest, per source run + high-water, per target run and per start event. Admission is
one ``BEGIN IMMEDIATE`` that re-checks the source's latest head, inserts the claim, creates the
target run header and commits the target's first event, the ``continuationStart`` fact. There is
no state in which a claim exists without its target and start (so no repair saga): two racers
serialise on the write lock and the loser gets ``continuation_claim_conflict``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from runtime.ledger.attestation import attestation_suffix_ok
from runtime.ledger.codes import ParkReason, RevalidationCode, WriterRejectionCode
from runtime.ledger.continuation_ports import ContinuationClaim
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.store_ports import RunHeader, RunStatus, StoreRefusal
from storage.ledger import run_header_store as headers
from storage.ledger.event_writer import LedgerTransaction, prepare_candidate
from storage.ledger.workspace_fact_writer import check_workspace_fact, commit_workspace_fact
from storage.sessions.session_admin import relocate_session

_COLUMNS = (
    "claim_id, session_id, boundary_digest, source_run_id, source_high_water, "
    "source_prefix_digest, source_terminal_event_id, target_run_id, start_event_id, "
    "provider_replay_digest, automatic, created_at"
)


def _claim(row: Sequence[Any] | None) -> ContinuationClaim | None:
    if row is None:
        return None
    return ContinuationClaim(
        claim_id=str(row[0]),
        session_id=str(row[1]),
        boundary_digest=str(row[2]),
        source_run_id=str(row[3]),
        source_high_water=int(row[4]),
        source_prefix_digest=str(row[5]),
        source_terminal_event_id=str(row[6]),
        target_run_id=str(row[7]),
        start_event_id=str(row[8]),
        provider_replay_digest=str(row[9]),
        automatic=bool(row[10]),
        created_at=int(row[11]),
    )


def find_by_boundary(conn: sqlite3.Connection, boundary_digest: str) -> ContinuationClaim | None:
    return _claim(
        conn.execute(
            f"SELECT {_COLUMNS} FROM continuation_claims WHERE boundary_digest = ?",
            (boundary_digest,),
        ).fetchone()
    )


def find_by_target(conn: sqlite3.Connection, target_run_id: str) -> ContinuationClaim | None:
    return _claim(
        conn.execute(
            f"SELECT {_COLUMNS} FROM continuation_claims WHERE target_run_id = ?",
            (target_run_id,),
        ).fetchone()
    )


def find_by_source(
    conn: sqlite3.Connection, source_run_id: str, source_high_water: int
) -> ContinuationClaim | None:
    return _claim(
        conn.execute(
            f"SELECT {_COLUMNS} FROM continuation_claims"
            " WHERE source_run_id = ? AND source_high_water = ?",
            (source_run_id, source_high_water),
        ).fetchone()
    )


_START_KEYS = frozenset(
    {"continuationStart", "runtimeProtocol", "workspaceBaseline", "workspaceTransition"}
)


def _check_workspace(source: RunHeader, target: RunHeader, event: RuntimeEvent) -> bool:
    """A continuation runs in its source's workspace, or in another one only when the start
    event's ``workspaceTransition`` names exactly that change (docs/design/workspace.md section 4).
    Returns whether the session moves to the transition's folder."""
    transition = (event.get("actions") or {}).get("workspaceTransition")
    if transition is None:
        # (a source from before workspace identities names none: nothing to hold it to)
        if source.workspace_identity and target.workspace_identity != source.workspace_identity:
            raise StoreRefusal(
                WriterRejectionCode.IDENTITY_CONFLICT,
                "a continuation in another workspace needs a workspace transition",
                event["id"],
            )
        return False
    if (
        transition["fromIdentity"] != source.workspace_identity
        or transition["toIdentity"] != target.workspace_identity
        or transition["toPath"] != target.cwd
        or transition["toIdentity"] == transition["fromIdentity"]
    ):
        raise StoreRefusal(
            WriterRejectionCode.TRANSITION_SHAPE_CONFLICT,
            "the workspace transition does not match the source and target runs",
            event["id"],
        )
    return True


def _check_start_event(claim: ContinuationClaim, header: RunHeader, event: RuntimeEvent) -> None:
    actions = event.get("actions") or {}
    start = actions.get("continuationStart")
    if (
        start is None
        or set(actions) - _START_KEYS
        or event.get("content") is not None
        or event.get("status") is not None
        or event["role"] != "system"
        or event["author"] != "system"
        or event["id"] != claim.start_event_id
        or start["claimId"] != claim.claim_id
        or start["boundaryDigest"] != claim.boundary_digest
        or start["providerReplayDigest"] != claim.provider_replay_digest
        or start["immediateSource"]["runId"] != claim.source_run_id
        or start["immediateSource"]["highWater"] != claim.source_high_water
        or start["immediateSource"]["prefixDigest"] != claim.source_prefix_digest
        or (event["sessionId"], event["invocationId"], event["runId"], event["turnId"])
        != (header.session_id, header.invocation_id, header.run_id, header.turn_id)
    ):
        raise StoreRefusal(
            WriterRejectionCode.TRANSITION_SHAPE_CONFLICT,
            "the continuation start does not match its claim and target run",
            event["id"],
        )


def admit(
    tx: LedgerTransaction,
    claim: ContinuationClaim,
    target: RunHeader,
    start_event: RuntimeEvent,
    facts: Sequence[RuntimeEvent] = (),
) -> None:
    """The admission transaction's body (the caller opened ``BEGIN IMMEDIATE``); ``facts``:
    workspace facts of the target run committed right after its start event, through the
    workspace-fact writer's checks."""
    candidate = prepare_candidate(start_event)
    _check_start_event(claim, target, candidate.event)
    conn = tx.conn
    source = headers.read_header(conn, claim.source_run_id)
    if source is None or source.session_id != claim.session_id:
        raise StoreRefusal(RevalidationCode.SOURCE_IDENTITY_CHANGED, "the source run is gone")
    head = conn.execute(
        "SELECT event_seq, event_id, terminal FROM runtime_events WHERE invocation_id = ?"
        " ORDER BY event_seq DESC LIMIT 1",
        (source.invocation_id,),
    ).fetchone()
    if head is None or int(head[0]) != claim.source_high_water:
        raise StoreRefusal(
            RevalidationCode.SOURCE_HIGH_WATER_CHANGED, "the source run's history changed"
        )
    if not _ends_at_terminal(conn, source.invocation_id, claim.source_terminal_event_id):
        raise StoreRefusal(
            RevalidationCode.SOURCE_TERMINAL_CHANGED, "the source run no longer ends there"
        )
    clash = conn.execute(
        "SELECT claim_id FROM continuation_claims WHERE boundary_digest = ?"
        " OR (source_run_id = ? AND source_high_water = ?) OR target_run_id = ?"
        " OR start_event_id = ? OR claim_id = ?",
        (
            claim.boundary_digest,
            claim.source_run_id,
            claim.source_high_water,
            claim.target_run_id,
            claim.start_event_id,
            claim.claim_id,
        ),
    ).fetchone()
    if clash is not None:
        raise StoreRefusal(
            ParkReason.CONTINUATION_CLAIM_CONFLICT,
            f"another resume claimed this point first (claim {clash[0]})",
        )
    if headers.read_header(conn, target.run_id) is not None:
        raise StoreRefusal(RevalidationCode.TARGET_RUN_CONFLICT, "the target run already exists")
    if target.status is not RunStatus.CREATED or target.parent_run_id != claim.source_run_id:
        raise StoreRefusal(
            WriterRejectionCode.IDENTITY_CONFLICT, "a continuation target starts as created"
        )
    moves = _check_workspace(source, target, candidate.event)
    headers.insert_header(conn, target)
    if moves:  # the session lives in the restored copy from now on
        relocate_session(conn, claim.session_id, target.cwd)
    state = tx.run(target.run_id)
    tx.check_spine(state, [candidate])
    if state.next_seq != 1:
        raise StoreRefusal(
            WriterRejectionCode.TRANSITION_SHAPE_CONFLICT, "the start must be the first event"
        )
    tx.insert(state, candidate)
    for fact in facts:
        written = prepare_candidate(fact)
        check_workspace_fact(written)
        commit_workspace_fact(tx, written)
    conn.execute(
        f"INSERT INTO continuation_claims ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            claim.claim_id,
            claim.session_id,
            claim.boundary_digest,
            claim.source_run_id,
            claim.source_high_water,
            claim.source_prefix_digest,
            claim.source_terminal_event_id,
            claim.target_run_id,
            claim.start_event_id,
            claim.provider_replay_digest,
            int(claim.automatic),
            claim.created_at,
        ),
    )


def _ends_at_terminal(conn: sqlite3.Connection, invocation_id: str, terminal_event_id: str) -> bool:
    """The run's ledger ends with that terminal event, or with it and the user's attestations
    recorded after it (docs/design/recovery.md section 8)."""
    row = conn.execute(
        "SELECT event_seq, event_id FROM runtime_events WHERE invocation_id = ? AND terminal = 1",
        (invocation_id,),
    ).fetchall()
    if len(row) != 1 or str(row[0][1]) != terminal_event_id:
        return False
    after = conn.execute(
        "SELECT payload FROM runtime_events WHERE invocation_id = ? AND event_seq > ?"
        " ORDER BY event_seq",
        (invocation_id, int(row[0][0])),
    ).fetchall()
    return attestation_suffix_ok([json.loads(payload[0]) for payload in after])
