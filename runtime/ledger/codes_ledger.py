"""The ledger's and the store's codes: lanes, scanner issues, transitions, writer and
database refusals, run endings.

Part of ``runtime/ledger/codes.py`` (import the codes from there): append-only, never rename a
member or reuse a value for another meaning."""

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


class FailureClass(StrEnum):
    """Run endings (``stateDelta.failureClass`` of a terminal event, ``runs.failure_class``)."""

    APP_RESTARTED = "app_restarted"
    PROVIDER_ERROR = "provider_error"
    TOOL_BOUNDARY_FAILED = "tool_boundary_failed"
    CANCELLED_BY_USER = "cancelled_by_user"
    CONTINUATION_REVALIDATION_FAILED = "continuation_revalidation_failed"
