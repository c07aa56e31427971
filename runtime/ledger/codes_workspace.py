"""The workspace's codes: its marker, checkpoints, restores, branches, transfers and
recovery bundles.

Part of ``runtime/ledger/codes.py`` (import the codes from there): append-only, never rename a
member or reuse a value for another meaning."""

from __future__ import annotations

from enum import StrEnum


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
    # The export's file (or the snapshots file beside it) would land in the data folder the
    # export reads: replacing its database, a -wal or a snapshot with the export destroys it.
    EXPORT_TARGET_INSIDE_DATA_DIR = "export_target_inside_data_dir"
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
