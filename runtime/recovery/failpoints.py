"""The Phase 0 failpoint catalog (P0-P11) and the crash contract it encodes.

The catalog is the crash contract of docs/design/recovery.md section 2: each failpoint names a
boundary of the tool path and the committed RuntimeEvent prefix a crash there leaves behind. The
prefix, not the failpoint, decides recovery, which is why twelve failpoints collapse onto four
prefixes and why the crash tests assert per prefix. ``committed_prefix`` means "the last fully
committed prefix after the crash"; P8 reasons about the prefix before the terminal append.

``failpoint(point)`` (``runtime.ledger.crash_points``: the one hook and the one vocabulary,
``CrashPoint``, for the runtime and the store alike) is compiled into the real T1/T2, terminal,
reconciler and continuation code paths. With ``MAKA_FAILPOINT=<name>`` the process kills itself
with SIGKILL at that point: no ``finally`` block, no atexit handler and no buffered write after
the kill runs, which is exactly a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from runtime.ledger.crash_points import FAILPOINT_ENV, CrashPoint, failpoint, failpoint_active


class CommittedPrefix(StrEnum):
    BEFORE_FUNCTION_CALL = "before_function_call"
    AFTER_FUNCTION_CALL = "after_function_call"
    AFTER_FUNCTION_RESPONSE = "after_function_response"
    AFTER_TERMINAL_EVENT = "after_terminal_event"


@dataclass(frozen=True, slots=True)
class Failpoint:
    id: CrashPoint
    boundary: str
    committed_prefix: CommittedPrefix


RUNTIME_RESUME_FAILPOINTS: tuple[Failpoint, ...] = (
    Failpoint(CrashPoint.P0, "before tool preparation (T1)", CommittedPrefix.BEFORE_FUNCTION_CALL),
    Failpoint(
        CrashPoint.P1,
        "function_call committed before prepared journal",
        CommittedPrefix.AFTER_FUNCTION_CALL,
    ),
    Failpoint(
        CrashPoint.P2,
        "prepared journal committed before implementation",
        CommittedPrefix.AFTER_FUNCTION_CALL,
    ),
    Failpoint(
        CrashPoint.P3, "tool implementation in progress", CommittedPrefix.AFTER_FUNCTION_CALL
    ),
    Failpoint(
        CrashPoint.P4,
        "side effect completed before outcome transaction (T2)",
        CommittedPrefix.AFTER_FUNCTION_CALL,
    ),
    Failpoint(
        CrashPoint.P5,
        "function_response committed before outcome journal",
        CommittedPrefix.AFTER_FUNCTION_RESPONSE,
    ),
    Failpoint(
        CrashPoint.P6,
        "outcome transaction committed before model result delivery",
        CommittedPrefix.AFTER_FUNCTION_RESPONSE,
    ),
    Failpoint(
        CrashPoint.P7,
        "tool result delivered before the next provider step",
        CommittedPrefix.AFTER_FUNCTION_RESPONSE,
    ),
    Failpoint(
        CrashPoint.P8, "terminal RuntimeEvent commit", CommittedPrefix.AFTER_FUNCTION_RESPONSE
    ),
    Failpoint(CrashPoint.P9, "terminal run header commit", CommittedPrefix.AFTER_TERMINAL_EVENT),
    Failpoint(CrashPoint.P10, "recovery decision commit", CommittedPrefix.AFTER_TERMINAL_EVENT),
    Failpoint(CrashPoint.P11, "continuation run creation", CommittedPrefix.AFTER_TERMINAL_EVENT),
)

FAILPOINTS_BY_ID: dict[str, Failpoint] = {point.id: point for point in RUNTIME_RESUME_FAILPOINTS}

CONTINUATION_FAILPOINTS: tuple[CrashPoint, ...] = (
    CrashPoint.AFTER_CONTINUATION_ADMISSION_COMMITTED,
    CrashPoint.AFTER_CONTINUATION_TERMINAL_COMMITTED,
)

__all__ = [
    "CONTINUATION_FAILPOINTS",
    "FAILPOINTS_BY_ID",
    "FAILPOINT_ENV",
    "RUNTIME_RESUME_FAILPOINTS",
    "CommittedPrefix",
    "CrashPoint",
    "Failpoint",
    "failpoint",
    "failpoint_active",
]
