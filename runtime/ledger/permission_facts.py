"""Reading permission facts: which requests of a run are still open.

A ``permissionRequest`` is open until a ``permissionDecision`` or a ``permissionClosure`` with the
same ``requestId`` follows it (docs/design/ledger.md section 1). Startup recovery closes the open
requests of orphaned runs; the continuation planner parks on any that remain.
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime.ledger.event_model import RuntimeEvent


def open_permission_requests(events: Iterable[RuntimeEvent]) -> list[tuple[str, str]]:
    """``(request event id, request id)`` of every unanswered request, in ledger order."""
    open_requests: dict[str, str] = {}
    for event in events:
        actions = event.get("actions")
        if actions is None or event["partial"]:
            continue
        if "permissionRequest" in actions:
            open_requests[actions["permissionRequest"]["requestId"]] = event["id"]
        if "permissionDecision" in actions:
            open_requests.pop(actions["permissionDecision"]["requestId"], None)
        if "permissionClosure" in actions:
            open_requests.pop(actions["permissionClosure"]["requestId"], None)
    return [(event_id, request_id) for request_id, event_id in open_requests.items()]
