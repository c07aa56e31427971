"""Recovery decisions, attestations, ledger files, the doctor's findings and the
host's and the CLI's own refusals.

Part of ``runtime/ledger/codes.py`` (import the codes from there): append-only, never rename a
member or reuse a value for another meaning."""

from __future__ import annotations

from enum import StrEnum


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
    # ``--note ""`` or only spaces: leave the note out instead.
    ATTESTATION_NOTE_EMPTY = "attestation_note_empty"


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
    # ``maka gui`` on Linux with no display to open its window on (no DISPLAY, no
    # WAYLAND_DISPLAY, no QT_QPA_PLATFORM): a terminal over SSH, a server.
    DISPLAY_UNAVAILABLE = "display_unavailable"
    FAILPOINT_UNKNOWN = "failpoint_unknown"
    # A command served by the running desktop (docs/design/hosts.md section 1).
    HOST_STOPPED = "host_stopped"
    HOST_UNREACHABLE = "host_unreachable"
