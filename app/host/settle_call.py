"""The desktop's "It ran" / "It did not run" (docs/design/recovery.md section 8), on a
worker thread.

The renderer names a session, a call and the user's answer; everything else is decided here from
committed facts: ``runtime.recovery.settlement.settle`` finds the operation and the store records
the attestation in one transaction or refuses with a code (the call is not unknown, it belongs
to the run of this start of Maka, it is a file write, a process of it still runs...). Afterwards
the call's card is re-projected from the ledger (it now reads "Confirmed by you") and Safe resume
is planned, without executing, so the banner can offer it again when nothing else parks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from app.bridge_contract import (
    MAX_SETTLED_PATHS,
    MAX_SUMMARY_CHARS,
    AttestationChoice,
    SettledFolder,
    Settlement,
    TranscriptItem,
)
from app.host.host_services import HostServiceError, ResumeParked, SettleResult
from app.host.transcript_items import wire_item
from runtime.agent.transcript_projection import TranscriptEntry, transcript_of_run
from runtime.continuation.continuation_planner import ContinuationPlan
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import LedgerReader, RunHeader
from runtime.recovery.settlement import BaselineCapture, SettlementStore, settle
from runtime.tools.process_tree import BackgroundShellRegistry

PlanLatest = Callable[[str], ContinuationPlan]
Parked = Callable[[ContinuationPlan], ResumeParked]


def settleable_in(entries: list[TranscriptEntry], header: RunHeader, epoch: int) -> None:
    """Offer the choice only for a run an earlier start of the host began (``header`` older
    than the current owner ``epoch``): a call of the live host may still be running."""
    if header.owner_epoch >= epoch:
        for index, entry in enumerate(entries):
            if entry.settleable:
                entries[index] = replace(entry, settleable=False)


class SettleCallStore(SettlementStore, LedgerReader, Protocol):
    """What settling a call from a host needs of the store (the narrow port it declares): the
    settlement's writer, the run's events for its card, and the owner epoch."""

    def read_owner_epoch(self) -> int: ...


def card_of(
    store: LedgerReader, run_id: str, tool_call_id: str, epoch: int
) -> TranscriptItem | None:
    header = store.read_run_header(run_id)
    if header is None:
        return None
    entries = transcript_of_run([row.event for row in store.read_run_events(run_id)])
    settleable_in(entries, header, epoch)
    for entry in entries:
        if entry.type == "tool_card" and entry.tool_call_id == tool_call_id:
            return wire_item(entry)
    return None


def settle_call(  # noqa: PLR0917 (the user's answer, and the host's pieces)
    store: SettleCallStore,
    shells: BackgroundShellRegistry,
    plan_latest: PlanLatest,
    parked: Parked,
    session_id: str,
    tool_call_id: str,
    ran: bool,
    note: str | None,
    baseline: BaselineCapture | None = None,
) -> SettleResult:
    """``baseline``: for a writing call, the capture of the folder the answer records as the new
    starting point (docs/design/workspace.md section 3)."""
    try:
        settled = settle(
            store,
            session_id,
            tool_call_id,
            ran=ran,
            note=note,
            shells=shells,
            baseline=baseline,
        )
    except LedgerError as refusal:
        raise HostServiceError(refusal.code, refusal.message) from None
    card = card_of(store, settled.run_id, settled.tool_call_id, store.read_owner_epoch())
    plan = plan_latest(session_id)
    settlement = Settlement(
        operation_id=settled.operation_id,
        tool_call_id=settled.tool_call_id,
        tool_name=settled.tool_name,
        run_id=settled.run_id,
        attestation=AttestationChoice.RAN if settled.ran else AttestationChoice.NOT_RUN,
        attested_at=settled.attested_at,
        created=settled.created,
        note=settled.note,
        workspace=_settled_folder(settled.to_json().get("workspace")),
    )
    if plan.continues:
        return SettleResult(card, None, settlement)
    reasons = tuple(str(reason) for reason in plan.rejection_reasons)
    return SettleResult(card, parked(plan), settlement, reasons)


def _settled_folder(found: object) -> SettledFolder | None:
    """``Settled.to_json``'s ``workspace`` on the wire (its paths bounded, their count kept)."""
    if not isinstance(found, dict):
        return None
    paths = found.get("changedPaths")
    listed = [str(path) for path in paths if str(path)] if isinstance(paths, list) else None
    return SettledFolder(
        baseline_recorded=bool(found.get("baselineRecorded")),
        changed_paths=tuple(listed[:MAX_SETTLED_PATHS]) if listed is not None else None,
        changed_count=len(listed) if listed is not None else None,
        problem=str(found["problem"])[:MAX_SUMMARY_CHARS] if found.get("problem") else None,
    )
