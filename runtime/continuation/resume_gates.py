"""The gates of the resume seam (``ResumeService``), one named function each, evaluated in order:
the first that refuses decides.

``PLAN_GATES``, the early gates of planning (``plan_latest``): each returns None to pass or the
single-reason park. A gate that reads something (the session's runs, the source header, the
safety observation) keeps it in the ``LatestRun`` for the gates after it, and reads it only once
every gate before it has passed: a turned-off feature lists nothing, an unreadable source is
never observed.

``ADMISSION_GATES``, what a user's workspace decision needs before the admission makes anything
(``_admit``): each returns None to pass or the ``Refusal`` execution raises.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from runtime.continuation.continuation_planner import (
    ContinuationDetails,
    ContinuationPlan,
    SafetyObservation,
    SessionFolderMissing,
    observation_problem,
    park,
)
from runtime.continuation.resume_candidate import ended_resumably, newest_run
from runtime.continuation.workspace_decision import WorkspaceDecision
from runtime.ledger.checkpoint_ports import CheckpointCarrier
from runtime.ledger.codes import ParkReason
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import TERMINAL_RUN_STATUSES, RunHeader


class RunReader(Protocol):
    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...

    def read_owner_epoch(self) -> int: ...

    def read_run_header(self, run_id: str) -> RunHeader | None: ...


class Observer(Protocol):
    def observe(self, session_id: str, cwd: str) -> SafetyObservation: ...


@dataclass(slots=True)
class LatestRun:
    """One planning call: what the gates may read, and what they have read so far."""

    session_id: str
    store: RunReader
    inspector: Observer | None
    enabled: bool
    session_cwd: Callable[[RunHeader], str]
    runs: list[RunHeader] = field(default_factory=list)
    latest: RunHeader | None = None
    source: RunHeader | None = None
    observation: SafetyObservation | None = None

    def newest(self) -> RunHeader:
        assert self.latest is not None, "the runs gate picks the newest run first"
        return self.latest

    def source_header(self) -> RunHeader:
        assert self.source is not None, "the source gate reads the header first"
        return self.source


PlanGate = Callable[[LatestRun], ContinuationPlan | None]


def feature_enabled(run: LatestRun) -> ContinuationPlan | None:
    """Safe resume turned off parks, having listed nothing; except that a turn whose lease a
    gone process of this computer holds is said to be that (``gone_holder_park``), whatever the
    setting: otherwise its unended run reads as a turn still running."""
    if run.enabled:
        return None
    nothing = _nothing_to_resume(run)
    if nothing is not None:
        # Whatever the setting: turning Safe resume on would not help a session whose latest
        # run finished normally (or was resumed already), and saying so sent the user to do it.
        return nothing
    holder = other_lease_holder(run.store, run.session_id)
    if holder is not None and holder_gone_here(holder):
        try:
            runs = list(run.store.list_session_runs(run.session_id))
        except LedgerError:
            runs = []
        latest = newest_run(runs) if runs else None
        if latest is not None and latest.status not in TERMINAL_RUN_STATUSES:
            return gone_holder_park(run.session_id, latest.run_id, holder)
    return park(
        run.session_id, None, ParkReason.RESUME_FEATURE_DISABLED, "Safe resume is turned off"
    )


def _nothing_to_resume(run: LatestRun) -> ContinuationPlan | None:
    """The park of a session with nothing to resume (no run; the latest finished normally, or
    is the finished continuation of the last interruption), else None (also when the runs
    cannot be read: the gates after say why)."""
    try:
        runs = list(run.store.list_session_runs(run.session_id))
    except LedgerError:
        return None
    latest = newest_run(runs)
    if latest is None:
        return park(run.session_id, None, ParkReason.RESUME_CANDIDATE_MISSING, "nothing to resume")
    if latest.status not in TERMINAL_RUN_STATUSES:
        return None
    run.runs, run.latest = runs, latest
    return latest_interrupted(run)


def inspector_available(run: LatestRun) -> ContinuationPlan | None:
    if run.inspector is not None:
        return None
    return park(
        run.session_id,
        None,
        ParkReason.SAFETY_OBSERVATION_UNAVAILABLE,
        "no safety inspector is available",
    )


def runs_listed(run: LatestRun) -> ContinuationPlan | None:
    """Lists the session's runs and picks the newest."""
    try:
        run.runs = list(run.store.list_session_runs(run.session_id))
    except LedgerError as error:
        return park(run.session_id, None, ParkReason.SOURCE_RUN_UNREADABLE, str(error))
    if not run.runs:
        return park(run.session_id, None, ParkReason.RESUME_CANDIDATE_MISSING, "nothing to resume")
    run.latest = newest_run(run.runs)
    return None


def latest_not_running(run: LatestRun) -> ContinuationPlan | None:
    latest = run.newest()
    if latest.status in TERMINAL_RUN_STATUSES:
        return None
    holder = other_lease_holder(run.store, run.session_id)
    if holder is not None and holder_gone_here(holder):
        return gone_holder_park(run.session_id, latest.run_id, holder)
    if holder is not None:
        # On a shared ledger: the run is another host's until its lease runs out, whether that
        # host still runs the turn or stopped (recovery never repairs a leased run).
        return park(
            run.session_id,
            latest.run_id,
            ParkReason.SESSION_BUSY,
            f"host {holder} holds the session's lease: it runs the turn, or it stopped and no "
            "other host may take the session over yet (once its lease has run out, a running "
            "host takes the session over and recovers the run)",
        )
    if latest.owner_epoch < run.store.read_owner_epoch():
        return park(
            run.session_id,
            latest.run_id,
            ParkReason.RUNTIME_LEDGER_UNREADABLE,
            "the interrupted run's ledger could not be repaired and is quarantined",
        )
    return park(run.session_id, latest.run_id, ParkReason.SESSION_BUSY, "the session is running")


def gone_holder_park(session_id: str, run_id: str, holder: str) -> ContinuationPlan:
    """The session's unended run is leased to a process of this computer that is gone (a
    killed ``maka run`` or host): nothing runs the turn, though nobody may take the session
    over until its lease runs out."""
    return park(
        session_id,
        run_id,
        ParkReason.SESSION_BUSY,
        f"{gone_holder_words(holder)}, still holds the session's lease: nothing runs the turn, "
        f"but nobody may take the session over until the lease runs out ({lease_wait_words()}); "
        "then a running host, or the next command, takes it over and "
        "repairs the run",
        detail={"holder": holder, "holderGone": True},
    )


def gone_holder_words(holder: str) -> str:
    """A lease holder that ``holder_gone_here``, named as every reader names it (``maka plan``,
    ``maka run``, ``maka sessions``, ``maka timeline``)."""
    return f"{holder}, a Maka process of this computer that is gone (killed or crashed)"


def lease_wait_words() -> str:
    """How long a lease lasts, as this computer's settings say (``MAKA_SESSION_LEASE_TTL_MS``
    when set: short leases said "half a minute" of a lease that ran out in three seconds)."""
    raw = os.environ.get("MAKA_SESSION_LEASE_TTL_MS", "").strip()
    ms = int(raw) if raw.isdigit() else 0
    if ms <= 0:
        return "half a minute with the default lease settings"
    return f"at most {ms / 1000:g} s with this computer's lease settings"


def other_lease_holder(store: object, session_id: str) -> str | None:
    """The other host holding the session's live lease (a shared ledger: PostgreSQL), or None
    (none does, this process holds it, the ledger is the data folder's own, or the leases
    cannot be read now)."""
    read = getattr(store, "live_lease_holders", None)
    if read is None:
        return None
    try:
        holders: Mapping[str, str] = read()
    except LedgerError:
        return None
    held = getattr(store, "held_session_leases", None)
    if held is not None and session_id in held():
        return None  # this process's own lease
    return holders.get(session_id)


def held_elsewhere_words(session_id: str, holder: str) -> str:
    """Why a new turn in a session another host holds is refused (``session_busy``), and what
    to do: said the same by ``maka run`` alone and by a host serving a terminal."""
    if holder_gone_here(holder):
        return (
            f"session {session_id} is held by {gone_holder_words(holder)}: its lease has not "
            "run out yet; run the command again "
            f"once it has ({lease_wait_words()}), and this command "
            "takes the session over and repairs what it left"
        )
    return (
        f"session {session_id} is held by another host, {holder}: it runs or keeps the "
        "session, or it stopped and its lease has not run out yet; run the command with that "
        "host's data folder, or stop that host (a running host keeps the sessions it holds: "
        "their leases run out only once it stops) and run it again once the lease has run out"
    )


def busy_elsewhere_words(store: object, session_id: str) -> str | None:
    """Why the session is busy with another host (``held_elsewhere_words``), or None when no
    other host holds its lease: a new turn, a resume and a settle there are refused with
    ``session_busy`` in these words, before anything is written or said about its history."""
    holder = other_lease_holder(store, session_id)
    return None if holder is None else held_elsewhere_words(session_id, holder)


def holder_gone_here(holder: str) -> bool:
    """Whether a lease holder (``machine:pid:nonce``) names a process of this computer that
    no longer runs (its pid is free, or belongs to a process started since)."""
    import os
    import socket

    parts = holder.split(":")
    if len(parts) < 3:
        return False
    machine, pid_text = ":".join(parts[:-2]), parts[-2]
    if machine != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def latest_interrupted(run: LatestRun) -> ContinuationPlan | None:
    """The shared decision (``resume_candidate``): the newest run ended failed or cancelled."""
    latest = run.newest()
    if ended_resumably(latest):
        return None
    if latest.continuation_source is not None:
        # The newest run is the finished continuation of the last interruption.
        return park(
            run.session_id,
            str(latest.continuation_source.get("sourceRunId", latest.run_id)),
            ParkReason.CONTINUATION_ALREADY_EXISTS,
            "this interruption was already resumed",
            detail={
                "continuationClaimId": latest.continuation_source.get("claimId"),
                "continuationRunId": latest.run_id,
            },
        )
    return park(
        run.session_id,
        latest.run_id,
        ParkReason.RESUME_CANDIDATE_MISSING,
        "the latest run finished normally",
    )


def source_readable(run: LatestRun) -> ContinuationPlan | None:
    """Reads the interrupted run's header (the source of the continuation)."""
    latest = run.newest()
    try:
        run.source = run.store.read_run_header(latest.run_id)
    except LedgerError as error:
        return park(run.session_id, latest.run_id, ParkReason.SOURCE_RUN_UNREADABLE, str(error))
    if run.source is None:
        return park(
            run.session_id, latest.run_id, ParkReason.SOURCE_RUN_UNREADABLE, "header missing"
        )
    return None


def workspace_recorded(run: LatestRun) -> ContinuationPlan | None:
    source = run.source_header()
    if source.workspace_identity:
        return None
    return park(
        run.session_id,
        source.run_id,
        ParkReason.WORKSPACE_IDENTITY_MISSING,
        "the interrupted run recorded no workspace identity",
    )


def workspace_observed(run: LatestRun) -> ContinuationPlan | None:
    """Asks the safety inspector about the session's folder, tools and background work."""
    source = run.source_header()
    assert run.inspector is not None, "the inspector gate comes first"
    try:
        run.observation = run.inspector.observe(source.session_id, run.session_cwd(source))
    except SessionFolderMissing as missing:
        return park(
            run.session_id, source.run_id, ParkReason.WORKSPACE_FOLDER_MISSING, str(missing)
        )
    except Exception as error:  # the inspector's failure of any kind parks
        return park(
            run.session_id,
            source.run_id,
            ParkReason.SAFETY_OBSERVATION_UNAVAILABLE,
            observation_problem(error),
        )
    return None


PLAN_GATES: tuple[PlanGate, ...] = (
    feature_enabled,
    inspector_available,
    runs_listed,
    latest_not_running,
    latest_interrupted,
    source_readable,
    workspace_recorded,
    workspace_observed,
)


def first_park(run: LatestRun, gates: Sequence[PlanGate] = PLAN_GATES) -> ContinuationPlan | None:
    """The park of the first gate that refuses, else None (every gate passed)."""
    for gate in gates:
        parked = gate(run)
        if parked is not None:
            return parked
    return None


# ---- admission ---------------------------------------------------------------------------------


class Refusal(NamedTuple):
    code: ParkReason
    message: str


AdmissionGate = Callable[[ContinuationDetails, CheckpointCarrier | None], Refusal | None]


def baseline_capturable(
    details: ContinuationDetails, checkpoints: CheckpointCarrier | None
) -> Refusal | None:
    """A rebaseline captures the folder as it is now: it needs a checkpoint store."""
    if details.workspace_decision is not WorkspaceDecision.REBASELINE or checkpoints is not None:
        return None
    return Refusal(
        ParkReason.WORKSPACE_CHECKPOINT_MISSING, "no checkpoint store to capture the files"
    )


def restore_snapshot_present(
    details: ContinuationDetails, checkpoints: CheckpointCarrier | None
) -> Refusal | None:
    """A restore copies the boundary snapshot: it needs the store and the snapshot."""
    if details.workspace_decision is not WorkspaceDecision.RESTORE:
        return None
    if checkpoints is not None and details.restore_checkpoint is not None:
        return None
    return Refusal(ParkReason.WORKSPACE_CHECKPOINT_MISSING, "no snapshot to restore a copy from")


ADMISSION_GATES: tuple[AdmissionGate, ...] = (baseline_capturable, restore_snapshot_present)


def first_refusal(
    details: ContinuationDetails,
    checkpoints: CheckpointCarrier | None,
    gates: Sequence[AdmissionGate] = ADMISSION_GATES,
) -> Refusal | None:
    """The refusal of the first admission gate that refuses, else None."""
    for gate in gates:
        refusal = gate(details, checkpoints)
        if refusal is not None:
            return refusal
    return None
