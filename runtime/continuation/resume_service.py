"""The Safe resume seam: ``plan_latest(session_id)`` and ``execute(plan)``.

One implementation serves the desktop banner, ``maka plan`` / ``maka resume``, ``/resume`` in the
TUI and automatic resume at startup. Planning reads committed facts and the safety inspector's
observation and never writes. Execution revalidates everything the plan pinned, then admits the
continuation in one durable transaction (claim + target header + ``continuationStart`` first
event) and only then calls the provider, with the replayed history and no new user message.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, cast

from runtime.base.checkpoint_mode import decide_mode
from runtime.continuation.admission_basis import AdmissionBasis, admission_basis
from runtime.continuation.checkpoint_evidence import (
    abandoned_restores,
    changes_since_snapshot,
    checkpoint_evidence,
    comparable_snapshot,
    restore_point,
    uncompared_damage,
)
from runtime.continuation.continuation_planner import (
    ContinuationDetails,
    ContinuationPlan,
    FreshIds,
    PlanDiagnostic,
    PlannerInput,
    SafetyObservation,
    SessionFolderMissing,
    observation_problem,
    plan_continuation,
)
from runtime.continuation.continuation_replay import ReplayBlocked, ReplayPlan, build_replay_plan
from runtime.continuation.lifecycle_log import LifecycleLog
from runtime.continuation.lineage_reader import Lineage, LineageStore, read_lineage
from runtime.continuation.presence_memo import PresenceMemo
from runtime.continuation.resume_gates import (
    LatestRun,
    busy_elsewhere_words,
    first_park,
    first_refusal,
)
from runtime.continuation.workspace_decision import WorkspaceDecision
from runtime.continuation.workspace_transition import (
    RestoreFailed,
    default_restore_path,
    materialize_restore,
)
from runtime.ledger.attestation import attestation_suffix_ok
from runtime.ledger.checkpoint_ports import (
    CHECKPOINT_PROTOCOL,
    CheckpointCarrier,
    CheckpointError,
    TreeChange,
    changed_paths_summary,
    checkpoint_ref,
)
from runtime.ledger.codes import DiagnosticCode, ParkReason, RevalidationCode
from runtime.ledger.continuation_ports import ContinuationAdmissionWriter, ContinuationClaim
from runtime.ledger.crash_points import CrashPoint, failpoint
from runtime.ledger.event_model import RuntimeEvent, RuntimeProtocol
from runtime.ledger.event_model import WorkspaceBaseline as WorkspaceBaselineFact
from runtime.ledger.event_model import WorkspaceTransition as WorkspaceTransitionFact
from runtime.ledger.fact_events import EventIdentity, continuation_start_event
from runtime.ledger.ledger_errors import LedgerError
from runtime.ledger.store_ports import (
    RunHeader,
    RunStatus,
    SessionRecord,
    StoredEvent,
)
from runtime.ledger.workspace_facts import (
    FOLDER_HOLDS_CODES,
    lineage_transitions,
    skipped_paths,
    uncaptured_decision,
)


class ResumeStore(LineageStore, ContinuationAdmissionWriter, Protocol):
    def list_session_runs(self, session_id: str) -> Sequence[RunHeader]: ...

    def get_session(self, session_id: str) -> SessionRecord | None: ...

    def read_owner_epoch(self) -> int: ...


class SafetyInspector(Protocol):
    def observe(self, session_id: str, cwd: str) -> SafetyObservation:
        """Raise any exception when the workspace, tools or background work cannot be read."""
        ...


class ContinuationRunner(Protocol):
    def run_continuation(
        self, target: RunHeader, details: ContinuationDetails, start_event: RuntimeEvent
    ) -> RunStatus:
        """Drive the admitted target run (provider, tools, ending); returns its final status."""
        ...


class ResumeRefused(LedgerError):
    """Execution refused before any provider call; ``code`` is a revalidation or park code."""


@dataclass(frozen=True, slots=True)
class ResumeResult:
    target_run_id: str
    target_turn_id: str
    status: RunStatus


@dataclass(slots=True)
class _PlanCall:
    """One planning call's own state (a service may plan for several sessions at once)."""

    restore_to: str | None
    lineage_events: list[RuntimeEvent] | None = None
    # A rebaseline is offered and there is no snapshot to compare the current files with.
    rebaseline_uncompared: bool = False
    # why: a check found the last snapshot damaged; whether it moved objects of it aside
    uncompared_damage: tuple[str | None, bool] = (None, False)
    # A rebaseline is offered and the observation's capture of the folder was refused for what
    # it holds (its code and message): the rebaseline will go on without a snapshot.
    rebaseline_uncaptured: tuple[str, str] | None = None


def _fresh_ids(new_id: Callable[[], str]) -> FreshIds:
    """A continuation's ids, shaped as a first run's (``run_<hex>``, ``session_service``): a
    user comparing ``maka sessions``, ``maka timeline`` and ``maka plan`` sees one kind of id."""
    return FreshIds(
        invocation_id=f"inv_{new_id()}",
        run_id=f"run_{new_id()}",
        turn_id=f"turn_{new_id()}",
        claim_id=f"claim_{new_id()}",
        start_event_id=f"evt_start_{new_id()}",
    )


def _clonable(folder: str) -> bool:
    """Whether a restored copy of ``folder`` would be a clone of its Git repository: it has a
    ``.git``, and its HEAD names a commit (a repository with no commit yet is not cloned, so the
    plan must not promise it). Read from the files, without running Git: a HEAD naming a branch
    that has no ref (loose or packed) has no commit; a linked worktree's or a submodule's
    ``.git`` file is taken as cloneable (the clone itself still checks)."""
    git = os.path.join(folder, ".git")
    if not os.path.isdir(git) or os.path.islink(git):
        return os.path.lexists(git)
    try:
        with open(os.path.join(git, "HEAD"), encoding="utf-8", errors="replace") as handle:
            head = handle.read(4096).strip()
    except OSError:
        return True  # unreadable here: the clone tells
    if not head.startswith("ref: "):
        return bool(head)  # a detached HEAD names its commit
    ref = head[5:].strip()
    if os.path.isfile(os.path.join(git, *ref.split("/"))):
        return True
    try:
        with open(os.path.join(git, "packed-refs"), encoding="utf-8", errors="replace") as packed:
            return any(line.rstrip("\n").endswith(" " + ref) for line in packed)
    except OSError:
        return False


def _uncapturable(observation: SafetyObservation) -> tuple[str, str] | None:
    """The code and message of the observation's capture of the folder when it was refused for
    what the folder holds (a nested repository), read from the observation the plan already
    made; None otherwise (captured, not looked at, or another failure)."""
    tree = observation.workspace_tree
    if tree is None or tree.code not in FOLDER_HOLDS_CODES:
        return None
    problem = tree.problem or ""
    return str(tree.code), problem.removeprefix(f"{tree.code}: ") or str(tree.code)


class ResumeService:
    def __init__(
        self,
        store: ResumeStore,
        inspector: SafetyInspector | None,
        runner: ContinuationRunner | None,
        *,
        enabled: bool,
        now_ms: Callable[[], int],
        lifecycle: LifecycleLog | None = None,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex[:20],
        checkpoints: CheckpointCarrier | None = None,
    ) -> None:
        self._checkpoints = checkpoints
        self._store = store
        self._inspector = inspector
        self._runner = runner
        self._enabled = enabled
        self._now_ms = now_ms
        self._log = lifecycle
        self._new_id = new_id

    # ---- planning -----------------------------------------------------------------------------

    def plan_latest(
        self,
        session_id: str,
        *,
        automatic: bool = False,
        decision: WorkspaceDecision | None = None,
        restore_to: str | None = None,
    ) -> ContinuationPlan:
        """Plan the latest interruption; ``decision`` is the user's explicit way forward for a
        workspace park (docs/design/workspace.md section 4: never automatic); ``restore_to``: the
        folder a restored copy goes to (None: the default sibling)."""
        call = _PlanCall(restore_to)
        plan = self._plan_latest(session_id, None if automatic else decision, call)
        plan = self._with_workspace_notes(plan, call)
        if self._log is not None:
            self._log.plan(plan, automatic=automatic)
        return plan

    def _plan_latest(
        self, session_id: str, decision: WorkspaceDecision | None, call: _PlanCall
    ) -> ContinuationPlan:
        found = LatestRun(
            session_id, self._store, self._inspector, self._enabled, self._session_cwd
        )
        parked = first_park(found)
        if parked is not None:
            return parked
        source = found.source_header()
        observation = found.observation
        assert observation is not None, "the last gate observes the workspace"
        lineage = read_lineage(self._store, source)
        claim: ContinuationClaim | None = None
        authority_error: str | None = None
        replay: ReplayPlan | ReplayBlocked | None = None
        if isinstance(lineage, Lineage):
            replay = build_replay_plan(lineage.prefixes)
            try:
                if isinstance(replay, ReplayPlan):
                    claim = self._store.find_claim_by_boundary(replay.manifest_digest)
                if claim is None:
                    claim = self._store.find_claim_by_source(
                        source.run_id, lineage.prefixes[-1].last_event_seq
                    )
            except LedgerError as error:
                authority_error = str(error)
        evidence = None
        changes: tuple[TreeChange, ...] | None = None
        point = None
        basis: AdmissionBasis | None = None
        # One presence decision per snapshot for the whole plan (it walks every object).
        carrier = PresenceMemo(self._checkpoints) if self._checkpoints is not None else None
        if isinstance(lineage, Lineage):
            generations = [p.events for p in lineage.prefixes]
            point = restore_point(carrier, generations)
            basis = admission_basis(generations, source.workspace_identity)
            evidence = checkpoint_evidence(carrier, lineage.prefixes[-1].events, observation, basis)
            if decision is not None:
                changes = changes_since_snapshot(
                    carrier, lineage.prefixes[-1].events, observation, basis
                )
        plan = plan_continuation(
            PlannerInput(
                session_id=session_id,
                source=source,
                lineage=lineage,
                existing_claim=claim,
                claim_authority_error=authority_error,
                observation=observation,
                ids=_fresh_ids(self._new_id),
                replay=replay,
                checkpoint_evidence=evidence,
                decision=decision,
                decision_changes=changes,
                restorable=point is not None,
                restore_point=point,
                restore_to=call.restore_to,
            )
        )
        if isinstance(lineage, Lineage):
            call.lineage_events = [e for prefix in lineage.prefixes for e in prefix.events]
            if "rebaseline" in plan.workspace_options:
                last = lineage.prefixes[-1].events
                call.rebaseline_uncompared = (
                    comparable_snapshot(carrier, last, observation, basis) is None
                )
                if call.rebaseline_uncompared:
                    call.uncompared_damage = uncompared_damage(carrier, last)
                call.rebaseline_uncaptured = _uncapturable(observation)
        return plan

    def _with_workspace_notes(self, plan: ContinuationPlan, call: _PlanCall) -> ContinuationPlan:
        """The lineage's workspace decisions, and the restored copies a resume made but never
        started in (docs/design/workspace.md section 4: named, never reused). A copy is in use when
        any continuation of the session moved there, in this lineage or an earlier one (a new
        message starts a new lineage in the copy the session lives in)."""
        left = [
            PlanDiagnostic(
                DiagnosticCode.WORKSPACE_RESTORE_ABANDONED.value,
                f"a restored copy at {path} was made by a resume that did not start; "
                "it is left as it is and not used",
                detail={"path": path},
            )
            for path in abandoned_restores(self._store, self._checkpoints, plan.session_id)
        ]
        place = self._restore_place(plan, call)
        if place is not None:
            where, clone = place
            left.append(
                PlanDiagnostic(
                    DiagnosticCode.WORKSPACE_RESTORE_PLACE.value,
                    f"a restored copy would be made in a new folder, {where}"
                    + (", as a clone of the folder's Git repository" if clone else ""),
                    detail={"path": where, "clone": clone},
                )
            )
        if call.rebaseline_uncompared:
            damage, moved = call.uncompared_damage
            left.append(
                PlanDiagnostic(
                    DiagnosticCode.WORKSPACE_REBASELINE_UNCOMPARED.value,
                    (
                        "the current files cannot be compared with the snapshot"
                        if call.rebaseline_uncaptured is not None
                        else "there is no snapshot to compare the current files with"
                    )
                    + (f" (the last one is not whole: {damage})" if damage else "")
                    + ": continuing with them tells the model that files may have changed, not "
                    "which",
                    detail={"damagedAside": True} if moved else {},
                )
            )
        if call.rebaseline_uncaptured is not None:
            code, why = call.rebaseline_uncaptured
            left.append(
                PlanDiagnostic(
                    DiagnosticCode.WORKSPACE_REBASELINE_UNCAPTURED.value,
                    f"the current files cannot be snapshotted ({why}): continuing with them goes "
                    "on without a snapshot until that is removed",
                    detail={"reasonCode": code, "message": why},
                )
            )
        events = [*(call.lineage_events or ()), *self._resumed_by(plan)]
        transitions = tuple(lineage_transitions(events)) if events else ()
        if not left and not transitions:
            return plan
        return replace(plan, diagnostics=(*plan.diagnostics, *left), transitions=transitions)

    def _restore_place(self, plan: ContinuationPlan, call: _PlanCall) -> tuple[str, bool] | None:
        """Where a restored copy offered by ``plan`` would be made when the user names no
        folder (``default_restore_path``: beside the folder, or beside the Git repository it
        is inside), and whether it would be a clone of the folder's Git repository (the folder
        has a ``.git``, as the restore checks); None when no copy is offered or the user named
        the folder."""
        if "isolated_restore" not in plan.workspace_options or call.restore_to:
            return None
        try:
            session = self._store.get_session(plan.session_id)
        except LedgerError:
            return None
        if session is None or not session.cwd:
            return None
        return str(default_restore_path(session.cwd)), _clonable(session.cwd)

    def _resumed_by(self, plan: ContinuationPlan) -> list[RuntimeEvent]:
        """The first event of the continuation that already resumed this interruption (where
        its workspace decision is recorded, or in the failed capture the admission committed
        right after it), so an "already resumed" plan still says where the session went; none
        when it was not resumed or cannot be read."""
        run_ids = [
            str(d.detail["continuationRunId"])
            for d in plan.diagnostics
            if d.code == ParkReason.CONTINUATION_ALREADY_EXISTS.value
            and d.detail
            and d.detail.get("continuationRunId")
        ]
        try:
            return [
                row.event
                for run_id in run_ids
                if (rows := self._store.read_run_events(run_id))
                for index, row in enumerate(rows[:2])
                if index == 0 or uncaptured_decision(row.event.get("actions")) is not None
            ]
        except LedgerError:
            return []

    def _session_cwd(self, source: RunHeader) -> str:
        """Where the session lives now (the session record), else where the run ran."""
        session = self._store.get_session(source.session_id)
        return session.cwd if session is not None else source.cwd

    # ---- execution ----------------------------------------------------------------------------

    def execute(self, plan: ContinuationPlan, *, automatic: bool = False) -> ResumeResult:
        """Revalidate, admit, run. Raises ``ResumeRefused`` before any provider call."""
        details = plan.continuation
        if not plan.continues or details is None:
            raise ResumeRefused(ParkReason.RESUME_CANDIDATE_MISSING, "the plan does not continue")
        if self._runner is None or self._inspector is None:
            raise ResumeRefused(
                ParkReason.SAFETY_OBSERVATION_UNAVAILABLE, "no runner or safety inspector"
            )
        if self._log is not None:
            self._log.execution_started(plan, automatic=automatic)
        try:
            self._not_leased_elsewhere(plan.session_id)
            self._revalidate(details)
            target, start_event = self._admit(plan.session_id, details, automatic)
        except ResumeRefused as refusal:
            if self._log is not None:
                self._log.execution_failed(plan, str(refusal.code))
            raise
        try:
            status = self._runner.run_continuation(target, details, start_event)
        except Exception as error:
            if self._log is not None:
                self._log.execution_failed(plan, type(error).__name__)
            raise
        if self._log is not None:
            self._log.execution_completed(plan, status.value)
        return ResumeResult(target.run_id, target.turn_id, status)

    def _not_leased_elsewhere(self, session_id: str) -> None:
        """On a shared ledger (PostgreSQL), a session whose lease another host holds is busy
        there: refused before anything is written, naming that host, as a new message is (its
        first write would be refused with ``session_lease_lost``)."""
        busy = busy_elsewhere_words(self._store, session_id)
        if busy is not None:
            raise ResumeRefused(ParkReason.SESSION_BUSY, busy)

    def _revalidate(self, details: ContinuationDetails) -> None:
        try:
            self._revalidate_source(details)
        except LedgerError as error:
            if isinstance(error, ResumeRefused):
                raise
            raise ResumeRefused(
                RevalidationCode.SOURCE_LEDGER_IDENTITY_CHANGED,
                f"the source ledger can no longer be read as planned ({error.code}: "
                f"{error.message})",
            ) from error
        self._revalidate_safety(details)

    def _revalidate_source(self, details: ContinuationDetails) -> None:
        code = RevalidationCode
        source = self._store.read_run_header(details.source.run_id)
        if source is None or (source.session_id, source.invocation_id, source.turn_id) != (
            details.source.session_id,
            details.source.invocation_id,
            details.source.turn_id,
        ):
            raise ResumeRefused(code.SOURCE_IDENTITY_CHANGED, "the source run changed identity")
        rows = self._store.read_run_events(source.run_id)
        if len(rows) != details.source_high_water:
            raise ResumeRefused(
                code.SOURCE_HIGH_WATER_CHANGED, "the source run's committed history changed length"
            )
        identity = (source.session_id, source.invocation_id, source.run_id, source.turn_id)
        for row in rows:
            event = row.event
            if (event["sessionId"], event["invocationId"], event["runId"], event["turnId"]) != (
                identity
            ):
                raise ResumeRefused(
                    code.SOURCE_LEDGER_IDENTITY_CHANGED, "a foreign event is in the source ledger"
                )
        if (
            not _ends_at(rows, details.source_terminal_event_id)
            or source.status != details.source.status
        ):
            raise ResumeRefused(code.SOURCE_TERMINAL_CHANGED, "the source run's ending changed")
        lineage = read_lineage(self._store, source)
        if not isinstance(lineage, Lineage):
            raise ResumeRefused(code.SOURCE_IDENTITY_CHANGED, lineage.message)
        if (
            tuple(p.identity.run_id for p in lineage.prefixes) != details.lineage_run_ids
            or tuple(p.prefix_digest for p in lineage.prefixes) != details.lineage_digests
        ):
            raise ResumeRefused(code.SOURCE_IDENTITY_CHANGED, "a committed prefix changed")
        replay = build_replay_plan(lineage.prefixes)
        if (
            not isinstance(replay, ReplayPlan)
            or replay.manifest_digest != details.boundary_digest
            or replay.provider_replay_digest != details.provider_replay_digest
            or tuple(e["id"] for e in replay.runtime_context)
            != tuple(e["id"] for e in details.runtime_context)
        ):
            raise ResumeRefused(code.SOURCE_REPLAY_CHANGED, "the replayed history changed")

    def _revalidate_safety(self, details: ContinuationDetails) -> None:
        code = RevalidationCode
        source = details.source
        assert self._inspector is not None
        try:
            observation = self._inspector.observe(source.session_id, self._session_cwd(source))
        except SessionFolderMissing as missing:
            raise ResumeRefused(ParkReason.WORKSPACE_FOLDER_MISSING, str(missing)) from missing
        except Exception as error:
            raise ResumeRefused(
                ParkReason.SAFETY_OBSERVATION_UNAVAILABLE, observation_problem(error)
            ) from error
        if observation.workspace_identity != details.workspace_identity:
            raise ResumeRefused(code.WORKSPACE_IDENTITY_CHANGED, "the workspace changed")
        if not observation.background_settled:
            raise ResumeRefused(code.BACKGROUND_OPERATION_STARTED, "background work started")
        if tuple(sorted(set(observation.tool_names))) != details.tool_names:
            raise ResumeRefused(code.TOOL_CATALOG_CHANGED, "the tool catalog changed")
        if details.workspace_tree_id is not None:
            tree = observation.workspace_tree
            if tree is None or tree.tree_id != details.workspace_tree_id:
                raise ResumeRefused(
                    code.WORKSPACE_TREE_CHANGED,
                    "files in the folder changed after the plan verified them",
                )
        # The continuation runs in the folder now: its marker is tidied as a turn's is (an
        # older version's moved into ``.maka``); looking, the plan wrote nothing there.
        tidy = getattr(self._inspector, "tidy_marker", None)
        if callable(tidy):
            tidy(self._session_cwd(source))

    def _admit(
        self, session_id: str, details: ContinuationDetails, automatic: bool
    ) -> tuple[RunHeader, RuntimeEvent]:
        ids = details.ids
        source = details.source
        now = self._now_ms()
        refusal = first_refusal(details, self._checkpoints)
        if refusal is not None:
            raise ResumeRefused(refusal.code, refusal.message)
        baseline, uncaptured = self._baseline(session_id, details, now)
        transition = self._transition(session_id, details, now)
        cwd = self._session_cwd(source)  # where it runs: the session's folder, maybe moved
        workspace = details.workspace_identity
        if transition is not None:  # the restored copy, backed by the transition fact
            cwd, workspace = transition["toPath"], transition["toIdentity"]
        source_record = {
            "protocol": "continuation_source_v2",
            "claimId": ids.claim_id,
            "boundaryDigest": details.boundary_digest,
            "sourceInvocationId": source.invocation_id,
            "sourceRunId": source.run_id,
            "sourceTurnId": source.turn_id,
            "sourceRuntimeEventHighWater": details.source_high_water,
            "sourcePrefixDigest": details.source_prefix_digest,
            "providerReplayDigest": details.provider_replay_digest,
            "automatic": automatic,
        }
        target = RunHeader(
            run_id=ids.run_id,
            session_id=session_id,
            invocation_id=ids.invocation_id,
            turn_id=ids.turn_id,
            status=RunStatus.CREATED,
            cwd=cwd,
            owner_epoch=self._store.read_owner_epoch(),
            created_at=now,
            updated_at=now,
            workspace_identity=workspace,
            parent_run_id=source.run_id,
            continuation_source=source_record,
        )
        start_event = continuation_start_event(
            EventIdentity(session_id, ids.invocation_id, ids.run_id, ids.turn_id),
            ids.start_event_id,
            now,
            runtime_protocol=self._start_protocol(cwd, workspace),
            claim_id=ids.claim_id,
            boundary_digest=details.boundary_digest,
            source=EventIdentity(session_id, source.invocation_id, source.run_id, source.turn_id),
            source_high_water=details.source_high_water,
            source_prefix_digest=details.source_prefix_digest,
            provider_replay_digest=details.provider_replay_digest,
            baseline=cast(WorkspaceBaselineFact | None, baseline),
            transition=cast(WorkspaceTransitionFact | None, transition),
        )
        claim = ContinuationClaim(
            claim_id=ids.claim_id,
            session_id=session_id,
            boundary_digest=details.boundary_digest,
            source_run_id=source.run_id,
            source_high_water=details.source_high_water,
            source_prefix_digest=details.source_prefix_digest,
            source_terminal_event_id=details.source_terminal_event_id,
            target_run_id=ids.run_id,
            start_event_id=ids.start_event_id,
            provider_replay_digest=details.provider_replay_digest,
            automatic=automatic,
            created_at=now,
        )
        try:
            if uncaptured is None:
                self._store.admit_continuation(claim, target, start_event)
            else:
                fact = self._uncaptured_fact(target, uncaptured, now)
                self._store.admit_continuation(claim, target, start_event, facts=(fact,))
        except LedgerError as error:
            raise ResumeRefused(error.code, error.message) from error
        return target, start_event

    def _baseline(
        self, session_id: str, details: ContinuationDetails, now: int
    ) -> tuple[dict[str, Any] | None, CheckpointError | None]:
        """For a rebaseline: capture the folder as it is now (the artifact, before the fact)
        and the ``workspaceBaseline`` fact the admission transaction commits. A capture refused
        for what the folder holds (a nested repository: ``FOLDER_HOLDS_CODES``) does not refuse
        the user's way on: no baseline, and the refusal, which the admission records as the
        continuation's failed capture carrying the decision (as a run goes on without a
        snapshot when its capture is refused so). An unreadable folder or a Git failure still
        refuses: the files could not be looked at, so nothing is decided about them."""
        if details.workspace_decision is not WorkspaceDecision.REBASELINE:
            return None, None
        assert self._checkpoints is not None, "an admission gate checked it"
        folder = Path(os.path.realpath(self._session_cwd(details.source)))
        ref = checkpoint_ref(session_id, details.ids.run_id, 0)
        try:
            snapshot = self._checkpoints.capture(
                folder, details.workspace_identity, ref, f"maka baseline {ref}"
            )
            if not self._checkpoints.has_snapshot(
                details.workspace_identity, snapshot.commit_id, snapshot.tree_id
            ):
                # Objects the store's index cache names were removed by hand: the user's way on
                # must not be a snapshot that is missing parts again, so capture it afresh.
                snapshot = self._checkpoints.capture(
                    folder,
                    details.workspace_identity,
                    ref,
                    f"maka baseline {ref}",
                    rebuild_index=True,
                )
        except CheckpointError as error:
            if str(error.code) in FOLDER_HOLDS_CODES:
                return None, error
            message = f"the files could not be captured: {error.message}"
            raise ResumeRefused(error.code, message) from error
        # The artifact exists, its fact does not: an orphan ref until the admission commits.
        failpoint(CrashPoint.AFTER_REBASELINE_CAPTURED)
        changes = details.decision_changes
        body: dict[str, Any] = {
            "protocol": "workspace_baseline_v1",
            "workspaceIdentity": details.workspace_identity,
            "workspaceEpoch": details.workspace_epoch,
            "checkpointRef": snapshot.ref,
            "commitId": snapshot.commit_id,
            "treeId": snapshot.tree_id,
            "policyHash": snapshot.policy_hash,
            **skipped_paths(snapshot.skipped),
            **changed_paths_summary(changes or ()),
            "compared": changes is not None,
            "decidedBy": "local_user",
            "decidedAt": now,
        }
        if details.previous_checkpoint_ref:
            body["previousCheckpointRef"] = details.previous_checkpoint_ref
        return body, None

    def _uncaptured_fact(
        self, target: RunHeader, refused: CheckpointError, now: int
    ) -> RuntimeEvent:
        """The continuation's failed capture of the files the user chose to continue with,
        recording that decision (``decidedBy``, ``decidedAt``): committed in the admission
        transaction right after the start event, pinned to it (``runtimeHighWater`` 1). Its
        number is 0, the rebaseline capture's (``checkpoint_ref(..., 0)``); a run's own
        captures count from 1."""
        body: dict[str, Any] = {
            "protocol": CHECKPOINT_PROTOCOL,
            "workspaceIdentity": target.workspace_identity,
            "runtimeHighWater": 1,
            "reasonCode": str(refused.code),
            "message": refused.message[:500],
            "decidedBy": "local_user",
            "decidedAt": now,
        }
        return cast(
            RuntimeEvent,
            {
                "id": f"{target.run_id}_ckpt0000",
                "sessionId": target.session_id,
                "invocationId": target.invocation_id,
                "runId": target.run_id,
                "turnId": target.turn_id,
                "ts": now,
                "partial": False,
                "role": "system",
                "author": "system",
                "modelVisibility": "hidden",
                "actions": {"workspaceCheckpointFailed": body},
            },
        )

    def _transition(
        self, session_id: str, details: ContinuationDetails, now: int
    ) -> dict[str, Any] | None:
        """For a restore: the copy, made before the admission; the transition fact naming it."""
        if details.workspace_decision is not WorkspaceDecision.RESTORE:
            return None
        assert self._checkpoints is not None, "an admission gate checked it"
        assert details.restore_checkpoint is not None, "an admission gate checked it"
        try:
            return materialize_restore(
                self._checkpoints,
                session_id=session_id,
                from_identity=details.workspace_identity,
                from_path=self._session_cwd(details.source),
                checkpoint=details.restore_checkpoint,
                restore_to=details.restore_to,
                epoch=details.workspace_epoch,
                now=now,
                point_fields=details.restore_fields,
            )
        except RestoreFailed as failed:
            raise ResumeRefused(failed.code, failed.message) from None

    def _start_protocol(self, cwd: str, workspace: str) -> RuntimeProtocol:
        """The continuation's T1 marker, declaring its checkpoint mode when there is a carrier."""
        protocol: dict[str, Any] = {"toolBoundary": "t1_after_preflight_v1"}
        if self._checkpoints is not None:
            folder = Path(os.path.realpath(cwd))
            mode = decide_mode(self._checkpoints, folder, workspace)
            protocol["workspaceCheckpoints"] = mode.to_json()
        return cast(RuntimeProtocol, protocol)


def _ends_at(rows: Sequence[StoredEvent], terminal_event_id: str) -> bool:
    """The rows end with that terminal event, or with it and the user's attestations recorded
    after it (docs/design/recovery.md section 8)."""
    for index in range(len(rows) - 1, -1, -1):
        if rows[index].event["id"] == terminal_event_id:
            return attestation_suffix_ok([row.event for row in rows[index + 1 :]])
    return False
