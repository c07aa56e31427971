"""The Phase 0 crash-contract ledger: one legacy tool turn per failpoint
(docs/design/recovery.md section 2).

Each failpoint Pk uses its own identity (``session-Pk``, ``run-Pk``, ``invocation-run-Pk``,
``turn-run-Pk``) and the same four events: the user's request, a Bash call, its response (no
``isError``) and a failed terminal event. No T1 marker: the ledger is legacy, so a call without a
response is ``indeterminate`` rather than "not dispatched". A failpoint's committed prefix is the
first ``PREFIX_EVENT_COUNTS[prefix]`` events.
"""

from __future__ import annotations

from runtime.ledger.event_model import RuntimeEvent, decode_event
from runtime.recovery.failpoints import CommittedPrefix

PREFIX_EVENT_COUNTS: dict[CommittedPrefix, int] = {
    CommittedPrefix.BEFORE_FUNCTION_CALL: 1,
    CommittedPrefix.AFTER_FUNCTION_CALL: 2,
    CommittedPrefix.AFTER_FUNCTION_RESPONSE: 3,
    CommittedPrefix.AFTER_TERMINAL_EVENT: 4,
}

# What docs/design/recovery.md section 2 requires of each prefix: disposition, operation
# statuses, replay ids.
REQUIRED_DECISIONS: dict[CommittedPrefix, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    CommittedPrefix.BEFORE_FUNCTION_CALL: ("safe_replay", (), ("user",)),
    CommittedPrefix.AFTER_FUNCTION_CALL: ("blocked", ("indeterminate",), ("user",)),
    CommittedPrefix.AFTER_FUNCTION_RESPONSE: (
        "safe_replay",
        ("succeeded",),
        ("user", "call", "response"),
    ),
    CommittedPrefix.AFTER_TERMINAL_EVENT: (
        "safe_replay",
        ("succeeded",),
        ("user", "call", "response", "terminal"),
    ),
}


def crash_identity(failpoint_id: str) -> dict[str, str]:
    return {
        "sessionId": f"session-{failpoint_id}",
        "invocationId": f"invocation-run-{failpoint_id}",
        "runId": f"run-{failpoint_id}",
        "turnId": f"turn-run-{failpoint_id}",
    }


def crash_template_events(failpoint_id: str) -> list[RuntimeEvent]:
    """All four template events of ``failpoint_id`` (slice for a committed prefix)."""
    identity = crash_identity(failpoint_id)

    def event(event_id: str, ts: int, role: str, author: str, **rest: object) -> RuntimeEvent:
        return decode_event(
            {"id": event_id, **identity, "ts": ts, "partial": False, "role": role, "author": author}
            | rest
        )

    return [
        event("user", 1, "user", "user", content={"kind": "text", "text": "run the tool"}),
        event(
            "call",
            2,
            "model",
            "agent",
            content={
                "kind": "function_call",
                "id": "tool-1",
                "name": "Bash",
                "args": {"command": "touch marker"},
            },
        ),
        event(
            "response",
            3,
            "tool",
            "tool",
            content={
                "kind": "function_response",
                "id": "tool-1",
                "name": "Bash",
                "result": {"exitCode": 0},
            },
        ),
        event("terminal", 4, "system", "system", status="failed", actions={"endInvocation": True}),
    ]


def committed_prefix_events(failpoint_id: str, prefix: CommittedPrefix) -> list[RuntimeEvent]:
    return crash_template_events(failpoint_id)[: PREFIX_EVENT_COUNTS[prefix]]
