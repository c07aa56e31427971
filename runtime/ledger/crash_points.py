"""Every named crash point, and the one hook that kills the process at the armed one.

With ``MAKA_FAILPOINT=<name>`` in the environment the process kills itself with SIGKILL when it
reaches the crash point of that name: no ``finally`` block, no rollback, no ``atexit`` handler and
no buffered write after the kill runs; exactly what a power cut or an OOM kill does. The crash
tests drive real processes into each point (docs/design/recovery.md section 2;
``docs/crash-contract.md`` lists every point, and a test keeps that list equal to ``CrashPoint``).

The vocabulary lives here, in the ledger contract, because both the runtime and the store reach
crash points and the store may import only ``runtime.ledger``. ``failpoint`` accepts only
``CrashPoint`` members (mypy holds every caller to it), so a misspelt point cannot be written;
a ``MAKA_FAILPOINT`` value that names no point is reported once on standard error, and the
``maka`` command refuses it (``failpoint_unknown``) before doing anything.

Adding a crash point is one line in ``CrashPoint`` (plus its row in the contract document).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from enum import StrEnum
from typing import Any

from runtime.ledger.coded_error import CodedError
from runtime.ledger.codes import HostCode

FAILPOINT_ENV = "MAKA_FAILPOINT"


class CrashPoint(StrEnum):
    """The names ``MAKA_FAILPOINT`` may hold. The values are the names the environment uses.
    Most are points where the process dies (``failpoint``); the switches at the end change
    behaviour instead (``failpoint_active``)."""

    # The Phase 0 catalog (runtime.recovery.failpoints.RUNTIME_RESUME_FAILPOINTS).
    P0 = "P0"
    P1 = "P1"
    P2 = "P2"
    P3 = "P3"
    P4 = "P4"
    P5 = "P5"
    P6 = "P6"
    P7 = "P7"
    P8 = "P8"
    P9 = "P9"
    P10 = "P10"
    P11 = "P11"
    # Safe resume's continuation run.
    CONTINUATION_ADMISSION_BEFORE_COMMIT = "continuation_admission_before_commit"
    AFTER_CONTINUATION_ADMISSION_COMMITTED = "after_continuation_admission_committed"
    AFTER_CONTINUATION_TERMINAL_COMMITTED = "after_continuation_terminal_committed"
    # Inside (``*_insert``) or right after (``*_commit``) the store's write transactions.
    # A new run's header is inserted, its first event not yet (one transaction: neither commits).
    RUN_START_AFTER_HEADER_INSERT = "run_start_after_header_insert"
    T1_AFTER_CALL_INSERT = "t1_after_call_insert"
    T1_AFTER_DISPATCH_INSERT = "t1_after_dispatch_insert"
    T1_AFTER_COMMIT = "t1_after_commit"
    T2_AFTER_RESPONSE_INSERT = "t2_after_response_insert"
    T2_AFTER_COMMIT = "t2_after_commit"
    BUNDLE_AFTER_RECONCILE_INSERT = "bundle_after_reconcile_insert"
    BUNDLE_AFTER_OUTCOME_INSERT = "bundle_after_outcome_insert"
    BUNDLE_AFTER_DECISION_INSERT = "bundle_after_decision_insert"
    BUNDLE_AFTER_COMMIT = "bundle_after_commit"
    ATTESTATION_AFTER_COMMIT = "attestation_after_commit"
    RUN_ENDING_AFTER_EVENT_INSERT = "run_ending_after_event_insert"
    RUN_ENDING_AFTER_COMMIT = "run_ending_after_commit"
    # The first open of a new data directory (``storage/ledger/store_creation.py``): the new
    # database's
    # temporary file exists without a schema; its schema is committed, not yet published;
    # published as ``runtime.sqlite`` while the temporary name still links to it.
    FIRST_OPEN_BEFORE_MIGRATE = "first_open_before_migrate"
    FIRST_OPEN_BEFORE_PUBLISH = "first_open_before_publish"
    FIRST_OPEN_AFTER_PUBLISH = "first_open_after_publish"
    # An older database's upgrade (``storage/ledger/ledger_schema.py``): every step ran, the new
    # version is set, nothing committed.
    MIGRATION_BEFORE_COMMIT = "migration_before_commit"
    # The upgrade's compaction (``storage/ledger/upgrade_compaction.py``), the upgrade committed:
    # inside VACUUM, nothing of it committed; VACUUM committed into the WAL, the file not yet
    # rewritten from it.
    MIGRATION_COMPACTING = "migration_compacting"
    MIGRATION_AFTER_COMPACTION = "migration_after_compaction"
    # Workspace checkpoints (docs/design/workspace.md section 2): the ref exists, the fact
    # does not; both.
    AFTER_CHECKPOINT_ARTIFACT = "after_checkpoint_artifact"
    AFTER_CHECKPOINT_FACT = "after_checkpoint_fact"
    # A store's absorption of what it borrowed (``storage/checkpoints/checkpoint_borrow.py``):
    # the bulk copy written, the alternate still named; the alternate set aside, the store not
    # yet proven whole without it; the alternate removed, the folder of trees not yet.
    ABSORB_AFTER_COPY = "absorb_after_copy"
    ABSORB_ALTERNATE_ASIDE = "absorb_alternate_aside"
    ABSORB_ALTERNATE_REMOVED = "absorb_alternate_removed"
    # The restored copy exists, the transition fact does not (docs/design/workspace.md section 4).
    AFTER_RESTORE_MATERIALIZED = "after_restore_materialized"
    # A rebaseline's capture of the current files exists (its ref), the continuation and its
    # ``workspaceBaseline`` fact were not admitted (docs/design/workspace.md section 4).
    AFTER_REBASELINE_CAPTURED = "after_rebaseline_captured"
    # Settling a writing call takes the folder as the new baseline (docs/design/workspace.md
    # section 3): the capture's ref exists, nothing is recorded; inside the attestation's
    # transaction, its bundle inserted and the baseline fact not yet; both inserted, not yet
    # committed. A kill at any of them leaves neither the attestation nor the baseline.
    SETTLE_BASELINE_CAPTURED = "settle_baseline_captured"
    SETTLE_BEFORE_BASELINE_FACT = "settle_before_baseline_fact"
    SETTLE_AFTER_BASELINE_FACT = "settle_after_baseline_fact"
    # Branching a session (``maka branch``, docs/design/workspace.md section 6): the restored
    # copy exists and was verified, nothing is recorded; inside the admission transaction, the
    # new session and its ``branchStart`` fact inserted, not committed; committed, the new
    # session's first turn not started.
    AFTER_BRANCH_COPY_MATERIALIZED = "after_branch_copy_materialized"
    BRANCH_ADMISSION_BEFORE_COMMIT = "branch_admission_before_commit"
    AFTER_BRANCH_ADMISSION_COMMITTED = "after_branch_admission_committed"
    # Test-only switches: the process does not die there, it behaves differently
    # (``failpoint_active``).
    TOOL_SUPERVISOR_DISABLED = "tool_supervisor_disabled"
    TOOL_SUPERVISOR_NO_SUBREAPER = "tool_supervisor_no_subreaper"


class UnknownCrashPoint(CodedError, ValueError):
    """A ``MAKA_FAILPOINT`` value that names no crash point (``failpoint_unknown``)."""

    def __init__(self, value: str) -> None:
        self.value = value
        close = _closest(value)
        hint = f" (did you mean {close!r}?)" if close is not None else ""
        super().__init__(
            HostCode.FAILPOINT_UNKNOWN,
            f"{FAILPOINT_ENV}={value!r} names no crash point, so it would never fire{hint}; "
            "the crash points are listed in docs/crash-contract.md",
        )


def _closest(value: str) -> str | None:
    """The crash point ``value`` most likely meant (case aside, then by spelling), if any."""
    import difflib  # only when refusing a name: not worth every start-up

    by_folded = {point.value.casefold(): point.value for point in CrashPoint}
    close = difflib.get_close_matches(value.casefold(), list(by_folded), n=1)
    return by_folded[close[0]] if close else None


def crash_point_named(value: str) -> CrashPoint:
    """The crash point called ``value``; ``UnknownCrashPoint`` when there is none."""
    try:
        return CrashPoint(value)
    except ValueError:
        raise UnknownCrashPoint(value) from None


# Each environment value met so far and the point it names (None: unset, empty or unknown), so the
# hook costs a dict lookup and an unknown value is reported once.
_parsed: dict[str | None, CrashPoint | None] = {None: None, "": None}
_UNSEEN: Any = object()


def armed_crash_point() -> CrashPoint | None:
    """The crash point ``MAKA_FAILPOINT`` names right now (read at each call: a test may set it
    after import); None when it is unset or empty, or names no point (reported once on standard
    error). A writer on a hot path reads it once per store call and passes it to
    ``failpoint_armed``."""
    value = os.environ.get(FAILPOINT_ENV)
    point = _parsed.get(value, _UNSEEN)
    return _parse(value) if point is _UNSEEN else point


def _parse(value: str | None) -> CrashPoint | None:
    """Parse and remember an environment value not met before; report it if it is unknown."""
    if value is None:  # (never: None is in the table; this tells the type checker)
        return None
    point: CrashPoint | None
    try:
        point = crash_point_named(value)
    except UnknownCrashPoint as unknown:
        point = None
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.write(f"maka: warning [{unknown.code}]: {unknown.message}\n")
            sys.stderr.flush()
    _parsed[value] = point
    return point


def failpoint(*points: CrashPoint) -> None:
    """SIGKILL this process when ``MAKA_FAILPOINT`` names one of ``points``; else do nothing."""
    value = os.environ.get(FAILPOINT_ENV)
    armed = _parsed.get(value, _UNSEEN)
    if armed is _UNSEEN:
        armed = _parse(value)
    if armed is not None and armed in points:
        _kill()


def failpoint_active(point: CrashPoint) -> bool:
    """Whether ``MAKA_FAILPOINT`` names ``point``: for a test-only switch that changes behaviour
    instead of killing the process (``CrashPoint.TOOL_SUPERVISOR_DISABLED``)."""
    value = os.environ.get(FAILPOINT_ENV)
    armed = _parsed.get(value, _UNSEEN)
    if armed is _UNSEEN:
        armed = _parse(value)
    return armed is point


def failpoint_armed(armed: CrashPoint | None, *points: CrashPoint) -> None:
    """``failpoint`` with the environment already read (``armed_crash_point``) at the start of
    the same store call."""
    if armed is not None and armed in points:
        _kill()


# Where SIGKILL does not exist (Windows), SIGTERM maps to TerminateProcess: equally abrupt.
_KILL_SIGNAL: int = getattr(signal, "SIGKILL", signal.SIGTERM)


def _kill() -> None:
    """Standard streams are flushed first so that a test reading the process's output sees
    everything it printed before the crash point (the crash itself must not depend on
    buffering)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os.kill(os.getpid(), _KILL_SIGNAL)
