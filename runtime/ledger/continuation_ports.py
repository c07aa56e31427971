"""Ports of the continuation authority: durable claims and the admission transaction.

A claim records that one interrupted boundary (a run's committed prefix, pinned by digest) was
resumed as exactly one new run. The store keeps claims unique per boundary digest, per source run
+ high-water, per target run and per start event, and commits claim, target header and the
target's first event (the ``continuationStart`` fact) in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from runtime.ledger.store_ports import RunHeader

if TYPE_CHECKING:  # the pydantic event model is not needed to name the type
    from runtime.ledger.event_model import RuntimeEvent


@dataclass(frozen=True, slots=True)
class ContinuationClaim:
    claim_id: str
    session_id: str
    boundary_digest: str
    source_run_id: str
    source_high_water: int
    source_prefix_digest: str
    source_terminal_event_id: str
    target_run_id: str
    start_event_id: str
    provider_replay_digest: str
    automatic: bool
    created_at: int


class ContinuationClaimReader(Protocol):
    def find_claim_by_boundary(self, boundary_digest: str) -> ContinuationClaim | None: ...

    def find_claim_by_target(self, target_run_id: str) -> ContinuationClaim | None: ...

    def find_claim_by_source(
        self, source_run_id: str, source_high_water: int
    ) -> ContinuationClaim | None: ...


class ContinuationAdmissionWriter(Protocol):
    def admit_continuation(
        self,
        claim: ContinuationClaim,
        target_header: RunHeader,
        start_event: RuntimeEvent,
        *,
        facts: Sequence[RuntimeEvent] = (),
    ) -> None:
        """One ``BEGIN IMMEDIATE``: re-check that the source run's latest head is
        ``claim.source_high_water`` and ends with ``claim.source_terminal_event_id`` (else a
        ``StoreRefusal`` with ``source_high_water_changed`` / ``source_terminal_changed``); insert
        the claim (a uniqueness clash is ``continuation_claim_conflict``); create the target header
        (an existing run id is ``target_run_conflict``); commit ``start_event`` as the target's
        event 1 (it must carry ``actions.continuationStart``), then ``facts``, workspace facts of
        the target run, through the workspace-fact writer's checks (a rebaseline whose capture
        was refused for what the folder holds: its failed capture, carrying the decision)."""
        ...
