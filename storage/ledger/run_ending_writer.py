"""The run ending: the terminal event and the terminal run header in one transaction.

A header may never claim an ending the ledger does not contain (docs/design/recovery.md section 1,
item 7), so this is the only path that makes a header terminal, and the generic append refuses
terminal events (``reserved_run_ending_fact``). The terminal event must be final (not partial), on
the ordinary lane, carry a terminal ``status`` that maps to the header status (``completed`` ->
completed, ``failed`` -> failed, ``aborted``/``cancelled`` -> cancelled), and, when its
``stateDelta`` names a ``failureClass``, the same failure class as the header.

An exact retry answers ``created=False``; if the event is stored but the header is not terminal
(a ledger written before this rule, or an import), the header is repaired to match the event.
Failpoints: ``run_ending_after_event_insert`` (inside) and ``run_ending_after_commit``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.ledger.codes import StoreCode, WriterRejectionCode
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.lane_rules import check_generic_append
from runtime.ledger.store_ports import (
    EVENT_STATUS_TO_RUN,
    TERMINAL_RUN_STATUSES,
    CommitResult,
    RunStatus,
    StoreRefusal,
)
from storage.ledger.event_writer import Candidate, LedgerTransaction
from storage.ledger.run_header_store import require_header, set_terminal


def _failure_class_of(event: RuntimeEvent) -> object:
    actions: Mapping[str, Any] = event.get("actions") or {}
    delta = actions.get("stateDelta")
    return delta.get("failureClass") if isinstance(delta, Mapping) else None


def check_ending(candidate: Candidate, status: RunStatus, failure_class: str | None) -> None:
    """Pure checks of a run ending, before the transaction."""
    event = candidate.event
    rejection = check_generic_append(event)
    if rejection is not None:
        raise StoreRefusal(rejection.code, rejection.reason, rejection.event_id)
    shape = WriterRejectionCode.TRANSITION_SHAPE_CONFLICT
    if not candidate.terminal or event["partial"]:
        raise StoreRefusal(shape, "a run ending is a final terminal event", candidate.event_id)
    try:
        wanted = RunStatus(status)
    except ValueError:
        raise StoreRefusal(
            StoreCode.RUN_STATUS_CONFLICT, f"unknown run status {status!r}", candidate.event_id
        ) from None
    if wanted not in TERMINAL_RUN_STATUSES:
        raise StoreRefusal(
            StoreCode.RUN_STATUS_CONFLICT,
            f"a run ending needs a terminal status, not {wanted}",
            candidate.event_id,
        )
    event_status = event.get("status")
    if event_status is None or EVENT_STATUS_TO_RUN.get(event_status) is not wanted:
        raise StoreRefusal(
            shape,
            f"terminal event status {event_status!r} cannot end a run as {wanted}",
            candidate.event_id,
        )
    if wanted is RunStatus.COMPLETED and failure_class is not None:
        raise StoreRefusal(shape, "a completed run has no failure class", candidate.event_id)
    named = _failure_class_of(event)
    if named is not None and named != failure_class:
        raise StoreRefusal(
            shape,
            f"the event names failureClass {named!r}, the header {failure_class!r}",
            candidate.event_id,
        )


def commit_ending(
    tx: LedgerTransaction,
    terminal: Candidate,
    status: RunStatus,
    failure_class: str | None,
    *,
    updated_at: int | None = None,
    completed_at: int | None = None,
) -> CommitResult:
    """Commit ``terminal`` and the header ending. ``updated_at``/``completed_at`` default to the
    commit time (an import passes the exported values)."""
    state = tx.run(terminal.event["runId"])
    tx.check_spine(state, [terminal])
    new, retried = tx.split_retries([terminal])
    header = require_header(tx.conn, state.run_id)
    stamp_updated = updated_at if updated_at is not None else tx.committed_at
    stamp_completed = completed_at if completed_at is not None else tx.committed_at
    if not new:
        if header.status is status and header.failure_class == failure_class:
            return CommitResult(created=False, event_seq=retried[terminal.event_id])
        if header.status in TERMINAL_RUN_STATUSES:
            raise StoreRefusal(
                StoreCode.RUN_STATUS_CONFLICT,
                f"run {state.run_id} already ended as {header.status}",
                terminal.event_id,
            )
        set_terminal(
            tx.conn,
            state.run_id,
            status,
            failure_class,
            updated_at=stamp_updated,
            completed_at=stamp_completed,
        )
        state.status = status
        return CommitResult(created=False, event_seq=retried[terminal.event_id])
    tx.check_seal(state, new)
    if header.status in TERMINAL_RUN_STATUSES:
        raise StoreRefusal(
            StoreCode.RUN_STATUS_CONFLICT,
            f"run {state.run_id} header is {header.status} without its terminal event",
            terminal.event_id,
        )
    tx.check_marker(state, terminal, 0)
    seq = tx.insert(state, terminal)
    failpoint(CrashPoint.RUN_ENDING_AFTER_EVENT_INSERT)
    set_terminal(
        tx.conn,
        state.run_id,
        status,
        failure_class,
        updated_at=stamp_updated,
        completed_at=stamp_completed,
    )
    state.status = status
    return CommitResult(created=True, event_seq=seq)
