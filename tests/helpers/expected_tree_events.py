"""Events of a run that takes workspace snapshots and writes files, for the tests of the
expected tree (runtime/continuation/expected_tree.py) and of the permission bits its writes
leave (runtime/continuation/checkpoint_evidence.py): its first event, and ``write_file`` calls
whose dispatch carries the file evidence the real tool records."""

from __future__ import annotations

from typing import Any

from runtime.ledger.event_model import RuntimeEvent
from tests.helpers.ledger_builders import (
    RunIds,
    bound_response,
    call_event,
    dispatch_event,
    user_text,
)

IDS = RunIds()


def run_start() -> RuntimeEvent:
    """The run's first event (the user's message with the run's marker), its snapshots on."""
    first = user_text(marker=True, ids=IDS)
    first["actions"]["runtimeProtocol"]["workspaceCheckpoints"] = {"mode": "git_v1"}
    return first


def write_dispatched(
    call_id: str, path: str, digest: str = "1", size: int = 1, *, there: bool = False
) -> list[RuntimeEvent]:
    """A ``write_file`` call of ``path`` and its dispatch, whose evidence expects the file to
    hold ``size`` bytes of the hash ``digest * 64`` afterwards; ``there``: the file was there
    before it (1 byte, of the hash ``"0" * 64``)."""
    before: dict[str, Any] = {"exists": there}
    if there:
        before.update({"sha256": "sha256:" + "0" * 64, "size": 1})
    evidence = {
        "kind": "file_state_v1",
        "path": path,
        "workspaceIdentity": "workspace:v1:x",
        "before": before,
        "expectedAfter": {"exists": True, "sha256": "sha256:" + digest * 64, "size": size},
    }
    call = call_event(call_id, "write_file", {"path": path, "content": "x"}, ids=IDS)
    return [call, dispatch_event(call, evidence=evidence)]


def write_done(call_id: str, path: str, *, there: bool) -> list[RuntimeEvent]:
    """``write_dispatched`` and its result: the write the ledger proves done."""
    call, dispatch = write_dispatched(call_id, path, there=there)
    return [call, dispatch, bound_response(call, {"path": path}, is_error=False)]
