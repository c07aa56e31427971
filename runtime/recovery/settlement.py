"""Settling an unknown outcome on the user's word (docs/design/recovery.md section 8).

One seam for every surface: ``maka settle``, ``/settle`` in the TUI and the desktop card's "It
ran" / "It did not run" all call ``settle``. It names the operation (by operation id or by the
tool call id ``maka plan`` shows), asks the store to record the attestation in one transaction,
and reports what was recorded. Refusals are the store's coded ``StoreRefusal`` s; whether the
committed facts let the user settle the call at all is ``settle_verdict.judge_settlement``, which
the store asks inside that transaction (the same decision the transcript and ``maka plan`` use).

Processes (section 9): an attestation waits until no process of the call is recorded alive.
``surviving_process_check`` is the one function that decides it: the host's per-call process
table (pid, create time, boot id; ``runtime.tools.process_identity.surviving_process``, asked
inside the store's write transaction) and the background shells the interrupted run started.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from runtime.ledger.attestation import SettleJudge, note_code, note_problem
from runtime.ledger.codes import StoreCode
from runtime.ledger.command_words import maka_command
from runtime.ledger.process_records import ToolProcessTable
from runtime.ledger.store_ports import AttestationCommit, StoreRefusal, ToolOperationRecord
from runtime.recovery.settle_verdict import judge_settlement

if TYPE_CHECKING:
    from runtime.ledger.checkpoint_ports import SettleBaseline
    from runtime.tools.process_tree import BackgroundShellRegistry

SurvivingProcess = Callable[[str], str | None]
UNSETTLED_STATES = frozenset({"prepared", "recovery_parked"})
"""The projection states of a call an answer may still settle (the verdict decides)."""
BaselineCapture = Callable[[ToolOperationRecord, bool], "SettleBaseline | None"]
"""Given the operation and the answer (it ran), the capture of the folder as the new baseline
(docs/design/workspace.md section 3), or None when settling it records none."""


class SettlementStore(ToolProcessTable, Protocol):
    def find_session_operations(self, session_id: str) -> Sequence[ToolOperationRecord]: ...

    def commit_attestation(  # noqa: PLR0917 (what the user said, and the host facts)
        self,
        operation_id: str,
        ran: bool,
        note: str | None,
        surviving_process: SurvivingProcess,
        judge: SettleJudge,
        baseline: dict[str, object] | None = None,
    ) -> AttestationCommit: ...


@dataclass(frozen=True, slots=True)
class Settled:
    operation_id: str
    tool_call_id: str
    tool_name: str
    run_id: str
    ran: bool
    note: str | None
    attested_at: int
    created: bool
    baseline: SettleBaseline | None = None

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "operationId": self.operation_id,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "runId": self.run_id,
            "attestation": "ran" if self.ran else "not_run",
            "attestedAt": self.attested_at,
            "created": self.created,
        }
        if self.note is not None:
            body["note"] = self.note
        if self.baseline is not None:
            recorded = self.baseline.body is not None and self.created
            folder: dict[str, object] = {"baselineRecorded": recorded}
            if self.baseline.changes is not None:
                folder["changedPaths"] = self.baseline.changed_paths()
            if self.baseline.problem is not None:
                folder["problem"] = self.baseline.problem
            body["workspace"] = folder
        return body


def find_operation(store: SettlementStore, session_id: str, reference: str) -> ToolOperationRecord:
    """The session's operation named by its operation id, else by its tool call id (the latest
    unsettled one when a call id repeats across runs)."""
    operations = list(store.find_session_operations(session_id))
    for operation in operations:
        if operation.operation_id == reference:
            return operation
    named = [op for op in operations if op.provider_tool_call_id == reference]
    if len(named) > 1:
        named = [op for op in named if op.current_state == "prepared"] or named
    if len(named) == 1:
        return named[0]
    if not named:
        raise StoreRefusal(
            StoreCode.OPERATION_NOT_FOUND,
            f"session {session_id} has no tool call {reference} "
            f"(see {maka_command(f'plan {session_id}')})",
        )
    raise StoreRefusal(
        StoreCode.OPERATION_NOT_FOUND,
        f"tool call id {reference} names several calls; give the operation id instead",
    )


def surviving_process_check(
    table: ToolProcessTable,
    shells: BackgroundShellRegistry | None,
    session_id: str,
    run_id: str,
) -> SurvivingProcess:
    """Whether a process of the call is still recorded alive: the call's own process (the host
    table), or a background shell its run started (same pid and create time). A process that
    survives may still be changing things, so the user's word about it waits."""
    from runtime.tools.process_identity import surviving_process

    of_call = surviving_process(table)

    def check(operation_id: str) -> str | None:
        found = of_call(operation_id)
        if found is not None or shells is None:
            return found
        alive = [shell for shell in shells.live_shells(session_id) if shell.run_id == run_id]
        if not alive:
            return None
        first = alive[0]
        return f"pid {first.pid}: {first.command}"

    return check


def settle(
    store: SettlementStore,
    session_id: str,
    reference: str,
    *,
    ran: bool,
    note: str | None,
    shells: BackgroundShellRegistry | None,
    baseline: BaselineCapture | None = None,
) -> Settled:
    """Record the user's attestation; ``StoreRefusal`` with a code when it may not be.
    ``baseline``: for a writing call, the capture of the folder that the same transaction
    records as the new baseline (docs/design/workspace.md section 3)."""
    operation = find_operation(store, session_id, reference)
    problem = note_problem(note)
    if problem is not None:
        # Refused before the folder is captured: a refused answer leaves no snapshot behind.
        raise StoreRefusal(note_code(note), problem)
    surviving = surviving_process_check(store, shells, session_id, operation.run_id)
    # Only for a call no answer settled yet: a repeated answer is a no-op and captures nothing.
    unsettled = operation.current_state in UNSETTLED_STATES
    captured = baseline(operation, ran) if baseline is not None and unsettled else None
    result = store.commit_attestation(
        operation.operation_id,
        ran,
        note,
        surviving,
        judge_settlement,
        captured.body if captured is not None else None,
    )
    return Settled(
        operation.operation_id,
        operation.provider_tool_call_id,
        operation.tool_name,
        operation.run_id,
        ran,
        note,
        result.attested_at,
        result.created,
        captured,
    )
