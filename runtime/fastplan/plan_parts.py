"""A run planned as a head and a tail apart, and the parts' facts as plain data.

The plain path is ``resume_plan.plan_resume``; this module only reuses its one extension point
(``plan_resolved`` and ``plan_verdict``, with the resolver's ``resolve_scanned``). A later part of
a run is resolved with the run's first event's protocol (``plan_part(..., run_first_event=...)``),
and two parts are planned apart only when ``plan_parts_independent`` holds (with
``tail_scan.tail_is_independent``); the verdict of both parts' facts is then the whole run's (a
property test checks every cut).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import Any

from runtime.ledger.codes import DiagnosticCode, ScanIssueCode
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.tool_ledger_scanner import ScanIssue, ToolLedgerScan, scan_tool_ledger
from runtime.recovery.recovery_resolver import (
    late_marker_issues,
    resolve_operations,
    resolve_scanned,
    run_protocol,
)
from runtime.recovery.resume_plan import PlanFacts, PlanPart, ResumeDiagnostic, plan_resolved


def plan_part(
    events: Sequence[RuntimeEvent],
    scan: ToolLedgerScan | None = None,
    *,
    run_first_event: RuntimeEvent | None = None,
    collect_ids: bool = False,
) -> PlanPart:
    """Plan ``events``: a whole run, or (with ``run_first_event``, the run's first event) a
    later part of one whose ``scan`` counts positions from the run's start; then the protocol
    is that event's and every marker in ``events`` is a late one."""
    if run_first_event is None:
        return plan_resolved(events, resolve_operations(events, scan), collect_ids=collect_ids)
    if scan is None:
        scan = scan_tool_ledger(events)
    resolved = resolve_scanned(scan, run_protocol(run_first_event), late_marker_issues(scan))
    return plan_resolved(events, resolved, collect_ids=collect_ids)


def plan_parts_independent(head: PlanPart, tail_tool_call_ids: Iterable[str]) -> bool:
    """Whether two parts of a run (planned with ``collect_ids=True``, the tail's scan being
    its scan within the whole; the tail given by its ``tool_call_ids``) plan as the whole run
    does, given that the tail's scan is independent of the head's
    (``tail_scan.tail_is_independent``).

    Then no operation spans the cut, and what else the plan reads across events goes by
    tool-call id: a response pairs the latest earlier call of its id (the replay list), and is
    checked against the projected call of its id (its diagnostics). Parts that share no
    tool-call id therefore cannot change each other's replay list or diagnostics."""
    return head.tool_call_ids.isdisjoint(tail_tool_call_ids)


# ---- the parts' facts as plain data (a child process sends them through ``marshal``) ----------


def _diagnostic_row(diagnostic: ResumeDiagnostic) -> tuple[Any, ...]:
    detail = dict(diagnostic.detail) if diagnostic.detail is not None else None
    return (
        diagnostic.code.value,
        diagnostic.message,
        diagnostic.event_id,
        diagnostic.tool_call_id,
        diagnostic.tool_name,
        detail,
    )


def _diagnostics(rows: Sequence[Any]) -> tuple[ResumeDiagnostic, ...]:
    return tuple(
        ResumeDiagnostic(
            DiagnosticCode(code),
            message,
            event_id,
            tool_call_id,
            tool_name,
            MappingProxyType(detail) if detail is not None else None,
        )
        for code, message, event_id, tool_call_id, tool_name, detail in rows
    )


def _issues(rows: Sequence[Any]) -> tuple[ScanIssue, ...]:
    return tuple(ScanIssue(ScanIssueCode(code), *rest) for code, *rest in rows)


def facts_to_plain(facts: PlanFacts) -> tuple[Any, ...]:
    def issue_rows(issues: Sequence[ScanIssue]) -> list[tuple[Any, ...]]:
        return [(i.code.value, i.event_id, i.operation_id, i.tool_call_id) for i in issues]

    return (
        facts.event_count,
        [_diagnostic_row(d) for d in facts.operation_diagnostics],
        issue_rows(facts.marker_issues),
        issue_rows(facts.scan_issues),
        facts.corrupt_decision,
        facts.indeterminate_operation,
        [_diagnostic_row(d) for d in facts.orphan_facts],
        [_diagnostic_row(d) for d in facts.hidden_pending],
        [_diagnostic_row(d) for d in facts.response_diagnostics],
    )


def facts_from_plain(row: Sequence[Any]) -> PlanFacts:
    count, operations, markers, scan_issues, corrupt, indeterminate, orphans, hidden, responses = (
        row
    )
    return PlanFacts(
        event_count=count,
        operation_diagnostics=_diagnostics(operations),
        marker_issues=_issues(markers),
        scan_issues=_issues(scan_issues),
        corrupt_decision=corrupt,
        indeterminate_operation=indeterminate,
        orphan_facts=_diagnostics(orphans),
        hidden_pending=_diagnostics(hidden),
        response_diagnostics=_diagnostics(responses),
    )
