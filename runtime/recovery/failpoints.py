"""Named crash points: the Phase 0 catalog (P0-P11) and the production hook that kills the process.

The catalog is the crash contract of RECOVERY.md section 2: each failpoint names a boundary of the
tool path and the committed RuntimeEvent prefix a crash there leaves behind. The prefix, not the
failpoint, decides recovery, which is why twelve failpoints collapse onto four prefixes and why the
crash tests assert per prefix. ``committed_prefix`` means "the last fully committed prefix after
the crash"; P8 reasons about the prefix before the terminal append.

``failpoint(name)`` is compiled into the real T1/T2, terminal, reconciler and continuation code
paths. With ``MAKA_FAILPOINT=<name>`` the process kills itself with SIGKILL at that point: no
``finally`` block, no atexit handler and no buffered write after the kill runs, which is exactly a
crash. Any string is accepted, so storage and continuation code can name their own points.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from enum import StrEnum

FAILPOINT_ENV = "MAKA_FAILPOINT"


class CommittedPrefix(StrEnum):
    BEFORE_FUNCTION_CALL = "before_function_call"
    AFTER_FUNCTION_CALL = "after_function_call"
    AFTER_FUNCTION_RESPONSE = "after_function_response"
    AFTER_TERMINAL_EVENT = "after_terminal_event"


@dataclass(frozen=True, slots=True)
class Failpoint:
    id: str
    boundary: str
    committed_prefix: CommittedPrefix


RUNTIME_RESUME_FAILPOINTS: tuple[Failpoint, ...] = (
    Failpoint("P0", "before tool preparation (T1)", CommittedPrefix.BEFORE_FUNCTION_CALL),
    Failpoint(
        "P1",
        "function_call committed before prepared journal",
        CommittedPrefix.AFTER_FUNCTION_CALL,
    ),
    Failpoint(
        "P2",
        "prepared journal committed before implementation",
        CommittedPrefix.AFTER_FUNCTION_CALL,
    ),
    Failpoint("P3", "tool implementation in progress", CommittedPrefix.AFTER_FUNCTION_CALL),
    Failpoint(
        "P4",
        "side effect completed before outcome transaction (T2)",
        CommittedPrefix.AFTER_FUNCTION_CALL,
    ),
    Failpoint(
        "P5",
        "function_response committed before outcome journal",
        CommittedPrefix.AFTER_FUNCTION_RESPONSE,
    ),
    Failpoint(
        "P6",
        "outcome transaction committed before model result delivery",
        CommittedPrefix.AFTER_FUNCTION_RESPONSE,
    ),
    Failpoint(
        "P7",
        "tool result delivered before the next provider step",
        CommittedPrefix.AFTER_FUNCTION_RESPONSE,
    ),
    Failpoint("P8", "terminal RuntimeEvent commit", CommittedPrefix.AFTER_FUNCTION_RESPONSE),
    Failpoint("P9", "terminal run header commit", CommittedPrefix.AFTER_TERMINAL_EVENT),
    Failpoint("P10", "recovery decision commit", CommittedPrefix.AFTER_TERMINAL_EVENT),
    Failpoint("P11", "continuation run creation", CommittedPrefix.AFTER_TERMINAL_EVENT),
)

FAILPOINTS_BY_ID: dict[str, Failpoint] = {point.id: point for point in RUNTIME_RESUME_FAILPOINTS}

AFTER_CONTINUATION_ADMISSION_COMMITTED = "after_continuation_admission_committed"
AFTER_CONTINUATION_TERMINAL_COMMITTED = "after_continuation_terminal_committed"
CONTINUATION_FAILPOINTS: tuple[str, ...] = (
    AFTER_CONTINUATION_ADMISSION_COMMITTED,
    AFTER_CONTINUATION_TERMINAL_COMMITTED,
)

# Where SIGKILL does not exist (Windows), SIGTERM maps to TerminateProcess: equally abrupt.
_KILL_SIGNAL: int = getattr(signal, "SIGKILL", signal.SIGTERM)


def failpoint(name: str) -> None:
    """Kill this process with SIGKILL when ``MAKA_FAILPOINT`` equals ``name``; else do nothing.

    Standard streams are flushed first so that a test reading the child's output sees everything
    the process printed before the crash point (the crash itself must not depend on buffering).
    """
    if os.environ.get(FAILPOINT_ENV) != name:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os.kill(os.getpid(), _KILL_SIGNAL)


def failpoint_active(name: str) -> bool:
    """True when ``MAKA_FAILPOINT`` names ``name``: a test-only point that changes behaviour
    instead of killing the process (for example ``tool_supervisor_disabled``)."""
    return os.environ.get(FAILPOINT_ENV) == name
