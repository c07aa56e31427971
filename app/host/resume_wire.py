"""How a Safe resume park travels to the window: a plan's reasons and diagnostics as the bridge
carries them (``ResumeParked``, ``ResumeDiagnostic``), bounded in count and size, with a drift's
changed files and what recovery concluded about each parked file write of the source run.

Pure translation, apart from reading the source run's events for the parked writes; the desktop
host's services (``desktop_services``) and the settle and survivor checks use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from app.bridge_contract import ChangedPath, ResumeDiagnostic
from app.host.host_services import ResumeParked
from runtime.continuation.continuation_planner import ContinuationPlan
from runtime.continuation.resume_candidate import newest_run
from runtime.ledger.codes import ISSUE_CODE, RESOLVER_REASON, ResolverReason, RestoreCode
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import RunHeader, StoredEvent
from runtime.recovery.write_leftovers import leftover_words, parked_writes

MAX_DIAGNOSTICS = 500


class RunReader(Protocol):
    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...

    def read_run_events(self, run_id: str) -> Sequence[StoredEvent]: ...


def wire_diagnostic(
    code: str,
    message: str,
    tool_call_id: str | None = None,
    tool_name: str | None = None,
    detail: Mapping[str, Any] | None = None,
    *,
    event_id: str | None = None,
) -> ResumeDiagnostic:
    changed, more = _changed_paths(detail or {})
    return ResumeDiagnostic(
        code=code,
        message=message[:4000],
        tool_call_id=tool_call_id[:200] if tool_call_id else None,
        tool_name=tool_name[:200] if tool_name else None,
        changed_paths=changed,
        more_changed_paths=more,
        event_id=event_id[:200] if event_id else None,
        sub_code=sub_code(detail or {}),
        path=_named_path(detail or {}),
        subject=_subject(detail or {}),
        clone=_flag((detail or {}).get("clone")),
    )


def _named_path(detail: Mapping[str, Any]) -> str | None:
    """The file or folder a diagnostic names (its ``path`` field), when it fits the wire."""
    path = detail.get("path")
    return path if isinstance(path, str) and 0 < len(path) <= 4096 else None


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _subject(detail: Mapping[str, Any]) -> str | None:
    """The call a diagnostic names in words (its ``subject`` field), when it fits the wire."""
    subject = detail.get("subject")
    return subject if isinstance(subject, str) and 0 < len(subject) <= 4400 else None


_SUB_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


def sub_code(detail: Mapping[str, Any]) -> str | None:
    """The code a diagnostic stands for beside its own, from its detail fields: the ledger check
    a damaged record failed (``issueCode``), else the resolver's reason for the call
    (``resolverReason``); None when it names neither."""
    for key in (ISSUE_CODE, RESOLVER_REASON):
        value = detail.get(key)
        if isinstance(value, str) and _SUB_CODE.fullmatch(value):
            return value
    return None


def _changed_paths(detail: Mapping[str, Any]) -> tuple[tuple[ChangedPath, ...], int]:
    """A drift's changed files as the wire carries them (the planner's first 50 and a count)."""
    listed = detail.get("changedPaths")
    if not isinstance(listed, list):
        return (), 0
    paths = tuple(
        ChangedPath(path=str(entry["path"])[:4096], change=entry["change"])
        for entry in listed[:50]
        if isinstance(entry, dict)
        and entry.get("change") in ("added", "modified", "deleted")
        and entry.get("path")
    )
    more = detail.get("moreChangedPaths", 0)
    return paths, (more if isinstance(more, int) and more >= 0 else 0) + len(listed) - len(paths)


TARGET_REFUSALS = frozenset(
    {
        RestoreCode.WORKSPACE_RESTORE_TARGET_NOT_EMPTY,
        RestoreCode.WORKSPACE_RESTORE_TARGET_INSIDE,
        RestoreCode.WORKSPACE_RESTORE_FAILED,
    }
)
"""Refusals of the folder a restored copy was to go to: the user can pick another."""

_WRITE_FINDINGS = {
    ResolverReason.RECONCILE_MATCHES_PRIOR_STATE: "it is as it was, the write did not happen",
    ResolverReason.RECONCILE_DIVERGED: "it was changed by someone else since",
    ResolverReason.RECONCILE_UNREADABLE: "it or the workspace could not be checked",
}


def parked_outcome(
    plan: ContinuationPlan, extra: tuple[ResumeDiagnostic, ...] = ()
) -> ResumeParked:
    reasons = tuple(str(reason) for reason in plan.rejection_reasons) or (
        "resume_candidate_missing",
    )
    diagnostics = tuple(
        wire_diagnostic(
            d.code, d.message, d.tool_call_id, d.tool_name, d.detail, event_id=d.event_id
        )
        for d in plan.diagnostics[:MAX_DIAGNOSTICS]
    )
    return ResumeParked(
        reasons[:64], (*diagnostics, *extra)[:MAX_DIAGNOSTICS], plan.workspace_options
    )


def parked_write_diagnostics(
    store: RunReader, plan: ContinuationPlan, cwd: str
) -> tuple[ResumeDiagnostic, ...]:
    """What recovery concluded about each parked file write of the source run (its reason
    code, so the banner can say "the write did not happen"), and any temporary file of it
    still in the folder."""
    run_id = plan.source_run_id
    if run_id is None:
        latest = newest_run(store.list_session_runs(plan.session_id))
        if latest is None:
            return ()
        run_id = latest.run_id
    try:
        events = [row.event for row in store.read_run_events(run_id)]
    except LedgerError:
        return ()
    found: list[ResumeDiagnostic] = []
    for write in parked_writes(events, cwd):
        found.append(
            wire_diagnostic(
                str(write.reason),
                f"recovery checked {write.path}: {_WRITE_FINDINGS[write.reason]}",
                write.tool_call_id,
                write.tool_name,
            )
        )
        found.extend(
            wire_diagnostic(
                "write_temp_file_left",
                leftover_words(leftover, leftover in write.ours, write.path),
                write.tool_call_id,
                write.tool_name,
            )
            for leftover in write.leftovers
        )
    return tuple(found)
