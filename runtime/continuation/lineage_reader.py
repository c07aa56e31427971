"""Reading a continuation lineage: the immediate source and every earlier generation.

A continuation run's header names its source (``continuationSource``) and its first event is the
``continuationStart`` fact; both must agree, the ancestor's committed prefix must still hash to the
recorded digest, the recorded replay must rebuild identically, and a durable claim must exist for
the edge. Any break parks with a lineage code; up to 64 segments (the source included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.continuation.continuation_replay import (
    ImmutablePrefix,
    ReplayPlan,
    RunIdentity,
    build_replay_plan,
)
from runtime.ledger.canonical_codec import prefix_digest
from runtime.ledger.codes import ParkReason
from runtime.ledger.continuation_ports import ContinuationClaimReader
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunHeader, StoredEvent

MAX_LINEAGE_SEGMENTS = 64
CONTINUATION_SOURCE_V2 = "continuation_source_v2"


class LineageStore(ContinuationClaimReader, Protocol):
    def read_run_header(self, run_id: str) -> RunHeader | None: ...

    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]: ...


@dataclass(frozen=True, slots=True)
class Lineage:
    """Prefixes oldest first; ``headers`` in the same order (the source last)."""

    prefixes: tuple[ImmutablePrefix, ...]
    headers: tuple[RunHeader, ...]


@dataclass(frozen=True, slots=True)
class LineageError:
    code: ParkReason
    message: str
    run_id: str


def build_prefix(
    header: RunHeader, rows: Sequence[StoredEvent], up_to: int | None
) -> ImmutablePrefix:
    """An immutable prefix from stored rows; raises ``ValueError`` when it is not one."""
    chosen = [row for row in rows if up_to is None or row.seq <= up_to]
    if up_to is not None and (not chosen or chosen[-1].seq != up_to):
        raise ValueError(f"run {header.run_id} has no event at high-water {up_to}")
    identity = RunIdentity(header.session_id, header.invocation_id, header.run_id, header.turn_id)
    for row in chosen:
        event = row.event
        if event["partial"]:
            raise ValueError(f"run {header.run_id} holds a partial event {event['id']}")
    digest = prefix_digest(identity.to_json(), ((row.seq, row.payload) for row in chosen))
    return ImmutablePrefix(
        identity=identity,
        events=tuple(row.event for row in chosen),
        last_event_seq=chosen[-1].seq if chosen else 0,
        prefix_digest=digest,
    )


def _v2_source(header: RunHeader) -> Mapping[str, Any] | None:
    source = header.continuation_source
    if source is not None and source.get("protocol") == CONTINUATION_SOURCE_V2:
        return source
    return None


def _start_fact(prefix: ImmutablePrefix) -> Mapping[str, Any] | None:
    if not prefix.events:
        return None
    actions = prefix.events[0].get("actions")
    if actions is None:
        return None
    start = actions.get("continuationStart")
    return dict(start) if start is not None else None


def _start_matches(start: Mapping[str, Any], source: Mapping[str, Any], session_id: str) -> bool:
    immediate = start.get("immediateSource", {})
    return (
        start.get("claimId") == source.get("claimId")
        and start.get("boundaryDigest") == source.get("boundaryDigest")
        and start.get("replayManifestDigest") == source.get("boundaryDigest")
        and start.get("providerReplayDigest") == source.get("providerReplayDigest")
        and immediate.get("sessionId") == session_id
        and immediate.get("invocationId") == source.get("sourceInvocationId")
        and immediate.get("runId") == source.get("sourceRunId")
        and immediate.get("turnId") == source.get("sourceTurnId")
        and immediate.get("highWater") == source.get("sourceRuntimeEventHighWater")
        and immediate.get("prefixDigest") == source.get("sourcePrefixDigest")
    )


def read_lineage(store: LineageStore, source: RunHeader) -> Lineage | LineageError:
    """Walk from ``source`` to the lineage root, verifying every edge."""
    try:
        source_prefix = build_prefix(source, store.read_run_events(source.run_id), None)
    except (ValueError, LedgerError) as error:
        return LineageError(ParkReason.RUNTIME_LEDGER_UNREADABLE, str(error), source.run_id)
    prefixes = [source_prefix]
    headers = [source]
    edges: list[tuple[int, Mapping[str, Any]]] = []  # (child index from the end, v2 source)
    seen = {source.run_id}
    child, child_prefix = source, source_prefix
    while True:
        start = _start_fact(child_prefix)
        v2 = _v2_source(child)
        if start is not None and v2 is None:
            return LineageError(
                ParkReason.RUNTIME_LINEAGE_START_MISMATCH,
                "a continuation start has no matching continuation source",
                child.run_id,
            )
        if v2 is not None:
            if start is None or not _start_matches(start, v2, child.session_id):
                return LineageError(
                    ParkReason.RUNTIME_LINEAGE_START_MISMATCH,
                    "the continuation start does not match the run's recorded source",
                    child.run_id,
                )
            edges.append((len(prefixes) - 1, v2))
        if v2 is None:
            break
        ancestor_id = str(v2.get("sourceRunId", ""))
        if ancestor_id in seen:
            return LineageError(ParkReason.RUNTIME_LINEAGE_CYCLE, "the lineage loops", ancestor_id)
        if len(prefixes) >= MAX_LINEAGE_SEGMENTS:
            return LineageError(
                ParkReason.RUNTIME_LINEAGE_DEPTH_EXCEEDED,
                f"the lineage is longer than {MAX_LINEAGE_SEGMENTS} generations",
                ancestor_id,
            )
        seen.add(ancestor_id)
        high_water = v2.get("sourceRuntimeEventHighWater")
        try:
            ancestor = store.read_run_header(ancestor_id)
            if ancestor is None or not isinstance(high_water, int):
                raise ValueError(f"ancestor run {ancestor_id} is missing")
            ancestor_prefix = build_prefix(ancestor, store.read_run_events(ancestor_id), high_water)
        except (ValueError, LedgerError) as error:
            return LineageError(ParkReason.RUNTIME_LINEAGE_MISSING, str(error), ancestor_id)
        identity = ancestor_prefix.identity
        if (
            identity.session_id != child.session_id
            or identity.invocation_id != v2.get("sourceInvocationId")
            or identity.turn_id != v2.get("sourceTurnId")
        ):
            return LineageError(
                ParkReason.RUNTIME_IDENTITY_MISMATCH,
                "an ancestor's identity differs from the recorded source",
                ancestor_id,
            )
        if ancestor_prefix.prefix_digest != v2.get("sourcePrefixDigest"):
            return LineageError(
                ParkReason.SOURCE_PREFIX_DIGEST_MISMATCH,
                "an earlier generation's committed history changed",
                ancestor_id,
            )
        prefixes.append(ancestor_prefix)
        headers.append(ancestor)
        child, child_prefix = ancestor, ancestor_prefix
    prefixes.reverse()
    headers.reverse()
    total = len(prefixes)
    for child_from_end, v2 in edges:
        child_index = total - 1 - child_from_end
        problem = _check_edge(store, prefixes, headers, child_index, v2)
        if problem is not None:
            return problem
    return Lineage(tuple(prefixes), tuple(headers))


def _check_edge(
    store: LineageStore,
    prefixes: list[ImmutablePrefix],
    headers: list[RunHeader],
    child_index: int,
    v2: Mapping[str, Any],
) -> LineageError | None:
    child = headers[child_index]
    if child_index == 0:
        return LineageError(
            ParkReason.RUNTIME_LINEAGE_MISSING, "edge without ancestor", child.run_id
        )
    rebuilt = build_replay_plan(tuple(prefixes[:child_index]))
    if (
        not isinstance(rebuilt, ReplayPlan)
        or rebuilt.manifest_digest != v2.get("boundaryDigest")
        or rebuilt.provider_replay_digest != v2.get("providerReplayDigest")
    ):
        return LineageError(
            ParkReason.RUNTIME_LINEAGE_REPLAY_MISMATCH,
            "an earlier generation's replay no longer rebuilds identically",
            child.run_id,
        )
    try:
        claim = store.find_claim_by_target(child.run_id)
    except LedgerError as error:
        return LineageError(ParkReason.CONTINUATION_AUTHORITY_UNAVAILABLE, str(error), child.run_id)
    first_event_id = prefixes[child_index].events[0]["id"] if prefixes[child_index].events else ""
    if (
        claim is None
        or claim.claim_id != v2.get("claimId")
        or claim.boundary_digest != v2.get("boundaryDigest")
        or claim.start_event_id != first_event_id
        or claim.source_run_id != v2.get("sourceRunId")
    ):
        return LineageError(
            ParkReason.RUNTIME_LINEAGE_CLAIM_MISMATCH,
            "a continuation in the lineage has no matching durable claim",
            child.run_id,
        )
    return None
