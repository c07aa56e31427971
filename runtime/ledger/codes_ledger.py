"""The ledger's codes: lanes, scanner issues, transitions and the store writers' refusals.

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
