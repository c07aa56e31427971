"""Hypothesis strategies for JSON values and RuntimeEvent v1 events (property tests)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from runtime.ledger.event_model import MAX_SAFE_INTEGER

# Characters where RFC 8785's UTF-16 key order differs from code-point order live above U+E000
# and in the astral planes; sprinkle them in on purpose.
_SPECIAL = st.sampled_from(
    ["\ue000", "\uf8ff", "\ufb01", "\uff01", "\uffff", "\U00010000", "\U0001f600", "\U0010fffd"]
)
_CHARS = st.characters(exclude_categories=["Cs"])  # no lone surrogates
TEXT = st.text(st.one_of(_CHARS, _SPECIAL), max_size=8)
KEYS = st.text(st.one_of(_CHARS, _SPECIAL, st.sampled_from("abAB01_")), max_size=6)
NON_EMPTY = st.text(st.one_of(_CHARS, st.sampled_from("abc-_1")), min_size=1, max_size=8)

SAFE_INTS = st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
FINITE_FLOATS = st.floats(allow_nan=False, allow_infinity=False).filter(
    # RFC 8785 writes these as integer literals outside the safe range: the decoder refuses them
    lambda number: not (number.is_integer() and MAX_SAFE_INTEGER < abs(number) < 1e21)
)
JSON_SCALARS = st.one_of(st.none(), st.booleans(), SAFE_INTS, FINITE_FLOATS, TEXT)
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=4)
    ),
    max_leaves=16,
)
JSON_OBJECTS = st.dictionaries(KEYS, JSON_VALUES, max_size=4)
DIGESTS = st.binary(min_size=32, max_size=32).map(lambda raw: "sha256:" + raw.hex())


def _optional(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {key: value for key, value in required.items()},
        optional={key: value for key, value in optional.items()},
    )


CONTENT = st.one_of(
    _optional({"kind": st.just("text"), "text": TEXT}, {"displayText": TEXT}),
    _optional({"kind": st.just("thinking"), "text": TEXT}, {"signature": TEXT}),
    st.fixed_dictionaries(
        {"kind": st.just("function_call"), "id": TEXT, "name": TEXT, "args": JSON_VALUES}
    ),
    _optional(
        {"kind": st.just("function_response"), "id": TEXT, "name": TEXT, "result": JSON_VALUES},
        {"isError": st.booleans()},
    ),
    _optional({"kind": st.just("error"), "message": TEXT}, {"code": TEXT, "reason": TEXT}),
)

TOOL_DISPATCH = _optional(
    {
        "protocol": st.just("t1_after_preflight_v1"),
        "operationId": NON_EMPTY,
        "providerToolCallId": NON_EMPTY,
        "toolName": NON_EMPTY,
        "canonicalArgsHash": DIGESTS,
        "recoveryMode": st.sampled_from(
            ["replay_safe", "idempotent", "reconcile", "never_auto_retry"]
        ),
    },
    {
        "evidence": st.fixed_dictionaries(
            {
                "kind": st.just("file_state_v1"),
                "path": NON_EMPTY,
                "workspaceIdentity": NON_EMPTY,
                "before": _optional(
                    {"exists": st.booleans()},
                    {"sha256": DIGESTS, "size": st.integers(0, MAX_SAFE_INTEGER)},
                ),
                "expectedAfter": st.fixed_dictionaries(
                    {
                        "exists": st.just(True),
                        "sha256": DIGESTS,
                        "size": st.integers(0, MAX_SAFE_INTEGER),
                    }
                ),
            }
        )
    },
)

ACTIONS = _optional(
    {},
    {
        "stateDelta": JSON_OBJECTS,
        "endInvocation": st.booleans(),
        "tokenUsage": st.fixed_dictionaries(
            {"input": st.integers(0, 10**9), "output": st.integers(0, 10**9)}
        ),
        "permissionRequest": st.fixed_dictionaries(
            {
                "requestId": NON_EMPTY,
                "toolName": NON_EMPTY,
                "toolCallId": NON_EMPTY,
                "summary": TEXT,
            }
        ),
        "permissionDecision": st.fixed_dictionaries(
            {"requestId": NON_EMPTY, "decision": st.sampled_from(["allow", "deny"])}
        ),
        "runtimeProtocol": st.just({"toolBoundary": "t1_after_preflight_v1"}),
        "toolDispatch": TOOL_DISPATCH,
        "toolRecovery": st.fixed_dictionaries(
            {
                "kind": st.sampled_from(
                    ["maka.tool.reconcile_result", "maka.tool.recovery_decision"]
                ),
                "version": st.just(1),
                "payload": JSON_OBJECTS,
            }
        ),
    },
)

REFS = _optional(
    {},
    {
        "toolCallId": TEXT,
        "operationId": TEXT,
        "stepId": TEXT,
        "sourceInvocationId": TEXT,
        "sourceRunId": TEXT,
        "sourceTurnId": TEXT,
        "sourceRuntimeEventHighWater": st.integers(0, MAX_SAFE_INTEGER),
    },
)

EVENTS = _optional(
    {
        "id": NON_EMPTY,
        "sessionId": NON_EMPTY,
        "invocationId": NON_EMPTY,
        "runId": NON_EMPTY,
        "turnId": NON_EMPTY,
        "ts": st.integers(0, MAX_SAFE_INTEGER),
        "partial": st.booleans(),
        "role": st.sampled_from(["user", "model", "tool", "system"]),
        "author": st.sampled_from(["user", "host", "agent", "tool", "system"]),
    },
    {
        "modelVisibility": st.sampled_from(["visible", "hidden"]),
        "status": st.sampled_from(["streaming", "completed", "failed", "aborted", "cancelled"]),
        "content": CONTENT,
        "actions": ACTIONS,
        "refs": REFS,
    },
)
"""Decodable RuntimeEvents (any lane, including conflicting ones: they still decode)."""
