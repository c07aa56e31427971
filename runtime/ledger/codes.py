"""Every stable machine code of docs/design/codes.md and docs/design/ledger.md, as append-only
``StrEnum`` s.

Codes are persisted and shown verbatim; never rename a member or reuse a value for another
meaning. Sentences and severities for the user live in one presentation table, not here.
"""

from __future__ import annotations

from enum import StrEnum


class Lane(StrEnum):
    ORDINARY = "ordinary"
    FUNCTION_CALL = "function_call"
    TOOL_DISPATCH = "tool_dispatch"
    FUNCTION_RESPONSE = "function_response"
    RECONCILE_RESULT = "reconcile_result"
    RECOVERY_DECISION = "recovery_decision"


class ScanIssueCode(StrEnum):
    """Tool-ledger scanner issues (docs/design/ledger.md section 4)."""

    DUPLICATE_EVENT_ID = "duplicate_event_id"
    SEMANTIC_LANE_CONFLICT = "semantic_lane_conflict"
    DUPLICATE_CALL = "duplicate_call"
    DUPLICATE_OPERATION = "duplicate_operation"
    DUPLICATE_DISPATCH = "duplicate_dispatch"
    DUPLICATE_RESPONSE = "duplicate_response"
    ORPHAN_RESPONSE = "orphan_response"
    CANONICAL_ARGS_HASH_CONFLICT = "canonical_args_hash_conflict"
    INVOCATION_IDENTITY_CONFLICT = "invocation_identity_conflict"
    IDENTITY_CONFLICT = "identity_conflict"
    EVENT_ORDER_CONFLICT = "event_order_conflict"
    PROTOCOL_MARKER_INVALID = "protocol_marker_invalid"
    # A workspace checkpoint fact that is not one (visible to the model, carrying content,
    # status or refs, another action beside it): the check the store's writer and import make.
    WORKSPACE_FACT_MALFORMED = "workspace_fact_malformed"


class TransitionKind(StrEnum):
    GENERIC_APPEND = "generic_append"
    T1_PREPARE = "t1_prepare"
    T2_OUTCOME = "t2_outcome"
    RECOVERY_BUNDLE = "recovery_bundle"


class WriterRejectionCode(StrEnum):
    """Refusals of the store's writers (docs/design/codes.md, store refusals)."""

    RESERVED_TOOL_BOUNDARY_FACT = "reserved_tool_boundary_fact"
    RESERVED_RECOVERY_FACT = "reserved_recovery_fact"
    RESERVED_CONTINUATION_FACT = "reserved_continuation_fact"
    RESERVED_WORKSPACE_FACT = "reserved_workspace_fact"
    TRANSITION_SHAPE_CONFLICT = "transition_shape_conflict"
    RUN_SEALED = "run_sealed"
    IDENTITY_CONFLICT = "identity_conflict"
    # A terminal event (terminal status or endInvocation) has its own writer: the run ending
    # commits the event and the terminal run header in one transaction.
    RESERVED_RUN_ENDING_FACT = "reserved_run_ending_fact"
    # A tool operation that is already settled (outcome committed, completed or parked) accepts
    # no other fact; only a byte-identical retry of what settled it.
    OPERATION_SETTLED = "operation_settled"


class StoreCode(StrEnum):
    """Database-level refusals."""

    SCHEMA_NEWER_THAN_PROGRAM = "schema_newer_than_program"
    STORE_LOCKED = "store_locked"
    STORE_CORRUPT = "store_corrupt"
    # A read-only open found no database, or one that needs a migration it may not perform.
    STORE_NOT_FOUND = "store_not_found"
    SCHEMA_UPGRADE_REQUIRED = "schema_upgrade_required"
    STORE_READ_ONLY = "store_read_only"
    STORE_IO_FAILED = "store_io_failed"
    # The disk (or the user's quota) is full; the data folder, its lock or database file cannot
    # be written. Never ``store_locked``: nobody else holds anything.
    DISK_FULL = "disk_full"
    DATA_DIR_READ_ONLY = "data_dir_read_only"
    # Run headers and sessions.
    SESSION_NOT_FOUND = "session_not_found"
    RUN_NOT_FOUND = "run_not_found"
    EVENT_NOT_FOUND = "event_not_found"
    RUN_STATUS_CONFLICT = "run_status_conflict"
    # A function_response or recovery bundle for an operation the store never prepared.
    OPERATION_NOT_FOUND = "operation_not_found"
    # Removing a session that other sessions were branched from (their history is its prefix).
    SESSION_HAS_BRANCHES = "session_has_branches"
    # The writer's session lease is not (or no longer) its own: another host took the session
    # over, or the lease ran out before a T1 or an admission (docs/postgres.md). Nothing was
    # committed.
    SESSION_LEASE_LOST = "session_lease_lost"
    # The database URL (``MAKA_DATABASE_URL`` or the desktop's Database setting) is not a
    # PostgreSQL URL Maka can use: another scheme, no host, a port that is not a number.
    DATABASE_URL_INVALID = "database_url_invalid"
    # A PostgreSQL URL is selected but the driver (the ``postgres`` extra, psycopg 3) is not
    # installed.
    POSTGRES_DRIVER_MISSING = "postgres_driver_missing"


class WorkspaceMarkerCode(StrEnum):
    """The workspace identity marker ``.maka/workspace.json`` (or the legacy
    ``.maka-workspace.json``; never replaced when invalid)."""

    WORKSPACE_NOT_FOUND = "workspace_not_found"
    WORKSPACE_MARKER_INVALID = "workspace_marker_invalid"
    WORKSPACE_MARKER_SYMLINK = "workspace_marker_symlink"
    WORKSPACE_MARKER_NOT_FILE = "workspace_marker_not_file"
    WORKSPACE_MARKER_UNREADABLE = "workspace_marker_unreadable"
    WORKSPACE_MARKER_WRITE_FAILED = "workspace_marker_write_failed"
    # The folder holds both markers and they name different workspaces.
    WORKSPACE_MARKERS_DISAGREE = "workspace_markers_disagree"


class CheckpointUnavailableCode(StrEnum):
    """Why a session runs without workspace checkpoints (docs/design/workspace.md section 1): its
    mode is ``unavailable`` with one of these reasons, shown in the session and every resume
    diagnostic."""

    CHECKPOINT_GIT_MISSING = "checkpoint_git_missing"
    CHECKPOINT_NESTED_REPOSITORY = "checkpoint_nested_repository"
    CHECKPOINT_LFS_UNSUPPORTED = "checkpoint_lfs_unsupported"
    CHECKPOINT_TOO_LARGE = "checkpoint_too_large"
    # The user turned checkpoints off (``MAKA_WORKSPACE_CHECKPOINTS=off``).
    CHECKPOINT_TURNED_OFF = "checkpoint_turned_off"


class CheckpointFailureCode(StrEnum):
    """Why one capture failed (``workspaceCheckpointFailed.reasonCode``); the tool and the turn
    go on (docs/design/workspace.md section 2)."""

    CHECKPOINT_GIT_FAILED = "checkpoint_git_failed"
    CHECKPOINT_GIT_TIMEOUT = "checkpoint_git_timeout"
    CHECKPOINT_FOLDER_UNREADABLE = "checkpoint_folder_unreadable"
    CHECKPOINT_NESTED_REPOSITORY = "checkpoint_nested_repository"


class RestoreCode(StrEnum):
    """Why a restored copy could not be made (``maka resume --restore-to``); nothing is admitted."""

    WORKSPACE_RESTORE_TARGET_NOT_EMPTY = "workspace_restore_target_not_empty"
    WORKSPACE_RESTORE_TARGET_INSIDE = "workspace_restore_target_inside"
    # --restore-to / --rebaseline on a resume that no workspace park stands in the way of (the
    # files match, or the session has no snapshots): the decision would be dropped silently.
    WORKSPACE_DECISION_NOT_OFFERED = "workspace_decision_not_offered"
    # --restore-to on a park no snapshot of the lineage is left to copy from (every one is gone
    # from the checkpoint store): only --rebaseline is offered.
    WORKSPACE_RESTORE_UNAVAILABLE = "workspace_restore_unavailable"
    WORKSPACE_RESTORE_FAILED = "workspace_restore_failed"
    # The snapshot's stored bytes do not hash to what it recorded (an object changed or removed
    # in the private checkpoint store): nothing is written.
    WORKSPACE_RESTORE_SNAPSHOT_DAMAGED = "workspace_restore_snapshot_damaged"


class BranchCode(StrEnum):
    """Why ``maka branch`` (or ``/branch``) made no new session; nothing is recorded."""

    # --at names no event of the session.
    BRANCH_EVENT_NOT_FOUND = "branch_event_not_found"
    # The event is not a committed boundary: a user message, a tool result or a run's ending.
    BRANCH_BOUNDARY_INVALID = "branch_boundary_invalid"
    # A tool call before the boundary has no settled outcome there (the resume gates): the
    # history up to it cannot be shown to a model.
    BRANCH_BOUNDARY_UNSETTLED = "branch_boundary_unsettled"
    # A turn of the source session is running, or was interrupted and not yet repaired.
    BRANCH_SOURCE_RUNNING = "branch_source_running"
    # No snapshot of the folder is bound to the boundary (none was taken, or its objects are
    # gone): --current-files branches with a copy of the folder as it is now.
    BRANCH_SNAPSHOT_UNAVAILABLE = "branch_snapshot_unavailable"
    # The copy's files differ from the snapshot's recorded tree; it is left in place, unused.
    BRANCH_COPY_MISMATCH = "branch_copy_mismatch"
    # The source's recorded history no longer hashes to the digest the branch recorded.
    BRANCH_SOURCE_CHANGED = "branch_source_changed"


class TransferCode(StrEnum):
    """Session export/import (``maka export`` / ``maka import``)."""

    SESSION_NOT_FOUND = "session_not_found"
    IMPORT_FILE_UNREADABLE = "import_file_unreadable"
    IMPORT_LINE_INVALID = "import_line_invalid"
    IMPORT_STRUCTURE_INVALID = "import_structure_invalid"
    IMPORT_TORN_TAIL = "import_torn_tail"
    IMPORT_CONFLICT = "import_conflict"
    EXPORT_TARGET_EXISTS = "export_target_exists"
    EXPORT_TARGET_INVALID = "export_target_invalid"
    EXPORT_WRITE_FAILED = "export_write_failed"
    IMPORT_CHECKPOINTS_MISSING = "import_checkpoints_missing"
    IMPORT_CHECKPOINTS_INVALID = "import_checkpoints_invalid"
    # A branched session's source (the run and prefix its branchStart fact names) is not in the
    # data directory, or its history differs: import the source first.
    IMPORT_BRANCH_SOURCE_MISSING = "import_branch_source_missing"
    IMPORT_CHECKPOINTS_FAILED = "import_checkpoints_failed"


class BundleCode(StrEnum):
    """Recovery-bundle validation codes, in the order they are checked."""

    RECOVERY_FACT_SHAPE_CONFLICT = "recovery_fact_shape_conflict"
    CALL_IDENTITY_CONFLICT = "call_identity_conflict"
    CANONICAL_ARGS_HASH_CONFLICT = "canonical_args_hash_conflict"
    DISPATCH_IDENTITY_CONFLICT = "dispatch_identity_conflict"
    RECOVERY_MODE_UNSUPPORTED = "recovery_mode_unsupported"
    RECONCILE_FACT_INVALID = "reconcile_fact_invalid"
    DECISION_FACT_INVALID = "decision_fact_invalid"
    RECOVERY_FACT_IDENTITY_CONFLICT = "recovery_fact_identity_conflict"
    OPERATION_IDENTITY_CONFLICT = "operation_identity_conflict"
    OUTCOME_REQUIRED = "outcome_required"
    OUTCOME_IDENTITY_CONFLICT = "outcome_identity_conflict"
    OUTCOME_NOT_SUCCESSFUL = "outcome_not_successful"
    OUTCOME_REFERENCE_CONFLICT = "outcome_reference_conflict"
    OUTCOME_FOR_PARKED = "outcome_for_parked"
    RECONCILE_DECISION_CONFLICT = "reconcile_decision_conflict"
    EVIDENCE_ORDER_CONFLICT = "evidence_order_conflict"
    EVENT_ORDER_CONFLICT = "event_order_conflict"
    # Appended (docs/design/recovery.md section 8): a user's attestation whose recovered outcome
    # does not say what the attestation says (its choice, time, note, error flag).
    ATTESTATION_OUTCOME_CONFLICT = "attestation_outcome_conflict"


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


ISSUE_CODE = "issueCode"
"""A diagnostic's detail field naming the ledger check (``ScanIssueCode``) a damaged record
failed: carried as a field, never read out of the message."""
RESOLVER_REASON = "resolverReason"
"""A diagnostic's detail field naming the resolver's reason (``ResolverReason``) for a call that
is parked, unsettled or corrupt."""


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
    # A restored copy would not be the folder at the stop (a stale, failed or missing snapshot):
    # what it would hold instead (docs/design/workspace.md 4).
    WORKSPACE_RESTORE_POINT = "workspace_restore_point"
    # Continuing with the current files is offered and no snapshot is left to compare them
    # with: the model is told that files may have changed, not which (docs/design/workspace.md 4).
    WORKSPACE_REBASELINE_UNCOMPARED = "workspace_rebaseline_uncompared"


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


class FailureClass(StrEnum):
    """Run endings (``stateDelta.failureClass`` of a terminal event, ``runs.failure_class``)."""

    APP_RESTARTED = "app_restarted"
    PROVIDER_ERROR = "provider_error"
    TOOL_BOUNDARY_FAILED = "tool_boundary_failed"
    CANCELLED_BY_USER = "cancelled_by_user"
    CONTINUATION_REVALIDATION_FAILED = "continuation_revalidation_failed"


class RecoveryReasonCode(StrEnum):
    """``reasonCode`` of a recovery decision fact (docs/design/ledger.md section 4)."""

    RECONCILE_MATCHES_EXPECTED_STATE = "reconcile_matches_expected_state"
    RECONCILE_MATCHES_PRIOR_STATE = "reconcile_matches_prior_state"
    RECONCILE_DIVERGED = "reconcile_diverged"
    RECONCILE_UNREADABLE = "reconcile_unreadable"
    USER_ATTESTED_RAN = "user_attested_ran"
    USER_ATTESTED_NOT_RUN = "user_attested_not_run"


class AttestationRefusal(StrEnum):
    """Why the store refuses to record a user's attestation (docs/design/recovery.md section 8).
    Besides these: ``operation_not_found``, ``operation_settled`` (another bundle settled it) and
    ``background_operation_pending`` (a process of the call is still recorded alive)."""

    # The operation is not ``indeterminate`` with ``dispatch_without_response`` (already
    # settled, parked, corrupt, or never dispatched).
    ATTESTATION_NOT_APPLICABLE = "attestation_not_applicable"
    # The run was started by the process that owns the data directory now: it may still run.
    RUN_NOT_ORPHANED = "run_not_orphaned"
    # A file write: its evidence decides, never the user's word.
    ATTESTATION_NOT_OFFERED_FOR_RECONCILE = "attestation_not_offered_for_reconcile"
    ATTESTATION_NOTE_TOO_LONG = "attestation_note_too_long"


class LedgerFileCode(StrEnum):
    """Problems of a JSONL ledger file that are not problems of one decoded event."""

    TORN_LAST_LINE = "torn_last_line"
    EMPTY_LINE = "empty_line"
    LEDGER_FILE_UNREADABLE = "ledger_file_unreadable"


class DoctorCode(StrEnum):
    """Problems ``maka doctor`` reports besides scanner, bundle and workspace-marker codes."""

    INTEGRITY_CHECK_FAILED = "integrity_check_failed"
    FOREIGN_KEY_VIOLATION = "foreign_key_violation"
    EVENT_UNREADABLE = "event_unreadable"
    EVENT_SEQ_GAP = "event_seq_gap"
    EVENT_AFTER_TERMINAL = "event_after_terminal"
    HEADER_TERMINAL_MISMATCH = "header_terminal_mismatch"
    PROJECTION_MISMATCH = "projection_mismatch"
    SCHEMA_VERSION_MISMATCH = "schema_version_mismatch"
    DATA_NOT_PRIVATE = "data_not_private"
    # ``maka doctor --verify-snapshots``: a snapshot's stored bytes do not hash to what it
    # recorded (the check a restore makes before writing).
    WORKSPACE_CHECKPOINT_DAMAGED = "workspace_checkpoint_damaged"


class HostCode(StrEnum):
    """Refusals of the desktop host and the CLI that belong to no other family
    (docs/design/codes.md)."""

    HOST_NOT_READY = "host_not_ready"
    # The host is closing (draining its work); the wire code has always been ``host_draining``.
    HOST_DRAINING = "host_draining"
    SESSION_BUSY = "session_busy"
    INTERNAL_FAILURE = "internal_failure"
    BACKGROUND_OPERATION_PENDING = "background_operation_pending"
    PERMISSION_NOT_PENDING = "permission_not_pending"
    STARTUP_RECOVERY_FAILED = "startup_recovery_failed"
    INVALID_CWD = "invalid_cwd"
    CWD_REQUIRED = "cwd_required"
    PROMPT_EMPTY = "prompt_empty"
    TEXT_NOT_UTF8 = "text_not_utf8"
    SESSION_CWD_MISMATCH = "session_cwd_mismatch"
    WORKSPACE_IDENTITY_MISSING = "workspace_identity_missing"
    WORKSPACE_IDENTITY_DIFFERS = "workspace_identity_differs"
    # A session the desktop was asked about does not exist.
    NOT_FOUND = "not_found"
    # The CLI's own.
    USAGE_INVALID = "usage_invalid"
    INVALID_ARGUMENT = "invalid_argument"
    INTERRUPTED = "interrupted"
    CONFIRMATION_REQUIRED = "confirmation_required"
    COMMAND_UNAVAILABLE = "command_unavailable"
    DATA_DIR_INVALID = "data_dir_invalid"
    DATA_DIR_UNAVAILABLE = "data_dir_unavailable"
    FAILPOINT_UNKNOWN = "failpoint_unknown"
    # A command served by the running desktop (docs/design/hosts.md section 1).
    HOST_STOPPED = "host_stopped"
    HOST_UNREACHABLE = "host_unreachable"
