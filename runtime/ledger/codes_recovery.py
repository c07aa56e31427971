"""Recovery's and Safe resume's codes: observations, resolver results and reasons,
settlements, plan statuses, diagnostics, park reasons and revalidation.

Part of ``runtime/ledger/codes.py`` (import the codes from there): append-only, never rename a
member or reuse a value for another meaning."""

from __future__ import annotations

from enum import StrEnum


class ReconcileObservation(StrEnum):
    MATCHES_EXPECTED_STATE = "matches_expected_state"
    MATCHES_PRIOR_STATE = "matches_prior_state"
    DIVERGED = "diverged"
    UNREADABLE = "unreadable"
    # The user's attestation (schema ``user_attestation_v1`` only,
    # docs/design/recovery.md section 8).
    USER_ATTESTED_RAN = "user_attested_ran"
    USER_ATTESTED_NOT_RUN = "user_attested_not_run"


class RecoveryDisposition(StrEnum):
    COMPLETED = "completed"
    PARKED = "parked"


class ResolverStatus(StrEnum):
    COMPLETED = "completed"
    PARKED = "parked"
    DEFINITELY_NOT_DISPATCHED = "definitely_not_dispatched"
    INDETERMINATE = "indeterminate"
    CORRUPTION = "corruption"


class ResolverReason(StrEnum):
    MATCHING_RESPONSE = "matching_response"
    RECOVERY_BUNDLE_COMPLETED = "recovery_bundle_completed"
    DISPATCH_WITHOUT_RESPONSE = "dispatch_without_response"
    NEW_PROTOCOL_BEFORE_DISPATCH = "new_protocol_before_dispatch"
    LEGACY_DISPATCH_UNKNOWN = "legacy_dispatch_unknown"
    ORPHAN_DISPATCH = "orphan_dispatch"
    ORPHAN_RESPONSE = "orphan_response"
    DUPLICATE_CALL = "duplicate_call"
    DUPLICATE_OPERATION = "duplicate_operation"
    DUPLICATE_DISPATCH = "duplicate_dispatch"
    DUPLICATE_RESPONSE = "duplicate_response"
    CANONICAL_ARGS_HASH_CONFLICT = "canonical_args_hash_conflict"
    IDENTITY_CONFLICT = "identity_conflict"
    EVENT_ORDER_CONFLICT = "event_order_conflict"
    RECOVERY_FACT_CORRUPTION = "recovery_fact_corruption"
    RECONCILE_MATCHES_PRIOR_STATE = "reconcile_matches_prior_state"
    RECONCILE_DIVERGED = "reconcile_diverged"
    RECONCILE_UNREADABLE = "reconcile_unreadable"
    USER_ATTESTED_RAN = "user_attested_ran"
    USER_ATTESTED_NOT_RUN = "user_attested_not_run"


class SettlementOrigin(StrEnum):
    NORMAL_T2 = "normal_t2"
    PRE_T1_SYNTHETIC = "pre_t1_synthetic"
    RECOVERY_BUNDLE = "recovery_bundle"
    USER_ATTESTATION = "user_attestation"


class OperationStatus(StrEnum):
    """Phase 0 ResumePlan operation statuses."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INDETERMINATE = "indeterminate"
    NOT_DISPATCHED = "not_dispatched"
    PARKED = "parked"
    CORRUPTION = "corruption"


class Disposition(StrEnum):
    SAFE_REPLAY = "safe_replay"
    BLOCKED = "blocked"


class DiagnosticCode(StrEnum):
    """Phase 0 diagnostics (plus the diagnostic-only ``workspace_location_changed``)."""

    RUNTIME_OFFSET_MISMATCH = "runtime_offset_mismatch"
    PENDING_TOOL_RESULT = "pending_tool_result"
    TOOL_NOT_DISPATCHED = "tool_not_dispatched"
    TOOL_RECOVERY_PARKED = "tool_recovery_parked"
    TOOL_RECOVERY_CORRUPTION = "tool_recovery_corruption"
    TOOL_LEDGER_CORRUPTION = "tool_ledger_corruption"
    DUPLICATE_EVENT_ID = "duplicate_event_id"
    SEMANTIC_LANE_CONFLICT = "semantic_lane_conflict"
    PROTOCOL_MARKER_INVALID = "protocol_marker_invalid"
    UNMATCHED_TOOL_RESULT = "unmatched_tool_result"
    TOOL_NAME_MISMATCH = "tool_name_mismatch"
    WORKSPACE_LOCATION_CHANGED = "workspace_location_changed"
    # Workspace checkpoints (docs/design/workspace.md section 3), diagnostic only.
    WORKSPACE_VERIFIED = "workspace_verified"
    WORKSPACE_CHECKPOINT_UNAVAILABLE = "workspace_checkpoint_unavailable"
    # A restored copy made by a resume that never committed its transition
    # (docs/design/workspace.md 4).
    WORKSPACE_RESTORE_ABANDONED = "workspace_restore_abandoned"
    WORKSPACE_CHECKPOINTS_NOT_CARRIED = "workspace_checkpoints_not_carried"
    # A kept snapshot whose ref is gone while its objects are not (``maka doctor``, a note):
    # retention names it again before it prunes.
    WORKSPACE_CHECKPOINT_UNNAMED = "workspace_checkpoint_unnamed"
    # A snapshot store still reading objects from its folder's Git repository after a command
    # was killed before copying them in (``maka doctor``, a note): the next command copies them.
    WORKSPACE_STORE_BORROWING = "workspace_store_borrowing"
    # A restored copy would not be the folder at the stop (a stale, failed or missing snapshot):
    # what it would hold instead (docs/design/workspace.md 4).
    WORKSPACE_RESTORE_POINT = "workspace_restore_point"
    # A restored copy is offered: the new folder it would be made in without one of the user's
    # choosing (docs/design/workspace.md 4), so every surface names the place, not a pattern.
    WORKSPACE_RESTORE_PLACE = "workspace_restore_place"
    # The calls a park asks about are writing calls of a run that takes snapshots: answering
    # them also takes the folder as it is now as the starting point (docs/design/workspace.md
    # 3), so no decision about the files follows the answer.
    WORKSPACE_SETTLE_TAKES_FOLDER = "workspace_settle_takes_folder"
    # Continuing with the current files is offered and no snapshot is left to compare them
    # with: the model is told that files may have changed, not which (docs/design/workspace.md 4).
    WORKSPACE_REBASELINE_UNCOMPARED = "workspace_rebaseline_uncompared"
    # Continuing with the current files is offered and the folder cannot be snapshotted as it
    # stands (a nested repository, named in the note): the continuation goes on without a
    # snapshot until that is removed (docs/design/workspace.md 4).
    WORKSPACE_REBASELINE_UNCAPTURED = "workspace_rebaseline_uncaptured"


class ParkReason(StrEnum):
    """Resume park (rejection) reasons: what the banner, ``maka resume`` and ``/resume`` show."""

    RESUME_FEATURE_DISABLED = "resume_feature_disabled"
    RESUME_CANDIDATE_MISSING = "resume_candidate_missing"
    SESSION_BUSY = "session_busy"
    CONTINUATION_ALREADY_EXISTS = "continuation_already_exists"
    DANGLING_TOOL_STATE = "dangling_tool_state"
    PENDING_PERMISSION = "pending_permission"
    BACKGROUND_OPERATION_PENDING = "background_operation_pending"
    WORKSPACE_IDENTITY_MISMATCH = "workspace_identity_mismatch"
    WORKSPACE_IDENTITY_MISSING = "workspace_identity_missing"
    TOOL_CATALOG_MISMATCH = "tool_catalog_mismatch"
    RUNTIME_OFFSET_MISMATCH = "runtime_offset_mismatch"
    RUNTIME_LEDGER_EMPTY = "runtime_ledger_empty"
    RUNTIME_LEDGER_UNREADABLE = "runtime_ledger_unreadable"
    RUNTIME_IDENTITY_MISMATCH = "runtime_identity_mismatch"
    CONTINUATION_IDENTITY_REUSED = "continuation_identity_reused"
    TERMINAL_REPAIR_FAILED = "terminal_repair_failed"
    PROVIDER_RESUME_HEAD_UNSUPPORTED = "provider_resume_head_unsupported"
    PROVIDER_RESUME_BOUNDARY_UNSUPPORTED = "provider_resume_boundary_unsupported"
    PROVIDER_REPLAY_NON_SUFFIX_GAP = "provider_replay_non_suffix_gap"
    SOURCE_RUN_UNREADABLE = "source_run_unreadable"
    SOURCE_PREFIX_DIGEST_MISMATCH = "source_prefix_digest_mismatch"
    RUNTIME_LINEAGE_CYCLE = "runtime_lineage_cycle"
    RUNTIME_LINEAGE_DEPTH_EXCEEDED = "runtime_lineage_depth_exceeded"
    RUNTIME_LINEAGE_MISSING = "runtime_lineage_missing"
    RUNTIME_LINEAGE_START_MISMATCH = "runtime_lineage_start_mismatch"
    RUNTIME_LINEAGE_REPLAY_MISMATCH = "runtime_lineage_replay_mismatch"
    RUNTIME_LINEAGE_CLAIM_MISMATCH = "runtime_lineage_claim_mismatch"
    CONTINUATION_AUTHORITY_UNAVAILABLE = "continuation_authority_unavailable"
    CONTINUATION_CLAIM_CONFLICT = "continuation_claim_conflict"
    SAFETY_OBSERVATION_UNAVAILABLE = "safety_observation_unavailable"
    # The session folder is gone (moved or deleted); the user can point the session at its new
    # place, proven the same workspace by its marker.
    WORKSPACE_FOLDER_MISSING = "workspace_folder_missing"
    # The files against the boundary checkpoint (docs/design/workspace.md section 3).
    WORKSPACE_DRIFT = "workspace_drift"
    WORKSPACE_CHECKPOINT_STALE = "workspace_checkpoint_stale"
    WORKSPACE_CHECKPOINT_FAILED = "workspace_checkpoint_failed"
    WORKSPACE_CHECKPOINT_MISSING = "workspace_checkpoint_missing"
    # The run ended because the history did not fit the model's context window: resuming would
    # send it again (a new message, with the oversized turn left out, is the way on).
    PROVIDER_HISTORY_TOO_LONG = "provider_history_too_long"


class RevalidationCode(StrEnum):
    """Execution revalidation between plan and provider call."""

    SOURCE_IDENTITY_CHANGED = "source_identity_changed"
    SOURCE_TERMINAL_CHANGED = "source_terminal_changed"
    SOURCE_HIGH_WATER_CHANGED = "source_high_water_changed"
    SOURCE_LEDGER_IDENTITY_CHANGED = "source_ledger_identity_changed"
    SOURCE_REPLAY_CHANGED = "source_replay_changed"
    WORKSPACE_IDENTITY_CHANGED = "workspace_identity_changed"
    BACKGROUND_OPERATION_STARTED = "background_operation_started"
    TOOL_CATALOG_CHANGED = "tool_catalog_changed"
    CONTINUATION_CLAIM_CONFLICT = "continuation_claim_conflict"
    TARGET_RUN_CONFLICT = "target_run_conflict"
    WORKSPACE_TREE_CHANGED = "workspace_tree_changed"
