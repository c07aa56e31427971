"""The safe-boundary continuation planner (docs/design/recovery.md section 6): pure gates over facts
the session service has already read.

Early gates park with one reason (lineage, replay, claim); the rest accumulate, so a user sees
every reason at once. A plan that continues carries everything execution must revalidate: the
pinned boundary (manifest digest, source high-water, prefix digest, terminal event), the replay
(runtime context, provider items and their digest) and the safety snapshot.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from runtime.continuation.admission_basis import admission_basis
from runtime.continuation.continuation_replay import (
    ImmutablePrefix,
    ReplayBlocked,
    ReplayPlan,
    SegmentBlockReason,
    SegmentIssue,
    build_replay_plan,
)
from runtime.continuation.lineage_reader import Lineage, LineageError
from runtime.continuation.provider_replay import ItemKind, ProviderItem
from runtime.continuation.restore_point import RestorePoint
from runtime.continuation.settle_baseline import takes_folder
from runtime.continuation.workspace_decision import (
    ANSWERED_BY,
    WORKSPACE_DECISION_REASONS,
    WorkspaceDecision,
    offered_decisions,
)
from runtime.continuation.workspace_gate import CheckpointEvidence, WorkspaceTree, workspace_gate
from runtime.ledger.attestation import attestation_suffix_ok
from runtime.ledger.checkpoint_ports import TreeChange
from runtime.ledger.codes import (
    RESOLVER_REASON,
    DiagnosticCode,
    FailureClass,
    ParkReason,
    ResolverReason,
)
from runtime.ledger.continuation_ports import ContinuationClaim
from runtime.ledger.event_model import RuntimeEvent, is_terminal
from runtime.ledger.permission_facts import open_permission_requests
from runtime.ledger.restore_point_words import AT_STOP
from runtime.ledger.store_ports import (
    EVENT_STATUS_TO_RUN,
    TERMINAL_RUN_STATUSES,
    RunHeader,
    RunStatus,
)
from runtime.ledger.workspace_facts import boundary_checkpoint


class SessionFolderMissing(FileNotFoundError):
    """The safety inspector found no folder where the session lives (moved, deleted, or
    replaced by a file or a link of the same name)."""

    def __init__(self, cwd: str) -> None:
        super().__init__(f"the session folder {cwd} {folder_gone(cwd)}")
        self.cwd = cwd


def folder_gone(cwd: str) -> str:
    """What is at ``cwd``, a session folder that is not a folder now, in words: it "no longer
    exists", or it "is no longer a folder" when a file or a link has its name (a user who
    lists the parent sees that name and would not believe the first)."""
    try:
        mode = os.lstat(cwd).st_mode
    except OSError:
        return "no longer exists"
    if stat.S_ISLNK(mode):
        return "is no longer a folder (a link that leads to no folder has its name now)"
    return "is no longer a folder (a file has its name now)"


def observation_problem(error: BaseException) -> str:
    """A failed observation in words for the park's details: the error's code and message when
    it has them, never an exception class name."""
    code = getattr(error, "code", None)
    message = getattr(error, "message", None) or str(error) or "the observation failed"
    return f"{code}: {message}" if code else str(message)


@dataclass(frozen=True, slots=True)
class SafetyObservation:
    """Authoritative facts from the safety inspector (never from the renderer)."""

    workspace_identity: str
    workspace_path: str
    background_settled: bool
    tool_names: tuple[str, ...]
    background_detail: tuple[str, ...] = ()
    # The folder's current tree under the checkpoint policy (no ref, no fact): None when there
    # is no checkpoint store for this workspace (docs/design/workspace.md section 3).
    workspace_tree: WorkspaceTree | None = None


@dataclass(frozen=True, slots=True)
class FreshIds:
    invocation_id: str
    run_id: str
    turn_id: str
    claim_id: str
    start_event_id: str


@dataclass(frozen=True, slots=True)
class PlanDiagnostic:
    code: str
    message: str
    event_id: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.event_id is not None:
            body["eventId"] = self.event_id
        if self.tool_call_id is not None:
            body["toolCallId"] = self.tool_call_id
        if self.tool_name is not None:
            body["toolName"] = self.tool_name
        if self.detail:
            body["detail"] = dict(self.detail)
        return body


@dataclass(frozen=True, slots=True)
class ContinuationDetails:
    ids: FreshIds
    source: RunHeader
    source_high_water: int
    source_prefix_digest: str
    source_terminal_event_id: str
    boundary_digest: str
    provider_replay_digest: str
    runtime_context: tuple[RuntimeEvent, ...]
    provider_items: tuple[ProviderItem, ...]
    lineage_run_ids: tuple[str, ...]
    lineage_high_waters: tuple[int, ...]
    lineage_digests: tuple[str, ...]
    workspace_identity: str
    tool_names: tuple[str, ...]
    # The tree verified equal to the boundary checkpoint; revalidation re-checks it.
    workspace_tree_id: str | None = None
    # The workspace epoch the continuation runs in (one more after a user's decision).
    workspace_epoch: int = 1
    # The user's decision that answered the workspace gate, and what it answered.
    workspace_decision: WorkspaceDecision | None = None
    previous_checkpoint_ref: str | None = None
    decision_changes: tuple[TreeChange, ...] | None = None  # None: nothing to compare with
    # For a restore: the folder the user picked (None: the default sibling) and the snapshot.
    restore_to: str | None = None
    restore_checkpoint: Mapping[str, Any] | None = None
    # What the copy reflects when it is not the folder at the stop (the transition's fields).
    restore_fields: Mapping[str, Any] = field(default_factory=dict)
    # The lineage's calls as people know them, for those fields' words (``copy_reflects``).
    restore_subjects: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ContinuationPlan:
    session_id: str
    source_run_id: str | None
    rejection_reasons: tuple[ParkReason, ...]
    diagnostics: tuple[PlanDiagnostic, ...]
    continuation: ContinuationDetails | None = None
    # A snapshot of the lineage whose objects exist: a restored copy of it can be offered.
    restorable: bool = False
    # The snapshot that copy would be made from and what it reflects.
    restore_point: RestorePoint | None = None
    # The user's workspace decisions recorded in the lineage, oldest first (``maka plan``).
    transitions: tuple[Mapping[str, Any], ...] = ()

    @property
    def continues(self) -> bool:
        return self.continuation is not None and not self.rejection_reasons

    @property
    def workspace_options(self) -> tuple[str, ...]:
        """The user's ways forward when only the workspace gate parks
        (docs/design/workspace.md 4)."""
        if self.continues:
            return ()
        return offered_decisions(self.rejection_reasons, restorable=self.restorable)

    @property
    def answers_take_folder(self) -> bool:
        """Answering whether the calls that park ran also takes the folder as it is now as the
        starting point (the planner's ``workspace_settle_takes_folder`` note): the files'
        reasons clear with the answer, and no decision about them follows."""
        return any(d.code == _TAKES_FOLDER for d in self.diagnostics)

    @property
    def later_workspace_options(self) -> tuple[str, ...]:
        """The ways forward for the files when other reasons park too (a decision never waives
        another gate): offered once those are cleared."""
        if self.continues or self.workspace_options:
            return ()
        answerable = [r for r in self.rejection_reasons if r in WORKSPACE_DECISION_REASONS]
        if not answerable or self.answers_take_folder:
            return ()
        return offered_decisions(answerable, restorable=self.restorable)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "sessionId": self.session_id,
            "disposition": "continue" if self.continues else "park",
            "rejectionReasons": [reason.value for reason in self.rejection_reasons],
            "diagnostics": [d.to_json() for d in self.diagnostics],
        }
        if self.source_run_id is not None:
            body["sourceRunId"] = self.source_run_id
        options = self.workspace_options
        if options:
            body["workspaceOptions"] = list(options)
        later = self.later_workspace_options
        if later:
            body["laterWorkspaceOptions"] = list(later)
        if "isolated_restore" in options and self.restore_point is not None:
            point = self.restore_point
            body["restorePoint"] = {
                "kind": point.kind,
                "checkpointRef": str(point.checkpoint.get("checkpointRef", "")),
                "reflects": point.reflects,
            }
        if self.transitions:
            body["workspaceTransitions"] = [dict(t) for t in self.transitions]
        if self.continuation is not None:
            c = self.continuation
            body["continuation"] = {
                "runId": c.ids.run_id,
                "sourceRuntimeEventHighWater": c.source_high_water,
                "boundaryDigest": c.boundary_digest,
                "providerReplayDigest": c.provider_replay_digest,
                "lineageRunIds": list(c.lineage_run_ids),
                "replayRuntimeEventIds": [e["id"] for e in c.runtime_context],
            }
            if c.workspace_decision is not None:
                body["continuation"]["workspaceDecision"] = c.workspace_decision.value
        return body


def park(
    session_id: str,
    source_run_id: str | None,
    reason: ParkReason,
    message: str,
    **extra: Any,
) -> ContinuationPlan:
    """A single-reason park (the early gates)."""
    diagnostic = PlanDiagnostic(reason.value, message, **extra)
    return ContinuationPlan(session_id, source_run_id, (reason,), (diagnostic,))


@dataclass(frozen=True, slots=True)
class PlannerInput:
    session_id: str
    source: RunHeader
    lineage: Lineage | LineageError
    existing_claim: ContinuationClaim | None
    claim_authority_error: str | None
    observation: SafetyObservation
    ids: FreshIds
    expected_high_water: int | None = None
    # The lineage's replay when the caller already built it (to look its claim up); else built here.
    replay: ReplayPlan | ReplayBlocked | None = None
    # The boundary checkpoint held against the folder (the session service's reading of it).
    checkpoint_evidence: CheckpointEvidence | None = None
    # The user's explicit way forward for a workspace park (docs/design/workspace.md section 4), and
    # how the folder differs from the newest snapshot it would replace (None: not comparable).
    decision: WorkspaceDecision | None = None
    decision_changes: tuple[TreeChange, ...] | None = None
    restorable: bool = False
    restore_to: str | None = None
    # The snapshot a restored copy would be made from (None: the boundary one, when restorable).
    restore_point: RestorePoint | None = None


_UNSETTLED_TO_REASON = {
    SegmentBlockReason.TOOL_RECOVERY_UNSETTLED: ParkReason.DANGLING_TOOL_STATE,
    SegmentBlockReason.TOOL_RECOVERY_CORRUPTION: ParkReason.DANGLING_TOOL_STATE,
    SegmentBlockReason.PROVIDER_REPLAY_NON_SUFFIX_GAP: ParkReason.PROVIDER_REPLAY_NON_SUFFIX_GAP,
    SegmentBlockReason.PROVIDER_REPLAY_UNSUPPORTED: ParkReason.RUNTIME_LEDGER_UNREADABLE,
}


def _background_pending(observation: SafetyObservation) -> PlanDiagnostic | None:
    if observation.background_settled:
        return None
    return PlanDiagnostic(
        ParkReason.BACKGROUND_OPERATION_PENDING.value,
        "; ".join(observation.background_detail)
        or "a background command or child task is still running",
        detail={"pending": list(observation.background_detail)},
    )


def plan_continuation(given: PlannerInput) -> ContinuationPlan:
    session_id, source = given.session_id, given.source
    run_id = source.run_id
    if isinstance(given.lineage, LineageError):
        error = given.lineage
        return park(session_id, run_id, error.code, error.message, detail={"runId": error.run_id})
    lineage = given.lineage
    immediate = lineage.prefixes[-1]
    if immediate.identity.session_id != session_id or immediate.identity.run_id != run_id:
        return park(
            session_id, run_id, ParkReason.RUNTIME_IDENTITY_MISMATCH, "ledger of another run"
        )
    replay = given.replay if given.replay is not None else build_replay_plan(lineage.prefixes)
    if isinstance(replay, ReplayBlocked):
        return _blocked_plan(given, lineage, immediate, replay)
    if given.claim_authority_error is not None:
        return park(
            session_id,
            run_id,
            ParkReason.CONTINUATION_AUTHORITY_UNAVAILABLE,
            given.claim_authority_error,
        )
    if given.existing_claim is not None:
        claim = given.existing_claim
        return park(
            session_id,
            run_id,
            ParkReason.CONTINUATION_ALREADY_EXISTS,
            "this interruption was already resumed",
            detail={
                "continuationClaimId": claim.claim_id,
                "continuationRunId": claim.target_run_id,
            },
        )
    return _accumulating_gates(given, lineage, replay, immediate)


_TAKES_FOLDER = DiagnosticCode.WORKSPACE_SETTLE_TAKES_FOLDER.value


def _answers_take_folder(lineage: Lineage, replay: ReplayBlocked) -> bool:
    """Whether settling every call that blocks the replay also takes the folder as it is now
    as the starting point (``settle_baseline``): each is a writing call of the interrupted run
    (the newest generation), which takes snapshots, and one the user can answer about (its
    outcome unknown, or a write recovery found not done; a write recovery parked otherwise is
    final). Then the files' park reason clears with the answer, and no decision about the files
    follows it."""
    if replay.reason is not SegmentBlockReason.TOOL_RECOVERY_UNSETTLED:
        return False
    if replay.segment_index != len(lineage.prefixes) - 1 or not replay.issues:
        return False
    events = lineage.prefixes[replay.segment_index].events
    return all(
        issue.tool_call_id is not None
        and issue.tool_name is not None
        and _answerable(issue)
        and takes_folder(issue.tool_name, events)
        for issue in replay.issues
    )


def _answerable(issue: SegmentIssue) -> bool:
    """The user can say whether the call ran (``settle``): its outcome is unknown, or it is a
    write recovery found not done ("it did not run" only)."""
    return issue.code == "pending_tool_result" or (
        issue.code == "tool_recovery_parked"
        and issue.detail.get(RESOLVER_REASON) == ResolverReason.RECONCILE_MATCHES_PRIOR_STATE.value
    )


def _blocked_plan(
    given: PlannerInput,
    lineage: Lineage,
    immediate: ImmutablePrefix,
    replay: ReplayBlocked,
) -> ContinuationPlan:
    """Unsettled tool state parks, and every other gate that can be judged without a replay
    still speaks (the files, the workspace, a permission, the run's ending), so the user sees
    every reason at once instead of one after the other. A command of the interrupted call that
    still runs is said first (it may still change files, and whether it ran cannot be settled
    until it ends; docs/design/recovery.md section 9)."""
    findings = _findings(Boundary(given, lineage, None, immediate))
    reasons = [_UNSETTLED_TO_REASON[replay.reason]]
    said = [
        PlanDiagnostic(
            issue.code,
            f"generation {replay.segment_index + 1}: {issue.message}",
            issue.event_id,
            issue.tool_call_id,
            issue.tool_name,
            dict(issue.detail),
        )
        for issue in replay.issues
    ]
    pending: list[PlanDiagnostic] = []
    for finding in findings:
        if finding.reason is ParkReason.BACKGROUND_OPERATION_PENDING:
            pending.append(finding.diagnostic)
            continue
        if finding.reason is not None and finding.reason not in reasons:
            reasons.append(finding.reason)
        said.append(finding.diagnostic)
    if pending:
        reasons.insert(0, ParkReason.BACKGROUND_OPERATION_PENDING)
    # (not a folder that is not shown to be the session's, or not there: an answer then
    # records no starting point, as ``maka settle`` says, and the files still need a decision)
    foreign = {ParkReason.WORKSPACE_IDENTITY_MISMATCH, ParkReason.WORKSPACE_FOLDER_MISSING}
    if (
        any(r in WORKSPACE_DECISION_REASONS for r in reasons)
        and foreign.isdisjoint(reasons)
        and _answers_take_folder(lineage, replay)
    ):
        # Named after the call when there is one (the timeline pins the note to its row).
        call = replay.issues[0] if len(replay.issues) == 1 else None
        said.append(
            PlanDiagnostic(
                _TAKES_FOLDER,
                "answering whether the interrupted calls ran also takes the folder as it is now "
                "as the new starting point; no decision about the files follows",
                tool_call_id=call.tool_call_id if call is not None else None,
                tool_name=call.tool_name if call is not None else None,
            )
        )
    return ContinuationPlan(
        given.session_id,
        given.source.run_id,
        tuple(reasons),
        (*pending, *said),
        restorable=given.restorable,
        restore_point=given.restore_point if given.restorable else None,
    )


@dataclass(frozen=True, slots=True)
class Boundary:
    """What the accumulating gates judge: the planner's input and the interrupted boundary
    (the immediate source's committed prefix and the lineage's replay; None when the replay is
    blocked by unsettled tool state: the gates that judge it are then skipped)."""

    given: PlannerInput
    lineage: Lineage
    replay: ReplayPlan | None
    immediate: ImmutablePrefix

    @property
    def events(self) -> tuple[RuntimeEvent, ...]:
        return self.immediate.events

    @property
    def generations(self) -> list[tuple[RuntimeEvent, ...]]:
        """Every generation's committed events, oldest first (the immediate source last)."""
        return [prefix.events for prefix in self.lineage.prefixes]


class Finding(NamedTuple):
    """One thing a gate found: a park reason with its diagnostic, or (``reason`` None) a
    diagnostic only. ``answered``: a workspace park the user's decision answers."""

    reason: ParkReason | None
    diagnostic: PlanDiagnostic
    answered: bool = False


BoundaryGate = Callable[[Boundary], Sequence[Finding]]


def _refusal(
    reason: ParkReason, message: str, event_id: str | None = None, **detail: Any
) -> Finding:
    return Finding(reason, PlanDiagnostic(reason.value, message, event_id, detail=detail))


def pending_permissions(b: Boundary) -> Sequence[Finding]:
    return [
        _refusal(
            ParkReason.PENDING_PERMISSION,
            "a permission request was never answered",
            request_event,
            requestId=request_id,
        )
        for request_event, request_id in open_permission_requests(b.events)
    ]


def offset_matches(b: Boundary) -> Sequence[Finding]:
    expected, actual = b.given.expected_high_water, b.immediate.last_event_seq
    if expected is None or expected == actual:
        return ()
    return [
        _refusal(
            ParkReason.RUNTIME_OFFSET_MISMATCH,
            "the committed history does not end where the checkpoint says",
            expectedRuntimeEventHighWater=expected,
            actualRuntimeEventHighWater=actual,
        )
    ]


def ledger_not_empty(b: Boundary) -> Sequence[Finding]:
    if b.events:
        return ()
    return [_refusal(ParkReason.RUNTIME_LEDGER_EMPTY, "the run has no events")]


def _foreign_event(events: tuple[RuntimeEvent, ...]) -> RuntimeEvent | None:
    """The first event whose four ids differ from the first event's."""
    if not events:
        return None
    first = events[0]
    key = (first["sessionId"], first["invocationId"], first["runId"], first["turnId"])
    for event in events:
        if (event["sessionId"], event["invocationId"], event["runId"], event["turnId"]) != key:
            return event
    return None


def one_run_identity(b: Boundary) -> Sequence[Finding]:
    foreign = _foreign_event(b.events)
    if foreign is None:
        return ()
    return [
        _refusal(
            ParkReason.RUNTIME_IDENTITY_MISMATCH,
            "the ledger mixes events of different runs",
            foreign["id"],
        )
    ]


def identity_fresh(b: Boundary) -> Sequence[Finding]:
    """The new run's ids are none of the lineage's (judged when the run has events)."""
    if not b.events:
        return ()
    prefixes = b.lineage.prefixes
    used = {p.identity.invocation_id for p in prefixes} | {p.identity.run_id for p in prefixes}
    used |= {p.identity.turn_id for p in prefixes}
    ids = b.given.ids
    if not {ids.invocation_id, ids.run_id, ids.turn_id} & used:
        return ()
    return [
        _refusal(ParkReason.CONTINUATION_IDENTITY_REUSED, "a new run would reuse an old identity")
    ]


def terminal_consistent(b: Boundary) -> Sequence[Finding]:
    if _consistent_terminal(b.given.source, b.events) is not None:
        return ()
    return [
        _refusal(
            ParkReason.TERMINAL_REPAIR_FAILED, "the run's recorded ending and its header disagree"
        )
    ]


def workspace_location(b: Boundary) -> Sequence[Finding]:
    """A moved folder is a diagnostic only: it is still the same workspace."""
    source, observation = b.given.source, b.given.observation
    if _normalise_path(source.cwd) == _normalise_path(observation.workspace_path):
        return ()
    code = DiagnosticCode.WORKSPACE_LOCATION_CHANGED.value
    detail = {"sourceCwd": source.cwd, "currentCwd": observation.workspace_path}
    message = "the workspace folder moved; it is still the same workspace"
    return [Finding(None, PlanDiagnostic(code, message, detail=detail))]


def workspace_identity_same(b: Boundary) -> Sequence[Finding]:
    recorded, current = b.given.source.workspace_identity, b.given.observation.workspace_identity
    if recorded == current:
        return ()
    if not current:  # (observed without a marker: read, never made, when a plan looks)
        return [
            _refusal(
                ParkReason.WORKSPACE_IDENTITY_MISMATCH,
                "the folder has no workspace marker (.maka/workspace.json): it was deleted "
                "(git clean -fdx deletes .maka), so the folder cannot be shown to be the "
                "workspace the session ran in",
                sourceWorkspaceIdentity=recorded,
                markerMissing=True,
            )
        ]
    return [
        _refusal(
            ParkReason.WORKSPACE_IDENTITY_MISMATCH,
            "the folder is not the same workspace the session ran in",
            sourceWorkspaceIdentity=recorded,
            currentWorkspaceIdentity=current,
        )
    ]


def background_settled(b: Boundary) -> Sequence[Finding]:
    pending = _background_pending(b.given.observation)
    return () if pending is None else [Finding(ParkReason.BACKGROUND_OPERATION_PENDING, pending)]


def tools_available(b: Boundary) -> Sequence[Finding]:
    if b.replay is None:
        return ()
    used = {item.name for item in b.replay.provider_items if item.kind is ItemKind.TOOL_CALL}
    missing = sorted(used - set(b.given.observation.tool_names))
    if not missing:
        return ()
    return [
        _refusal(
            ParkReason.TOOL_CATALOG_MISMATCH,
            "a tool used in this session is no longer available",
            unavailableToolNames=missing,
        )
    ]


def _replay_judged(b: Boundary) -> ReplayPlan | None:
    """The replay, when the provider history is judged: for a ledger of one run with events
    whose replay is not blocked."""
    if b.replay is None or not b.events or _foreign_event(b.events) is not None:
        return None
    return b.replay


def provider_head(b: Boundary) -> Sequence[Finding]:
    replay = _replay_judged(b)
    if replay is None:
        return ()
    items = replay.provider_items
    first_role = items[0].role if items else None
    if first_role == "user":
        return ()
    return [
        _refusal(
            ParkReason.PROVIDER_RESUME_HEAD_UNSUPPORTED,
            "the history does not start with a user message",
            items[0].event_id if items else None,
            firstRole=first_role,
        )
    ]


def provider_boundary(b: Boundary) -> Sequence[Finding]:
    replay = _replay_judged(b)
    if replay is None:
        return ()
    items = replay.provider_items
    last_role = items[-1].role if items else None
    if last_role in ("user", "tool"):
        return ()
    return [
        _refusal(
            ParkReason.PROVIDER_RESUME_BOUNDARY_UNSUPPORTED,
            "the history does not end at a user message or tool result",
            items[-1].event_id if items else None,
            lastRole=last_role,
        )
    ]


CONTEXT_OVERFLOW_REASON = "provider_context_overflow"
"""The ``reason`` of an ending's error content when the model server said the history did not
fit its context window (``ProviderErrorCode.CONTEXT_OVERFLOW``)."""


def _overflowed(events: tuple[RuntimeEvent, ...]) -> str | None:
    """The id of the event that records the run's context overflow: the host notice that
    leaves the turn out (``stateDelta.providerHistoryOmits``, committed before the ending, so a
    kill before the ending still shows it), or an ending whose error names the overflow (when
    there was nothing to leave out)."""
    for event in reversed(events):
        delta = (event.get("actions") or {}).get("stateDelta") or {}
        if event["author"] == "host" and "providerHistoryOmits" in delta:
            return str(event["id"])
        content = event.get("content")
        if (
            is_terminal(event)
            and content is not None
            and content["kind"] == "error"
            and content.get("reason") == CONTEXT_OVERFLOW_REASON
        ):
            return str(event["id"])
    return None


def history_fits(b: Boundary) -> Sequence[Finding]:
    """A run that ended because its history did not fit the model's context window is not
    resumed: the continuation would send that history again. A new message (the oversized turn
    left out) is the way on."""
    found = _overflowed(b.events)
    if found is None:
        return ()
    ending = next((event for event in reversed(b.events) if is_terminal(event)), None)
    content = ending.get("content") if ending is not None else None
    # The server said the request overflowed (or the ending is not there to say otherwise).
    said = (
        content is None
        or content["kind"] != "error"
        or content.get("reason") == CONTEXT_OVERFLOW_REASON
    )
    why = (
        "the run stopped because the conversation did not fit the model's context window"
        if said
        # The server answered with no event at all: the likeliest cause, never stated as fact.
        else "the model server refused the run's last request without an answer (most often "
        "a conversation longer than the model's context window)"
    )
    return [
        _refusal(
            ParkReason.PROVIDER_HISTORY_TOO_LONG, f"{why}; resuming would send it again", found
        )
    ]


def workspace_checkpoint(b: Boundary) -> Sequence[Finding]:
    """The workspace checkpoint gate (``workspace_gate``); a park the user's decision answers
    stays as a diagnostic only."""
    given = b.given
    answered = ANSWERED_BY[given.decision] if given.decision else frozenset()
    if given.decision is WorkspaceDecision.RESTORE and not given.restorable:
        answered = frozenset()  # no snapshot to copy: the park stands
    findings: list[Finding] = []
    basis = admission_basis(b.generations, given.source.workspace_identity)
    for finding in workspace_gate(b.events, given.checkpoint_evidence, basis, b.generations):
        diagnostic = PlanDiagnostic(
            finding.code, finding.message, finding.event_id, detail=finding.detail
        )
        if finding.reason is not None and finding.reason in answered:
            findings.append(Finding(None, diagnostic, answered=True))
        else:
            findings.append(Finding(finding.reason, diagnostic))
    return findings


BOUNDARY_GATES: tuple[BoundaryGate, ...] = (
    pending_permissions,
    offset_matches,
    ledger_not_empty,
    one_run_identity,
    identity_fresh,
    terminal_consistent,
    workspace_location,
    workspace_identity_same,
    background_settled,
    tools_available,
    provider_head,
    provider_boundary,
    history_fits,
    workspace_checkpoint,
)
"""The gates after the early ones, in order; they accumulate, so a user sees every reason."""


def _findings(boundary: Boundary) -> list[Finding]:
    return [finding for gate in BOUNDARY_GATES for finding in gate(boundary)]


def _accumulating_gates(
    given: PlannerInput, lineage: Lineage, replay: ReplayPlan, immediate: ImmutablePrefix
) -> ContinuationPlan:
    boundary = Boundary(given, lineage, replay, immediate)
    reasons: list[ParkReason] = []
    diagnostics: list[PlanDiagnostic] = []
    decided = False
    verified_tree: str | None = None
    observation = given.observation
    for finding in _findings(boundary):
        if finding.reason is not None and finding.reason not in reasons:
            reasons.append(finding.reason)
        diagnostics.append(finding.diagnostic)
        decided = decided or finding.answered
        verified = finding.diagnostic.code == DiagnosticCode.WORKSPACE_VERIFIED.value
        if verified and finding.reason is None and observation.workspace_tree:
            verified_tree = observation.workspace_tree.tree_id
    terminal = _consistent_terminal(given.source, immediate.events)
    if reasons or terminal is None:
        diagnostics.extend(_restore_point_note(given, tuple(reasons)))
        return ContinuationPlan(
            given.session_id,
            given.source.run_id,
            tuple(reasons),
            tuple(diagnostics),
            restorable=given.restorable,
            restore_point=given.restore_point if given.restorable else None,
        )
    details = ContinuationDetails(
        ids=given.ids,
        source=given.source,
        source_high_water=immediate.last_event_seq,
        source_prefix_digest=immediate.prefix_digest,
        source_terminal_event_id=terminal,
        boundary_digest=replay.manifest_digest,
        provider_replay_digest=replay.provider_replay_digest,
        runtime_context=replay.runtime_context,
        provider_items=replay.provider_items,
        lineage_run_ids=tuple(p.identity.run_id for p in lineage.prefixes),
        lineage_high_waters=tuple(p.last_event_seq for p in lineage.prefixes),
        lineage_digests=tuple(p.prefix_digest for p in lineage.prefixes),
        workspace_identity=observation.workspace_identity,
        tool_names=tuple(sorted(set(observation.tool_names))),
        workspace_tree_id=verified_tree,
        **_decision_fields(given, boundary, decided),
    )
    return ContinuationPlan(given.session_id, given.source.run_id, (), tuple(diagnostics), details)


def _restore_point_note(
    given: PlannerInput, reasons: tuple[ParkReason, ...]
) -> list[PlanDiagnostic]:
    """When a restored copy is offered and would not be the folder at the stop: which point of
    the history it would hold (the offer says so on every surface)."""
    point = given.restore_point
    offered = offered_decisions(reasons, restorable=given.restorable)
    if point is None or point.kind == AT_STOP or "isolated_restore" not in offered:
        return []
    return [
        PlanDiagnostic(
            DiagnosticCode.WORKSPACE_RESTORE_POINT.value,
            f"a restored copy would hold {point.reflects}",
            detail={"checkpointRef": point.checkpoint.get("checkpointRef"), **point.fields},
        )
    ]


def _decision_fields(given: PlannerInput, b: Boundary, decided: bool) -> dict[str, Any]:
    boundary = boundary_checkpoint(b.events)
    newest = boundary.checkpoint
    if newest is None:  # stopped before its first snapshot: the one its admission was based on
        basis = admission_basis(b.generations, given.source.workspace_identity)
        newest = basis.checkpoint if basis is not None else None
    epoch = 1
    previous: str | None = None
    if newest is not None:
        epoch = int(newest.get("workspaceEpoch") or 1)
        previous = str(newest.get("checkpointRef") or "") or None
    if not decided:
        return {"workspace_epoch": epoch}
    fields: dict[str, Any] = {
        "workspace_epoch": epoch + 1,
        "workspace_decision": given.decision,
        "previous_checkpoint_ref": previous,
        "decision_changes": given.decision_changes,
    }
    if given.decision is WorkspaceDecision.RESTORE:
        fields["restore_to"] = given.restore_to
        point = given.restore_point
        fields["restore_checkpoint"] = point.checkpoint if point else newest
        fields["restore_fields"] = dict(point.fields) if point else {}
        fields["restore_subjects"] = dict(point.subjects) if point else {}
    return fields


def _consistent_terminal(header: RunHeader, events: tuple[RuntimeEvent, ...]) -> str | None:
    """The id of the run's single terminal event when header and ledger agree on the ending."""
    if header.status not in TERMINAL_RUN_STATUSES:
        return None
    positions = [index for index, event in enumerate(events) if is_terminal(event)]
    # The terminal event is the last one, save the user's attestations recorded after it
    # (docs/design/recovery.md section 8: the only facts a closed run accepts).
    if len(positions) != 1 or not attestation_suffix_ok(events[positions[0] + 1 :]):
        return None
    terminal = events[positions[0]]
    status = EVENT_STATUS_TO_RUN.get(terminal.get("status", ""))
    if status is None or status != header.status:
        return None
    if status is RunStatus.FAILED:
        delta = terminal.get("actions", {}).get("stateDelta", {})
        failure = delta.get("failureClass")
        if failure is None or failure != header.failure_class:
            return None
    if status is RunStatus.CANCELLED and header.failure_class not in (
        None,
        FailureClass.CANCELLED_BY_USER.value,
    ):
        return None
    return terminal["id"]


def _normalise_path(path: str) -> str:
    text = path.replace("\\", "/").rstrip("/")
    if len(text) >= 2 and text[1] == ":":
        text = text.lower()
    return text
